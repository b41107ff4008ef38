//! One user turn, step by step: record the input, prepare what its model calls share, then
//! call the model (retrying a context overflow), record the reply, run its tool calls and
//! record their results, until a final answer, a stop, an error or `max_turns`.

use std::sync::Arc;

use squidbot_types::ToolSpec;
use squidbot_types::message::{ToolCall, Usage};
use squidbot_types::people::Actor;
use squidbot_types::session::{EntryBody, MessageRole};
use tokio_util::sync::CancellationToken;

use super::redaction::{Outbound, TurnSink, redact};
use super::{
    Agent, AgentError, AgentEvents, ModelCallReport, TurnInput, TurnOutcome, TurnStatus, estimate_message_tokens,
    fit_history, tools,
};
use crate::hooks::{HookEvent, HookInput, HookVerdict};
use crate::people::Admission;
use crate::provider::{Completion, CompletionRequest, ProviderError};
use crate::session::Session;
use crate::skill_use::SkillsInUse;
use crate::store::Durability;
use crate::tool::{ToolContext, ToolError, ToolRegistry};
use crate::workspace::ContextWorkspace;

/// Retries of a call the provider refused as too long for the context, each with half the
/// history of the last.
const OVERFLOW_RETRIES: u32 = 3;

/// Whether the turn goes on after a step, and with what.
enum Flow<T> {
    /// The turn goes on with this.
    Continue(T),
    /// The turn is over; its outcome says how it ended.
    Ended,
}

/// A turn in progress: what its model calls share and what it produced so far.
struct Turn<'a> {
    agent: &'a Agent,
    events: &'a dyn AgentEvents,
    cancel: &'a CancellationToken,
    sink: TurnSink<'a>,
    system: String,
    tools: ToolRegistry,
    tool_specs: Arc<[ToolSpec]>,
    tool_specs_chars: usize,
    workspace: ContextWorkspace,
    outcome: TurnOutcome,
    fit: HistoryFit,
    /// Who the turn acts for, under the people's policy (none without one).
    actor: Option<Actor>,
    /// The session, for the usage ledger.
    session_key: String,
    /// The skills this turn read, for the commands it runs; a new turn starts with none.
    skills_in_use: SkillsInUse,
}

/// How much of the history requests carry.
struct HistoryFit {
    /// The user was told that old messages are left out (once per turn).
    warned: bool,
    /// Context overflows retried so far.
    overflow_retries: u32,
    /// Tokens of history the provider accepts, as learned from its overflows.
    overflow_budget: usize,
}

impl Agent {
    pub(super) async fn run_turn_inner(
        &self,
        session: &mut Session,
        input: TurnInput<'_>,
        events: &dyn AgentEvents,
        cancel: &CancellationToken,
        correlation_id: &str,
    ) -> Result<TurnOutcome, AgentError> {
        let first_run = !session.is_persisted() && session.branch_is_empty();
        // A model chosen for the session (`/model`) answers instead of the agent's.
        let model = session.chosen_model().unwrap_or(&self.settings.model).to_owned();
        let actor = self.people.as_ref().map(|people| match input.actor {
            Some(actor) => actor.clone(),
            None => people.actor_for_context(&session.header().context),
        });
        let mut notice = None;
        if let (Some(people), Some(actor)) = (&self.people, &actor) {
            if let Some(refusal) = people.refuses_model(actor, &model) {
                return self.refuse_turn(session, input, refusal, correlation_id).await;
            }
            match people.admit_turn(actor) {
                Admission::Admit => {}
                Admission::AdmitWithNotice(text) => notice = Some(text),
                Admission::Refuse(refusal) => return self.refuse_turn(session, input, refusal, correlation_id).await,
            }
        }
        let hooked_text;
        let mut input = input;
        let (user, key, context) = (
            actor.as_ref().and_then(|actor| actor.user.clone()),
            session.key().to_owned(),
            session.header().context.clone(),
        );
        let about = |event: HookEvent| HookInput { user: user.clone(), ..HookInput::new(event, &key, &context) };
        if self.hooks.wants(HookEvent::MessageReceived, "") {
            let received = HookInput { text: Some(input.text.to_owned()), ..about(HookEvent::MessageReceived) };
            match self.hooks.decide(&received).await {
                HookVerdict::Allow => {}
                HookVerdict::Rewrite(serde_json::Value::String(text)) => {
                    tracing::debug!("a hook rewrote the message");
                    hooked_text = text;
                    input.text = &hooked_text;
                }
                HookVerdict::Rewrite(_) => {
                    let refusal = "Your message was not accepted: a hook's rewrite of it was not text.".to_owned();
                    return self.refuse_turn(session, input, refusal, correlation_id).await;
                }
                HookVerdict::Veto(reason) => {
                    let refusal = format!("Your message was not accepted: {reason}");
                    return self.refuse_turn(session, input, refusal, correlation_id).await;
                }
            }
        }
        if first_run {
            self.hooks.observe(about(HookEvent::SessionCreated)).await;
        }
        self.record_input(session, input).await?;
        self.hooks.observe(about(HookEvent::TurnStarted).with("model", model.clone())).await;
        let turn = self.prepare_turn(session, first_run, events, cancel, correlation_id, actor).await?;
        let mut outcome = turn.run_steps(session).await?;
        if let Some(notice) = notice {
            events.warning(&notice);
            outcome.reply = format!("{}\n\n_{notice}_", outcome.reply);
        }
        Ok(outcome)
    }

