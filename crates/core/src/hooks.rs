//! The `ToolHooks` port: checks run right before a tool call (allow, rewrite its
//! arguments or veto it with a reason the model reads) and observers told after it.
//! Adapters (executables run in the sandbox) implement it; the agent only asks.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::BoxFuture;

pub use squidbot_types::hooks::{AFTER_TOOL, BEFORE_TOOL};

/// What a hook is told about one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookInput {
    /// `before_tool` or `after_tool`.
    pub event: String,
    /// The tool called.
    pub tool: String,
    /// Its arguments (a JSON object).
    pub arguments: serde_json::Value,
    /// The session the call belongs to.
    #[serde(default)]
    pub session: String,
    /// The context (user or group) of the session.
    #[serde(default)]
    pub context: String,
    /// The person the turn acts for, when known.
    #[serde(default)]
    pub user: Option<String>,
}

/// A before-hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// Run the call as asked.
    Allow,
    /// Run the call with these arguments instead (a JSON object).
    Rewrite(serde_json::Value),
    /// Don't run it; the reason goes to the model as the call's result.
    Veto(String),
}

/// How a tool call ended, for after-hooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// False when the call failed or was refused.
    pub ok: bool,
    /// What the model was given as the result.
    pub output: String,
}

/// The port: hooks around tool calls.
pub trait ToolHooks: Send + Sync + fmt::Debug {
    /// Decides on a call before it runs. Failures are the adapter's to turn into a
    /// verdict (block or allow, per hook), so there is no error to handle here.
    fn before_tool<'a>(&'a self, input: &'a HookInput) -> BoxFuture<'a, HookVerdict>;
    /// Tells observers how a call ended. The agent spawns the future and never waits
    /// for it on the reply path.
    fn after_tool(&self, input: HookInput, outcome: ToolOutcome) -> BoxFuture<'static, ()>;
}

#[cfg(test)]
pub(crate) mod fake {
    //! Hooks for the agent's tests.

    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    /// Answers every before-hook with one verdict; records what it saw.
    #[derive(Debug)]
    pub struct FixedHooks {
        pub verdict: HookVerdict,
        pub seen: Arc<Mutex<Vec<HookInput>>>,
        /// How long each after-hook takes.
        pub after_delay: Duration,
        pub after_done: Arc<Mutex<Vec<ToolOutcome>>>,
    }

    impl FixedHooks {
        pub fn new(verdict: HookVerdict) -> Self {
            Self { verdict, seen: Arc::default(), after_delay: Duration::ZERO, after_done: Arc::default() }
        }
    }

    impl ToolHooks for FixedHooks {
        fn before_tool<'a>(&'a self, input: &'a HookInput) -> BoxFuture<'a, HookVerdict> {
            self.seen.lock().unwrap().push(input.clone());
            let verdict = self.verdict.clone();
            Box::pin(async move { verdict })
        }

        fn after_tool(&self, _input: HookInput, outcome: ToolOutcome) -> BoxFuture<'static, ()> {
            let delay = self.after_delay;
            let done = self.after_done.clone();
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                done.lock().unwrap().push(outcome);
            })
        }
    }
}
