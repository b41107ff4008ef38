//! The hook bus: every [`Hook`] (built-in Rust ones such as redaction and the audit
//! trail, and the configured executables) hears the events it wants. Before-hooks decide
//! in order (allow, rewrite the payload, veto with a reason); observers are told without
//! the caller waiting, except in-process ones that keep records in order.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio_util::task::TaskTracker;

use crate::BoxFuture;

pub use squidbot_types::hooks::{AFTER_TOOL, BEFORE_TOOL, HookEvent};

/// What a hook is told about one event. Fields that don't concern the event are left out
/// of its JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookInput {
    /// The event.
    pub event: HookEvent,
    /// The tool called (`before_tool`, `after_tool`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool: String,
    /// Its arguments, a JSON object (`before_tool`, `after_tool`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub arguments: serde_json::Value,
    /// The person's message (`message_received`) or the reply (`before_reply`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The session the event belongs to.
    #[serde(default)]
    pub session: String,
    /// The context (user or group) of the session.
    #[serde(default)]
    pub context: String,
    /// The person the turn acts for, when known.
    #[serde(default)]
    pub user: Option<String>,
    /// What else the event carries: `ok` and `output` of a tool call, the `status` of a
    /// finished turn, the job of a run, the decision of an approval.
    #[serde(flatten)]
    pub detail: serde_json::Map<String, serde_json::Value>,
}

impl HookInput {
    /// An input for `event` in `session` of `context`, with nothing else yet.
    pub fn new(event: HookEvent, session: &str, context: &str) -> Self {
        Self {
            event,
            tool: String::new(),
            arguments: serde_json::Value::Null,
            text: None,
            session: session.to_owned(),
            context: context.to_owned(),
            user: None,
            detail: serde_json::Map::new(),
        }
    }

    /// The same input carrying `value` under `key` in its details.
    pub fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.detail.insert(key.to_owned(), value.into());
        self
    }
}

/// A before-hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// Go on as asked.
    Allow,
    /// Go on with this payload instead: the arguments (a JSON object) of a tool call, the
    /// text (a JSON string) of a message or reply.
    Rewrite(serde_json::Value),
    /// Stop it; the reason goes to the model (tool calls) or the person (messages,
    /// replies).
    Veto(String),
}

/// One hook: a built-in or the configured executables.
pub trait Hook: Send + Sync + fmt::Debug {
    /// Whether it wants to hear about `event` (for tool events, of a call of `tool`).
    fn wants(&self, event: HookEvent, tool: &str) -> bool;
    /// Decides on a before-event. Failures are the hook's to turn into a verdict (block
    /// or allow), so there is no error to handle here.
    fn before<'a>(&'a self, input: &'a HookInput) -> BoxFuture<'a, HookVerdict>;
    /// Observes an event.
    fn after(&self, input: HookInput) -> BoxFuture<'static, ()>;
    /// True for the built-in hooks: quick, in-process, run in line when they observe (so
    /// what they record is in order), and applied to streamed text as it streams (so a
    /// reply is not held back for them). Configured hooks observe on their own, never
    /// waited for, and a `before_reply` one holds the streamed reply until it decided.
    fn built_in(&self) -> bool {
        false
    }
}

/// Every hook, in order: built-ins that must see payloads first, then the configured
/// ones, then built-ins that must see them last (redaction of what hooks rewrote).
#[derive(Debug, Default)]
pub struct HookBus {
    hooks: Vec<Arc<dyn Hook>>,
    /// Observers running on their own, waited for on shutdown.
    tasks: TaskTracker,
}

impl HookBus {
    /// A bus running `hooks` in this order.
    pub fn new(hooks: Vec<Arc<dyn Hook>>) -> Self {
        Self { hooks, tasks: TaskTracker::new() }
    }

    /// Whether some hook wants `event` (of a call of `tool`).
    pub fn wants(&self, event: HookEvent, tool: &str) -> bool {
        self.hooks.iter().any(|hook| hook.wants(event, tool))
    }

    /// Asks every hook that wants it about a before-event, in order: a rewrite is what
    /// the next hook sees, a veto ends the round. The verdict is the last rewrite, if any.
    pub async fn decide(&self, input: &HookInput) -> HookVerdict {
        let mut input_now = None::<HookInput>;
        let mut rewritten = None;
        for hook in &self.hooks {
            let current = input_now.as_ref().unwrap_or(input);
            if !hook.wants(current.event, &current.tool) {
                continue;
            }
            match hook.before(current).await {
                HookVerdict::Allow => {}
                HookVerdict::Rewrite(payload) => {
                    let mut next = current.clone();
                    match &payload {
                        serde_json::Value::String(text) if current.event != HookEvent::BeforeTool => {
                            next.text = Some(text.clone())
                        }
                        _ => next.arguments = payload.clone(),
                    }
                    input_now = Some(next);
                    rewritten = Some(payload);
                }
                veto @ HookVerdict::Veto(_) => return veto,
            }
        }
        rewritten.map_or(HookVerdict::Allow, HookVerdict::Rewrite)
    }

    /// Tells every hook that wants it about an event: in-line observers now, the others
    /// on their own (never delaying the caller).
    pub async fn observe(&self, input: HookInput) {
        for hook in &self.hooks {
            if !hook.wants(input.event, &input.tool) {
                continue;
            }
            let observed = hook.after(input.clone());
            if hook.built_in() {
                observed.await;
            } else {
                self.tasks.spawn(observed);
            }
        }
    }