    /// Records the person's message and the refusal as the reply, without asking the model.
    async fn refuse_turn(
        &self,
        session: &mut Session,
        input: TurnInput<'_>,
        refusal: String,
        correlation_id: &str,
    ) -> Result<TurnOutcome, AgentError> {
        self.record_input(session, input).await?;
        let reply = EntryBody::Message {
            role: MessageRole::Assistant,
            content: refusal.clone(),
            images: Vec::new(),
            model: None,
            usage: None,
            interrupted: false,
        };
        self.record(session, vec![reply], Durability::Synced).await?;
        Ok(TurnOutcome {
            reply: refusal,
            status: TurnStatus::Refused,
            usage: Usage::default(),
            model: self.settings.model.clone(),
            model_calls: 0,
            tool_calls: 0,
            prompt_tokens: 0,
            correlation_id: correlation_id.to_owned(),
        })
    }

    /// Records the user's message (after a model change, when the model is new to the
    /// session).
    async fn record_input(&self, session: &mut Session, input: TurnInput<'_>) -> Result<(), AgentError> {
        let mut opening = Vec::new();
        let model = session.chosen_model().unwrap_or(&self.settings.model).to_owned();
        if session.current_model().as_deref() != Some(model.as_str()) {
            opening.push(EntryBody::ModelChange { previous: session.current_model().unwrap_or_default(), new: model });
        }
        opening.push(EntryBody::Message {
            role: MessageRole::User,
            content: input.text.to_owned(),
            images: input.images.to_vec(),
            model: None,
            usage: None,
            interrupted: false,
        });
        // The model call comes next, not an answer: the reply's synced append makes the
        // user's message durable with it.
        self.record(session, opening, Durability::Written).await?;
        Ok(())
    }

