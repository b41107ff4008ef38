//! The audit trail as a built-in hook: every tool call a person's turn made (run, or
//! refused by a hook) is appended when the call ends, with its arguments redacted.

use std::sync::Arc;

use squidbot_types::people::AuditKind;

use super::People;
use crate::BoxFuture;
use crate::hooks::{Hook, HookEvent, HookInput, HookVerdict};

/// Key of the detail naming who the call was made for, as the audit trail writes them;
/// only turns under the people's policy carry it.
pub const ACTOR_DETAIL: &str = "actor";

/// Appends tool calls to the people's audit trail.
#[derive(Debug)]
pub struct AuditTrail {
    people: Arc<People>,
}

impl AuditTrail {
    /// Records into `people`'s audit trail.
    pub fn new(people: Arc<People>) -> Self {
        Self { people }
    }
}

impl Hook for AuditTrail {
    fn wants(&self, event: HookEvent, _tool: &str) -> bool {
        event == HookEvent::AfterTool
    }

    fn before<'a>(&'a self, _input: &'a HookInput) -> BoxFuture<'a, HookVerdict> {
        Box::pin(async { HookVerdict::Allow })
    }

    fn after(&self, input: HookInput) -> BoxFuture<'static, ()> {
        let people = self.people.clone();
        Box::pin(async move {
            let Some(actor) = input.detail.get(ACTOR_DETAIL).and_then(|actor| actor.as_str()) else { return };
            let ok = input.detail.get("ok").and_then(serde_json::Value::as_bool).unwrap_or(false);
            let mut detail = serde_json::json!({"arguments": input.arguments, "session": input.session});
            if !ok && let Some(error) = input.detail.get("output") {
                detail["error"] = error.clone();
            }
            people.audit_as(AuditKind::ToolCall, actor, &input.tool, ok, detail);
        })
    }

    fn built_in(&self) -> bool {
        true
    }
}
