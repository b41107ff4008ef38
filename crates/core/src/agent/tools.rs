//! Running the tool calls of one model reply: read-only calls together, mutating
//! calls one at a time in order, every failure turned into a result for the model.

use squidbot_types::message::ToolCall;
use squidbot_types::people::{Actor, AuditKind};

use super::AgentEvents;
use super::redaction::{Outbound, redact};
use crate::hooks::{HookInput, HookVerdict, ToolHooks, ToolOutcome};
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
            events.tool_finished(call, output.is_err());
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
    /// Hooks around tool calls.
    pub hooks: Option<&'a dyn ToolHooks>,
    /// Where after-hooks run, tracked so shutdown waits for them.
    pub tasks: &'a tokio_util::task::TaskTracker,
}

async fn run_one(
    registry: &ToolRegistry,
    call: &ToolCall,
    context: &ToolContext,
    events: &dyn AgentEvents,
    guards: Guards<'_>,
) -> Result<ToolOutput, ToolError> {
    let hooks = guards.hooks.filter(|_| registry.get(&call.name).is_some());
    let (result, ran) = match (guards.people, &context.actor) {
        (Some(people), Some(actor)) => {
            let result = run_authorized(registry, call, context, events, people, actor, hooks).await;
            if let Err(ToolError::RespondToModel(message) | ToolError::Fatal(message)) = &result.0 {
                tracing::debug!(tool = %call.name, %message, "tool call failed or was refused");
            }
            result
        }
        _ => match before_hooks(hooks, call, context).await {
            Ok(call) => (run_unchecked(registry, &call, context).await, Some(call)),
            Err(refusal) => (Err(refusal), None),
        },
    };
    if let (Some(hooks), Some(ran)) = (hooks, ran) {
        let outcome = match &result {
            Ok(output) => ToolOutcome { ok: true, output: output.content.clone() },
            Err(ToolError::RespondToModel(error) | ToolError::Fatal(error)) => {
                ToolOutcome { ok: false, output: error.clone() }
            }
        };
        let input = hook_input(crate::hooks::AFTER_TOOL, &ran, context);
        // Observers never delay the reply: the future runs on its own.
        guards.tasks.spawn(hooks.after_tool(input, outcome));
    }
    result
}

/// Asks the before-hooks about `call`: the call to run (its arguments maybe rewritten),
/// or the refusal the model reads instead of a result.
async fn before_hooks(
    hooks: Option<&dyn ToolHooks>,
    call: &ToolCall,
    context: &ToolContext,
) -> Result<ToolCall, ToolError> {
    let Some(hooks) = hooks else { return Ok(call.clone()) };
    let input = hook_input(crate::hooks::BEFORE_TOOL, call, context);
    match hooks.before_tool(&input).await {
        HookVerdict::Allow => Ok(call.clone()),
        HookVerdict::Rewrite(arguments) => {
            tracing::debug!(tool = %call.name, "a hook rewrote the arguments");
            Ok(ToolCall { arguments: arguments.to_string(), ..call.clone() })
        }
        HookVerdict::Veto(reason) => Err(ToolError::RespondToModel(format!("Refused by a hook: {reason}"))),
    }
}

fn hook_input(event: &str, call: &ToolCall, context: &ToolContext) -> HookInput {
    HookInput {
        event: event.to_owned(),
        tool: call.name.clone(),
        arguments: parse_call_arguments(&call.arguments)
            .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone())),
        session: context.session_key.clone(),
        context: context.context.clone(),
        user: context.actor.as_ref().and_then(|actor| actor.user.clone()),
    }
}

/// Runs `call` under the people's policy: refused by the actor's role, held for an admin
/// or run (after the hooks, whose rewrite is what runs and is audited); the call and how
/// it ended go in the audit trail (arguments redacted). Returns the call that ran, if any.
async fn run_authorized(
    registry: &ToolRegistry,
    call: &ToolCall,
    context: &ToolContext,
    events: &dyn AgentEvents,
    people: &People,
    actor: &Actor,
    hooks: Option<&dyn ToolHooks>,
) -> (Result<ToolOutput, ToolError>, Option<ToolCall>) {
    let arguments = match parse_call_arguments(&call.arguments) {
        Ok(arguments) => arguments,
        Err(error) => return (Err(error), None),
    };
    let changes = registry.get(&call.name).is_none_or(|tool| tool.mutates());
    let notify = |text: &str| {
        events.waiting(text);
        people.tell_elsewhere(actor, &context.session_key, text);
    };
    if let Err(refusal) =
        people.authorize(actor, &context.session_key, &call.name, changes, &arguments, &notify, &context.cancel).await
    {
        return (Err(ToolError::RespondToModel(refusal)), None);
    }
    let (result, ran, arguments) = match before_hooks(hooks, call, context).await {
        Ok(hooked) => {
            let arguments = parse_call_arguments(&hooked.arguments).unwrap_or(arguments);
            (run_unchecked(registry, &hooked, context).await, Some(hooked), arguments)
        }
        Err(refusal) => (Err(refusal), None, arguments),
    };
    let detail = match &result {
        Ok(_) => serde_json::json!({"arguments": arguments, "session": context.session_key}),
        Err(ToolError::RespondToModel(error) | ToolError::Fatal(error)) => {
            serde_json::json!({"arguments": arguments, "session": context.session_key, "error": error})
        }
    };
    people.audit(AuditKind::ToolCall, actor, &call.name, result.is_ok(), detail);
    (result, ran)
}

async fn run_unchecked(
    registry: &ToolRegistry,
    call: &ToolCall,
    context: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    if context.cancel.is_cancelled() {
        return Err(ToolError::RespondToModel("cancelled by the user before it ran".into()));
    }
    let Some(tool) = registry.get(&call.name) else {
        let available: Vec<&str> = registry.names().collect();
        return Err(ToolError::RespondToModel(format!(
            "unknown tool `{}`; available tools: {}",
            call.name,
            available.join(", ")
        )));
    };
    let arguments = parse_call_arguments(&call.arguments)?;
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
