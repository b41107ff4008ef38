//! Running the tool calls of one model reply: read-only calls together, mutating
//! calls one at a time in order, every failure turned into a result for the model.

use squidbot_types::message::ToolCall;

use super::AgentEvents;
use super::redaction::{Outbound, redact};
use crate::hooks::{HookBus, HookEvent, HookInput, HookVerdict};
use crate::leaks::LeakScanner;
use crate::people::People;
use crate::tool::{ToolContext, ToolError, ToolOutput, ToolRegistry};

/// Result of one call, paired with the call.
pub(super) type CallResult<'a> = (&'a ToolCall, Result<ToolOutput, ToolError>);

/// Runs `calls` and returns their results in call order.
pub(super) async fn run_calls<'a>(
    registry: &ToolRegistry,
    calls: &'a [ToolCall],
    context: &ToolContext,
    events: &dyn AgentEvents,
    leaks: &LeakScanner,
    guards: Guards<'_>,
) -> Vec<CallResult<'a>> {
    let mut results = Vec::with_capacity(calls.len());
    let mut index = 0;
    while index < calls.len() {
        let mutating = |call: &ToolCall| registry.get(&call.name).is_none_or(|tool| tool.mutates());
        let end = if mutating(&calls[index]) {
            index + 1
        } else {
            calls[index..].iter().position(mutating).map_or(calls.len(), |offset| index + offset)
        };
        let batch = &calls[index..end];
        for call in batch {
            announce(call, events, leaks);
        }
        let outputs =
            futures_util::future::join_all(batch.iter().map(|call| run_one(registry, call, context, events, guards)))
                .await;
        for (call, output) in batch.iter().zip(outputs) {
            let output = redact_output(call, output, events, leaks);
            let text = match &output {
                Ok(done) => done.content.as_str(),
                Err(ToolError::RespondToModel(message) | ToolError::Fatal(message)) => message.as_str(),
            };
            events.tool_finished(call, output.is_err(), text);
            if let Ok(done) = &output {
                for file in &done.files {
                    events.file_shared(file);
                }
            }
            results.push((call, output));
        }
        index = end;
    }
    results
}

/// Redacts the secrets in what `call` returned (or the error it reported), before the
/// model, the session file or any reader of the turn's events sees it.
fn redact_output(
    call: &ToolCall,
    output: Result<ToolOutput, ToolError>,
    events: &dyn AgentEvents,
    leaks: &LeakScanner,
) -> Result<ToolOutput, ToolError> {
    let redacted = |text: String| redact(leaks, text, Outbound::ToolOutput { tool: &call.name }, events);
    match output {
        Ok(mut done) => {
            done.content = redacted(done.content);
            Ok(done)
        }
        Err(ToolError::RespondToModel(message)) => Err(ToolError::RespondToModel(redacted(message))),
        Err(ToolError::Fatal(message)) => Err(ToolError::Fatal(redacted(message))),
    }
}

/// Tells the readers of the turn's events (gateway clients, channels) that `call` starts,
/// with any secret in its arguments redacted: they are outbound like the reply.
fn announce(call: &ToolCall, events: &dyn AgentEvents, leaks: &LeakScanner) {
    let arguments = redact(leaks, call.arguments.clone(), Outbound::ToolArguments { tool: &call.name }, events);
    if arguments == call.arguments {
        events.tool_started(call);
    } else {
        events.tool_started(&ToolCall { arguments, ..call.clone() });
    }
}

/// What stands between a call and its tool: the people's policy and the hooks.
#[derive(Clone, Copy)]
pub(super) struct Guards<'a> {
    /// The people's policy, if the agent runs under one.
    pub people: Option<&'a People>,
    /// The hooks (configured and built-in).
    pub hooks: &'a HookBus,
    /// What hooks see of the arguments: redacted like everything that leaves the agent.
    pub leaks: &'a LeakScanner,
}