    /// [`HookBus::observe`] from code that can't wait (a decision taken in a
    /// synchronous call): the observers run on their own.
    pub fn observe_later(self: &Arc<Self>, input: HookInput) {
        if tokio::runtime::Handle::try_current().is_err() {
            tracing::warn!(event = %input.event, "no runtime to tell the hooks on; skipped");
            return;
        }
        let bus = self.clone();
        self.tasks.spawn(async move { bus.observe(input).await });
    }

    /// Whether a configured (not built-in) hook decides on replies, so the streamed reply
    /// must wait for its verdict.
    pub fn holds_replies(&self) -> bool {
        self.hooks.iter().any(|hook| !hook.built_in() && hook.wants(HookEvent::BeforeReply, ""))
    }

    /// Waits for observers still running (on shutdown); no more start afterwards.
    pub async fn close(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! Hooks for the agent's tests.

    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    /// Answers every before-event with one verdict (unless the event is the wrong one);
    /// records what it saw.
    #[derive(Debug)]
    pub struct FixedHooks {
        pub verdict: HookVerdict,
        /// The before-event the verdict is for; others are allowed.
        pub deciding: HookEvent,
        pub seen: Arc<Mutex<Vec<HookInput>>>,
        /// How long each observation takes.
        pub after_delay: Duration,
        pub observed: Arc<Mutex<Vec<HookInput>>>,
    }

    impl FixedHooks {
        pub fn new(verdict: HookVerdict) -> Self {
            Self::on(HookEvent::BeforeTool, verdict)
        }

        pub fn on(deciding: HookEvent, verdict: HookVerdict) -> Self {
            Self { verdict, deciding, seen: Arc::default(), after_delay: Duration::ZERO, observed: Arc::default() }
        }

        pub fn observed_events(&self) -> Vec<HookEvent> {
            self.observed.lock().unwrap().iter().map(|input| input.event).collect()
        }
    }

    impl Hook for FixedHooks {
        fn wants(&self, _event: HookEvent, _tool: &str) -> bool {
            true
        }

        fn before<'a>(&'a self, input: &'a HookInput) -> BoxFuture<'a, HookVerdict> {
            self.seen.lock().unwrap().push(input.clone());
            let verdict = if input.event == self.deciding { self.verdict.clone() } else { HookVerdict::Allow };
            Box::pin(async move { verdict })
        }

        fn after(&self, input: HookInput) -> BoxFuture<'static, ()> {
            let delay = self.after_delay;
            let observed = self.observed.clone();
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                observed.lock().unwrap().push(input);
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Rewrites a message by appending its mark, or vetoes.
    #[derive(Debug)]
    struct Marking(&'static str, Arc<Mutex<Vec<String>>>);

    impl Hook for Marking {
        fn wants(&self, event: HookEvent, _tool: &str) -> bool {
            event == HookEvent::MessageReceived
        }

        fn before<'a>(&'a self, input: &'a HookInput) -> BoxFuture<'a, HookVerdict> {
            let text = input.text.clone().unwrap_or_default();
            self.1.lock().unwrap().push(text.clone());
            let verdict = match self.0 {
                "veto" => HookVerdict::Veto("no".into()),
                mark => HookVerdict::Rewrite(serde_json::Value::String(format!("{text}{mark}"))),
            };
            Box::pin(async move { verdict })
        }

        fn after(&self, _input: HookInput) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    fn message(text: &str) -> HookInput {
        HookInput { text: Some(text.into()), ..HookInput::new(HookEvent::MessageReceived, "s", "owner") }
    }

    #[tokio::test]
    async fn rewrites_chain_in_order_and_a_veto_ends_the_round() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let bus = HookBus::new(vec![Arc::new(Marking("-a", seen.clone())), Arc::new(Marking("-b", seen.clone()))]);
        assert_eq!(bus.decide(&message("hi")).await, HookVerdict::Rewrite("hi-a-b".into()));
        assert_eq!(*seen.lock().unwrap(), ["hi", "hi-a"]);

        let seen = Arc::new(Mutex::new(Vec::new()));
        let bus = HookBus::new(vec![Arc::new(Marking("veto", seen.clone())), Arc::new(Marking("-b", seen.clone()))]);
        assert_eq!(bus.decide(&message("hi")).await, HookVerdict::Veto("no".into()));
        assert_eq!(*seen.lock().unwrap(), ["hi"], "the second hook never ran");
    }

    #[tokio::test]
    async fn hooks_that_want_nothing_of_the_event_are_not_asked() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let bus = HookBus::new(vec![Arc::new(Marking("-a", seen.clone()))]);
        let reply = HookInput { text: Some("x".into()), ..HookInput::new(HookEvent::BeforeReply, "s", "owner") };
        assert_eq!(bus.decide(&reply).await, HookVerdict::Allow);
        assert!(seen.lock().unwrap().is_empty());
        assert!(!bus.wants(HookEvent::BeforeReply, ""));
        assert!(bus.wants(HookEvent::MessageReceived, ""));
    }

    #[test]
    fn the_input_leaves_out_what_does_not_concern_the_event() {
        let input = message("hello").with("attempt", 2);
        let json = serde_json::to_value(&input).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"event": "message_received", "text": "hello", "session": "s", "context": "owner",
                               "user": null, "attempt": 2})
        );
        let back: HookInput = serde_json::from_value(json).unwrap();
        assert_eq!(back, input);
    }
}