    /// What every model call of the turn shares: the system prompt of the session's
    /// context, the tools and the workspace they work in.
    async fn prepare_turn<'a>(
        &'a self,
        session: &Session,
        first_run: bool,
        events: &'a dyn AgentEvents,
        cancel: &'a CancellationToken,
        correlation_id: &str,
        actor: Option<Actor>,
    ) -> Result<Turn<'a>, AgentError> {
        let mut sections = self.prompt_sections(&session.header().context).await;
        if let Some(workers) =
            self.sub_agents.as_ref().and_then(|sub_agents| sub_agents.workers_section_of(session.key()))
        {
            sections.push(workers);
        }
        let workspace = self.workspace_of(&session.header().context)?;
        let directory = (workspace.path != self.settings.workspace).then_some(workspace.path.as_path());
        let system = self.system_prompt_from(&workspace.prompt_files(), directory, first_run, &sections).text;
        // Tools of run-time sources (MCP servers) are looked up, and their servers started,
        // only when a turn needs them; a stopped turn goes on with the fixed tools and ends
        // at its first model call.
        let tools = tokio::select! {
            biased;
            () = cancel.cancelled() => self.tools.clone(),
            resolved = self.tools.resolve() => resolved,
        };
        // The model sees only the tools the person's role allows (each call is checked
        // again when it runs).
        let tools = match (&self.people, &actor) {
            (Some(people), Some(actor)) => {
                let (people, offered_to) = (people.clone(), actor.clone());
                tools.filtered(Arc::new(move |name: &str| people.offers(&offered_to, name)))
            }
            _ => tools,
        };
        Ok(Turn {
            agent: self,
            events,
            cancel,
            sink: TurnSink::new(events, &self.leaks, self.hooks.holds_replies()),
            system,
            tool_specs: tools.specs(),
            tool_specs_chars: tools.specs_chars(),
            tools,
            workspace,
            outcome: TurnOutcome {
                reply: String::new(),
                status: TurnStatus::Completed,
                usage: Usage::default(),
                model: session.chosen_model().unwrap_or(&self.settings.model).to_owned(),
                model_calls: 0,
                tool_calls: 0,
                prompt_tokens: 0,
                correlation_id: correlation_id.to_owned(),
            },
            fit: HistoryFit { warned: false, overflow_retries: 0, overflow_budget: usize::MAX },
            actor,
            session_key: session.key().to_owned(),
            skills_in_use: SkillsInUse::default(),
        })
    }
}