async fn run_one(
    registry: &ToolRegistry,
    call: &ToolCall,
    context: &ToolContext,
    events: &dyn AgentEvents,
    guards: Guards<'_>,
) -> Result<ToolOutput, ToolError> {
    let arguments = parse_call_arguments(&call.arguments)?;
    let tool = registry.get(&call.name);
    // The policy speaks first, so a tool the role hides is refused as such (and audited),
    // not reported unknown.
    let actor = match (guards.people, &context.actor) {
        (Some(people), Some(actor)) => {
            let changes = tool.is_none_or(|tool| tool.mutates());
            let notify = |text: &str| {
                events.waiting(text);
                people.tell_elsewhere(actor, &context.session_key, text);
            };
            let authorized = people
                .authorize(actor, &context.session_key, &call.name, changes, &arguments, &notify, &context.cancel)
                .await;
            if let Err(refusal) = authorized {
                tracing::debug!(tool = %call.name, %refusal, "tool call refused");
                return Err(ToolError::RespondToModel(refusal));
            }
            Some(People::audit_actor(actor))
        }
        _ => None,
    };
    let Some(tool) = tool else {
        let available: Vec<&str> = registry.names().collect();
        return Err(ToolError::RespondToModel(format!(
            "unknown tool `{}`; available tools: {}",
            call.name,
            available.join(", ")
        )));
    };
    let (result, arguments) = match before_hooks(guards, call, arguments, context).await {
        Ok(arguments) => (run_tool(tool.as_ref(), arguments.clone(), context).await, arguments),
        Err((refusal, arguments)) => (Err(refusal), arguments),
    };
    if guards.hooks.wants(HookEvent::AfterTool, &call.name) {
        let (ok, output) = match &result {
            Ok(output) => (true, output.content.clone()),
            Err(ToolError::RespondToModel(error) | ToolError::Fatal(error)) => (false, error.clone()),
        };
        let mut input = hook_input(HookEvent::AfterTool, call, arguments, context, guards.leaks)
            .with("ok", ok)
            .with("output", guards.leaks.redact(&output).0);
        if let Some(actor) = actor {
            input = input.with(crate::people::ACTOR_DETAIL, actor);
        }
        // Built-in observers (the audit trail) run now; configured ones on their own.
        guards.hooks.observe(input).await;
    }
    if let Err(ToolError::RespondToModel(message) | ToolError::Fatal(message)) = &result {
        tracing::debug!(tool = %call.name, %message, "tool call failed or was refused");
    }
    result
}

/// Asks the before-hooks about a call with `arguments`: the arguments to run it with
/// (maybe rewritten), or the refusal the model reads instead of a result (with the
/// arguments it was refused with).
async fn before_hooks(
    guards: Guards<'_>,
    call: &ToolCall,
    arguments: serde_json::Value,
    context: &ToolContext,
) -> Result<serde_json::Value, (ToolError, serde_json::Value)> {
    if !guards.hooks.wants(HookEvent::BeforeTool, &call.name) {
        return Ok(arguments);
    }
    let input = hook_input(HookEvent::BeforeTool, call, arguments.clone(), context, guards.leaks);
    match guards.hooks.decide(&input).await {
        HookVerdict::Allow => Ok(arguments),
        HookVerdict::Rewrite(rewritten @ serde_json::Value::Object(_)) => {
            tracing::debug!(tool = %call.name, "a hook rewrote the arguments");
            Ok(rewritten)
        }
        HookVerdict::Rewrite(_) => Err((
            ToolError::RespondToModel("Refused by a hook: its rewrite was not an object of arguments".into()),
            arguments,
        )),
        HookVerdict::Veto(reason) => {
            Err((ToolError::RespondToModel(format!("Refused by a hook: {reason}")), arguments))
        }
    }
}

/// What hooks are told about a call: its arguments with secrets redacted (hooks are
/// programs outside the agent, like any reader of its output).
fn hook_input(
    event: HookEvent,
    call: &ToolCall,
    arguments: serde_json::Value,
    context: &ToolContext,
    leaks: &LeakScanner,
) -> HookInput {
    let arguments = match leaks.redact(&arguments.to_string()) {
        (_, findings) if findings.is_empty() => arguments,
        (redacted, _) => serde_json::from_str(&redacted).unwrap_or(serde_json::Value::String(redacted)),
    };
    HookInput {
        tool: call.name.clone(),
        arguments,
        user: context.actor.as_ref().and_then(|actor| actor.user.clone()),
        ..HookInput::new(event, &context.session_key, &context.context)
    }
}

/// Runs `tool` with `arguments` unless the turn was stopped first.
async fn run_tool(
    tool: &dyn crate::tool::DynTool,
    arguments: serde_json::Value,
    context: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    if context.cancel.is_cancelled() {
        return Err(ToolError::RespondToModel("cancelled by the user before it ran".into()));
    }
    tokio::select! {
        biased;
        () = context.cancel.cancelled() => Err(ToolError::RespondToModel("cancelled by the user".into())),
        result = tool.call_boxed(arguments, context) => result,
    }
}

/// Parses the model's argument text; empty means no arguments.
fn parse_call_arguments(arguments: &str) -> Result<serde_json::Value, ToolError> {
    if arguments.trim().is_empty() {
        return Ok(serde_json::Value::Object(serde_json::Map::new()));
    }
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(value @ serde_json::Value::Object(_)) => Ok(value),
        Ok(serde_json::Value::Null) => Ok(serde_json::Value::Object(serde_json::Map::new())),
        Ok(_) => Err(ToolError::RespondToModel("invalid arguments: expected a JSON object".into())),
        Err(error) => Err(ToolError::RespondToModel(format!(
            "invalid JSON in the arguments ({error}); send the arguments again as one JSON object"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_argument_json_is_a_model_facing_error() {
        let error = parse_call_arguments("{\"path\": ").unwrap_err();
        assert!(matches!(error, ToolError::RespondToModel(message) if message.contains("invalid JSON")));
        assert!(parse_call_arguments("").unwrap().is_object());
        assert!(parse_call_arguments("null").unwrap().is_object());
        assert!(parse_call_arguments("[1]").is_err());
    }
}
