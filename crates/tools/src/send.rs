//! `send`: a message from the calling agent to another agent or a person over the agent
//! bus. The sender identity is bound when the tool is built (each agent gets its own
//! `SendTool`), so a model can't send as someone else; the correlation id comes from the
//! call's context.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_bus::{Bus, DeliveryStatus, Priority, SendError, SendRequest, Sender};
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use crate::{parse, schema};

/// Message another agent or the user on the agent bus; your `(ROLE #N):` header is added.
/// Result: delivered.verified, accepted.unverified, or fallback.triggered (queued until the target runs).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendArguments {
    /// A role (assistant, worker, researcher, coder, memory, heartbeat), user, or a running agent.
    pub target: String,
    /// The text.
    pub message: String,
    /// ack (must be acknowledged), urgent (interrupts the target), fyi or task; omit for normal.
    pub priority: Option<String>,
}

/// The `send` tool of one agent.
#[derive(Debug, Clone)]
pub struct SendTool {
    bus: Arc<Bus>,
    sender: Sender,
}

impl SendTool {
    /// A `send` tool sending as `sender` (a background worker's sender carries its owner).
    pub fn new(bus: Arc<Bus>, sender: Sender) -> Self {
        Self { bus, sender }
    }

    async fn send(&self, arguments: SendArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let priority = match arguments.priority.as_deref() {
            None => Priority::Normal,
            Some(name) => Priority::parse(name).ok_or_else(|| {
                ToolError::RespondToModel(format!(
                    "can't send: unknown priority {name:?}; use ack, urgent, fyi or task, or leave it out"
                ))
            })?,
        };
        let request = SendRequest {
            target: arguments.target,
            body: arguments.message,
            priority,
            correlation_id: Some(context.correlation_id.clone()).filter(|id| !id.is_empty()),
        };
        match self.bus.send(&self.sender, request).await {
            Ok(result) => {
                let message = &result.message;
                let header = format!("({} #{})", message.role.to_uppercase(), message.seq);
                let text = match result.status {
                    DeliveryStatus::Verified => format!("delivered.verified: {header} to {}", message.target),
                    DeliveryStatus::Unverified => {
                        format!("accepted.unverified: {header} to {}; it has not confirmed receipt yet", message.target)
                    }
                    DeliveryStatus::Fallback => format!(
                        "fallback.triggered: {header} to {} is queued; {} is not running and gets it when it is back",
                        message.target, message.target
                    ),
                };
                Ok(ToolOutput::text(text))
            }
            Err(error) => Err(ToolError::RespondToModel(self.explain(&error))),
        }
    }

    fn explain(&self, error: &SendError) -> String {
        let hint = match error {
            SendError::InvalidTarget { .. } => {
                let mut known: Vec<String> = self.bus.directory().roles().map(str::to_owned).collect();
                known.push(squidbot_bus::USER.to_owned());
                known.extend(self.bus.live_targets());
                known.sort();
                known.dedup();
                format!("; known targets: {}", known.join(", "))
            }
            SendError::OwnerBindingViolation { .. }
            | SendError::EmptyMessage
            | SendError::TooLong { .. }
            | SendError::Rejected { .. }
            | SendError::Undeliverable { .. } => String::new(),
        };
        format!("can't send: {}: {error}{hint}", error.code())
    }
}

impl Tool for SendTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<SendArguments>("send")
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.send(parse(arguments)?, context).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use squidbot_bus::{Ack, Delivery, Directory, MemoryJournal, Route, RouteError, TriggerFiles};
    use squidbot_core::clock::SystemClock;
    use tokio_util::sync::CancellationToken;

    use super::*;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl Route for Recorder {
        async fn deliver(&self, delivery: &Delivery) -> Result<Ack, RouteError> {
            self.0.lock().unwrap().push(delivery.text.clone());
            Ok(Ack::default())
        }
    }

    fn context(correlation_id: &str) -> ToolContext {
        ToolContext {
            workspace: std::env::temp_dir(),
            session_key: "worker:1".into(),
            context: "owner".into(),
            cancel: CancellationToken::new(),
            correlation_id: correlation_id.into(),
        }
    }

    #[tokio::test]
    async fn sends_as_the_bound_sender_and_explains_refusals() {
        let directory = tempfile::tempdir().unwrap();
        let journal = Arc::new(MemoryJournal::new());
        let bus = Bus::new(
            Directory::default(),
            TriggerFiles::new(directory.path()),
            journal.clone(),
            Arc::new(SystemClock),
            squidbot_bus::BusSettings::default(),
        );
        let recorder = Arc::new(Recorder::default());
        let _route = bus.register("assistant", recorder.clone()).unwrap();
        let tool = SendTool::new(bus.clone(), Sender::agent("worker-1", "worker").owned_by("assistant"));
        let spec = Tool::spec(&tool);
        assert_eq!(spec.parameters["required"], serde_json::json!(["target", "message"]));
        assert!(spec.serialized_len() < 650, "send's spec is {} characters", spec.serialized_len());

        let arguments = serde_json::json!({"target": "main", "message": "done", "priority": "fyi"});
        let output = Tool::call(&tool, arguments, &context("corr-1")).await.unwrap();
        assert_eq!(output.content, "delivered.verified: (WORKER #1) to assistant");
        assert_eq!(*recorder.0.lock().unwrap(), ["(WORKER #1): [FYI] done"]);
        assert_eq!(journal.entries()[0].correlation_id, "corr-1");

        let refused =
            Tool::call(&tool, serde_json::json!({"target": "coder", "message": "x"}), &context("")).await.unwrap_err();
        assert_eq!(
            refused,
            ToolError::RespondToModel(
                "can't send: owner_binding_violation: worker-1 may message only assistant, not coder".into()
            )
        );
        let unknown =
            Tool::call(&tool, serde_json::json!({"target": "ghost", "message": "x"}), &context("")).await.unwrap_err();
        assert!(
            unknown
                .to_string()
                .starts_with("can't send: invalid_target: no target named \"ghost\"; known targets: assistant, coder"),
            "{unknown}"
        );
        let priority =
            Tool::call(&tool, serde_json::json!({"target": "main", "message": "x", "priority": "asap"}), &context(""))
                .await
                .unwrap_err();
        assert!(priority.to_string().contains("unknown priority \"asap\""), "{priority}");
        let garbage = Tool::call(&tool, serde_json::json!({"target": 5}), &context("")).await.unwrap_err();
        assert!(garbage.to_string().starts_with("invalid arguments"), "{garbage}");
    }
}