impl Turn<'_> {
    /// Model calls and tool runs until an answer, a stop or `max_turns`.
    async fn run_steps(mut self, session: &mut Session) -> Result<TurnOutcome, AgentError> {
        while self.outcome.model_calls < self.agent.settings.max_turns {
            let Flow::Continue(reply) = self.call_model(session).await? else { return Ok(self.outcome) };
            let Flow::Continue(calls) = self.record_reply(session, reply).await? else { return Ok(self.outcome) };
            let Flow::Continue(()) = self.run_tool_calls(session, &calls).await? else { return Ok(self.outcome) };
        }
        self.end_on_max_turns(session).await
    }

    /// Calls the model with as much history as fits. A context overflow the provider
    /// reports is retried with half the history; any other failure records what was
    /// streamed as interrupted, and a stop ends the turn as cancelled.
    async fn call_model(&mut self, session: &mut Session) -> Result<Flow<Completion>, AgentError> {
        loop {
            let request = self.request(session);
            self.outcome.model_calls += 1;
            match self.complete(&request).await {
                Ok(completion) => {
                    self.sink.take();
                    return Ok(Flow::Continue(self.account(completion, &request)));
                }
                Err(ProviderError::ContextOverflow { .. }) if self.fit.overflow_retries < OVERFLOW_RETRIES => {
                    // The provider counts tokens differently from our estimate: halve what
                    // was sent and try again.
                    self.fit.overflow_retries += 1;
                    self.fit.overflow_budget = estimate_message_tokens(&request.messages) / 2;
                    self.outcome.model_calls -= 1;
                    self.sink.discard();
                }
                Err(error) => return self.break_off(session, error).await,
            }
        }
    }

    /// The next request: the newest history that fits the window beside the system prompt,
    /// the tools and the reply (the user hears once that older messages were left out).
    fn request(&mut self, session: &Session) -> CompletionRequest {
        let settings = &self.agent.settings;
        let reserve = settings.max_tokens as usize + self.system.len() / 4 + self.tool_specs_chars / 4;
        let budget = (settings.context_window as usize).saturating_sub(reserve).min(self.fit.overflow_budget);
        let fitted = fit_history(session.history(), budget);
        if fitted.dropped > 0 && !self.fit.warned {
            self.fit.warned = true;
            self.events.warning(&format!(
                "The conversation is too long for the model's context; the {} oldest messages were left out of this request (they stay in the session file).",
                fitted.dropped
            ));
        }
        CompletionRequest {
            model: session.chosen_model().unwrap_or(&settings.model).to_owned(),
            system: self.system.clone(),
            messages: fitted.messages,
            tools: self.tool_specs.clone(),
            max_tokens: settings.max_tokens,
            temperature: settings.temperature,
            stream: settings.stream,
        }
    }

    /// Sends `request`, streaming into the turn's sink, until it is answered or the turn is
    /// stopped; reports the call either way.
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        let call_began = std::time::Instant::now();
        let result = tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(ProviderError::Cancelled),
            result = self.agent.provider.complete_boxed(request, &self.sink) => result,
        };
        self.events.model_call(&ModelCallReport {
            model: result.as_ref().map_or_else(|_| request.model.clone(), |completion| completion.model.clone()),
            duration: call_began.elapsed(),
            usage: result.as_ref().map(|completion| completion.usage).unwrap_or_default(),
            ok: result.is_ok(),
        });
        result
    }

    /// Counts an answered call (tokens, prompt size, model) and returns its reply with
    /// secrets redacted before it is stored or sent anywhere (the streamed deltas went
    /// through the same scanner on the way out).
    fn account(&mut self, mut completion: Completion, request: &CompletionRequest) -> Completion {
        completion.content = redact(
            &self.agent.leaks,
            std::mem::take(&mut completion.content),
            Outbound::Reply { model: &completion.model },
            self.events,
        );
        self.outcome.usage.add(completion.usage);
        if let (Some(people), Some(actor)) = (&self.agent.people, &self.actor) {
            people.record_usage(
                actor,
                &self.session_key,
                &self.agent.profile.role,
                &completion.model,
                &completion.usage,
            );
        }
        self.outcome.prompt_tokens = match completion.usage.total() {
            0 => {
                (estimate_message_tokens(&request.messages) + self.system.len() / 4 + self.tool_specs_chars / 4) as u64
            }
            reported => reported,
        };
        self.outcome.model = completion.model.clone();
        completion
    }

    /// Ends the turn on a failed model call: what was streamed is recorded as an
    /// interrupted reply; a stop is a cancelled turn, anything else an error.
    async fn break_off(&mut self, session: &mut Session, error: ProviderError) -> Result<Flow<Completion>, AgentError> {
        let partial = self.sink.take();
        self.agent.record(session, vec![interrupted_reply(partial.clone())], Durability::Synced).await?;
        if !matches!(error, ProviderError::Cancelled) {
            return Err(error.into());
        }
        self.outcome.status = TurnStatus::Cancelled;
        self.outcome.reply = partial;
        Ok(Flow::Ended)
    }

    /// Records the reply with its tool calls, synced before anyone acts on it (the reply is
    /// sent, the tools run). A reply without tool calls is the turn's answer.
    async fn record_reply(
        &mut self,
        session: &mut Session,
        mut completion: Completion,
    ) -> Result<Flow<Vec<ToolCall>>, AgentError> {
        if completion.tool_calls.is_empty() {
            completion.content = self.decide_reply(session, std::mem::take(&mut completion.content)).await;
        }
        if self.sink.holding() && !completion.content.is_empty() {
            // Held back while streaming: readers get it now, as decided.
            self.events.text_delta(&completion.content);
        }
        let mut bodies = vec![EntryBody::Message {
            role: MessageRole::Assistant,
            content: completion.content.clone(),
            images: Vec::new(),
            model: Some(completion.model.clone()),
            usage: Some(completion.usage),
            interrupted: false,
        }];
        // The session file keeps the arguments redacted; the tools run with them as the
        // model wrote them (`completion.tool_calls` below).
        bodies.extend(completion.tool_calls.iter().map(|call| EntryBody::ToolCall {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: redact(
                &self.agent.leaks,
                call.arguments.clone(),
                Outbound::StoredArguments { tool: &call.name },
                self.events,
            ),
        }));
        self.agent.record(session, bodies, Durability::Synced).await?;
        if completion.tool_calls.is_empty() {
            self.outcome.reply = completion.content;
            return Ok(Flow::Ended);
        }
        Ok(Flow::Continue(completion.tool_calls))
    }

    /// The final reply as the `before_reply` hooks leave it: rewritten, or withheld with
    /// their reason in its place.
    async fn decide_reply(&self, session: &Session, reply: String) -> String {
        if !self.agent.hooks.wants(HookEvent::BeforeReply, "") {
            return reply;
        }
        let input = HookInput {
            text: Some(reply.clone()),
            user: self.actor.as_ref().and_then(|actor| actor.user.clone()),
            ..HookInput::new(HookEvent::BeforeReply, session.key(), &session.header().context)
        };
        match self.agent.hooks.decide(&input).await {
            HookVerdict::Allow => reply,
            HookVerdict::Rewrite(serde_json::Value::String(text)) => text,
            HookVerdict::Rewrite(_) => "The reply was withheld: a hook's rewrite of it was not text.".to_owned(),
            HookVerdict::Veto(reason) => format!("The reply was withheld: {reason}"),
        }
    }

    /// Runs the reply's tool calls and records their results (redacted as each finishes). A
    /// fatal tool error fails the turn; a tool that ends the turn makes its output the answer;
    /// a stop ends the turn as cancelled. Otherwise the model goes on from the results.
    async fn run_tool_calls(&mut self, session: &mut Session, calls: &[ToolCall]) -> Result<Flow<()>, AgentError> {
        let context = ToolContext {
            workspace: self.workspace.path.clone(),
            session_key: session.key().to_owned(),
            context: session.header().context.clone(),
            cancel: self.cancel.child_token(),
            correlation_id: self.outcome.correlation_id.clone(),
            actor: self.actor.clone(),
            skills_in_use: self.skills_in_use.clone(),
        };
        let guards =
            tools::Guards { people: self.agent.people.as_deref(), hooks: &self.agent.hooks, leaks: &self.agent.leaks };
        let results = tools::run_calls(&self.tools, calls, &context, self.events, &self.agent.leaks, guards).await;
        self.outcome.tool_calls += results.len() as u32;
        let mut fatal = None;
        let mut final_reply = None;
        let mut bodies = Vec::with_capacity(results.len());
        for (call, result) in results {
            let (content, is_error, ends_turn) = match result {
                Ok(output) => (output.content, false, output.ends_turn),
                Err(ToolError::RespondToModel(message)) => (message, true, false),
                Err(ToolError::Fatal(message)) => {
                    fatal.get_or_insert_with(|| message.clone());
                    (message, true, false)
                }
            };
            if ends_turn {
                final_reply.get_or_insert_with(|| content.clone());
            }
            bodies.push(EntryBody::ToolResult { call_id: call.id.clone(), name: call.name.clone(), content, is_error });
        }
        // Results the next model call goes on from are synced with its reply; a turn
        // ending here syncs them now.
        let durability = if fatal.is_some() || final_reply.is_some() || self.cancel.is_cancelled() {
            Durability::Synced
        } else {
            Durability::Written
        };
        self.agent.record(session, bodies, durability).await?;
        if let Some(message) = fatal {
            return Err(AgentError::Tool(message));
        }
        if let Some(reply) = final_reply {
            self.outcome.reply = reply;
            return Ok(Flow::Ended);
        }
        if self.cancel.is_cancelled() {
            self.outcome.status = TurnStatus::Cancelled;
            return Ok(Flow::Ended);
        }
        Ok(Flow::Continue(()))
    }

    /// Ends a turn that used all its model calls without an answer: the notice saying so is
    /// the reply, recorded as interrupted.
    async fn end_on_max_turns(mut self, session: &mut Session) -> Result<TurnOutcome, AgentError> {
        self.outcome.status = TurnStatus::MaxTurns;
        self.outcome.reply = format!(
            "I stopped after {} model calls without a final answer (the limit is max_turns = {}). Say \"continue\" and I will pick up where I left off.",
            self.outcome.model_calls, self.agent.settings.max_turns
        );
        self.agent.record(session, vec![interrupted_reply(self.outcome.reply.clone())], Durability::Synced).await?;
        Ok(self.outcome)
    }
}

/// An assistant message that did not run to its end.
fn interrupted_reply(content: String) -> EntryBody {
    EntryBody::Message {
        role: MessageRole::Assistant,
        content,
        images: Vec::new(),
        model: None,
        usage: None,
        interrupted: true,
    }
}
