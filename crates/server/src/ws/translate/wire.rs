//! The payloads of the `agent` and `chat` events and of an `agent` request's final `res`,
//! as types written straight to JSON from borrowed data.
//!
//! Every turn sends several of these to every client watching it, so they are not built
//! as `Value` trees. Fields are declared in the order the wire has always had them
//! (alphabetical, the order of a `serde_json::Map`); the tests beside `translate` pin
//! each shape against the `json!` tree it replaced.

use serde::Serialize;
use squidbot_core::events::TurnEvent;
use squidbot_types::message::Usage;

/// The payload of an `agent` event; `data` depends on the stream.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AgentPayload<'a, D> {
    agent_id: &'static str,
    data: D,
    run_id: &'a str,
    seq: u64,
    session_key: &'a str,
    stream: &'static str,
    ts: i64,
}

impl<'a, D> AgentPayload<'a, D> {
    pub(super) fn new(event: &'a TurnEvent, stream: &'static str, data: D) -> Self {
        Self {
            agent_id: "main",
            data,
            run_id: &event.run_id,
            seq: event.seq,
            session_key: &event.session_key,
            stream,
            ts: event.at_ms,
        }
    }
}

/// `lifecycle` `start`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LifecycleStart {
    pub(super) phase: &'static str,
    pub(super) started_at: i64,
}

/// `lifecycle` `model`: what the turn starts with.
#[derive(Serialize)]
pub(super) struct LifecycleModel<'a> {
    pub(super) model: &'a str,
    pub(super) phase: &'static str,
    pub(super) provider: &'a str,
}

/// `lifecycle` `end`; `tool_calls` only when the run finished.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LifecycleEnd<'a> {
    pub(super) aborted: bool,
    pub(super) ended_at: i64,
    pub(super) phase: &'static str,
    pub(super) stop_reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_calls: Option<u32>,
}

/// `lifecycle` `error`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LifecycleError<'a> {
    pub(super) ended_at: i64,
    pub(super) error: &'a str,
    pub(super) phase: &'static str,
}

/// `assistant`: the whole text so far and the new piece.
#[derive(Serialize)]
pub(super) struct AssistantText<'a> {
    pub(super) delta: &'a str,
    pub(super) text: &'a str,
}

/// `usage`: one model call.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ModelCallUsage<'a> {
    pub(super) duration_ms: u64,
    pub(super) input_tokens: u64,
    pub(super) model: &'a str,
    pub(super) ok: bool,
    pub(super) output_tokens: u64,
}

/// `tool` `start`; the arguments as JSON when they parse, as a string otherwise.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolStart<'a> {
    pub(super) args: serde_json::Value,
    pub(super) name: &'a str,
    pub(super) phase: &'static str,
    pub(super) tool_call_id: &'a str,
}

/// `tool` `result`; `result` (added to OpenClaw's shape) is the tool's output, redacted
/// and cut to a few thousand characters.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolResult<'a> {
    pub(super) duration_ms: u64,
    pub(super) is_error: bool,
    pub(super) name: &'a str,
    pub(super) phase: &'static str,
    pub(super) result: &'a str,
    pub(super) tool_call_id: &'a str,
}

/// `notice`.
#[derive(Serialize)]
pub(super) struct Notice<'a> {
    pub(super) message: &'a str,
}

/// `file`: a file the assistant handed over.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileHandedOver<'a> {
    pub(super) mime_type: &'a str,
    pub(super) name: &'a str,
    pub(super) path: &'a str,
}

/// The payload of a `chat` event: the run's ids and state, and what the state carries.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ChatPayload<'a> {
    agent_id: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) background: Option<BackgroundMark<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) bus: Option<BusMark<'a>>,
    /// Protocol 4 and later.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) delta_text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error_kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error_message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) message: Option<AssistantMessage<'a>>,
    run_id: &'a str,
    seq: u64,
    session_key: &'a str,
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stop_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) usage: Option<TokenUsage>,
}

impl<'a> ChatPayload<'a> {
    /// The ids and the state, nothing else yet.
    pub(super) fn new(event: &'a TurnEvent, state: &'static str) -> Self {
        Self {
            agent_id: "main",
            background: None,
            bus: None,
            delta_text: None,
            error_kind: None,
            error_message: None,
            message: None,
            run_id: &event.run_id,
            seq: event.seq,
            session_key: &event.session_key,
            state,
            stop_reason: None,
            usage: None,
        }
    }
}

/// An assistant message as OpenClaw clients show it.
#[derive(Serialize)]
pub(super) struct AssistantMessage<'a> {
    content: [TextPart<'a>; 1],
    role: &'static str,
    timestamp: i64,
}

impl<'a> AssistantMessage<'a> {
    pub(super) fn new(text: &'a str, at_ms: i64) -> Self {
        Self { content: [TextPart { text, kind: "text" }], role: "assistant", timestamp: at_ms }
    }
}

/// One text part of a message.
#[derive(Serialize)]
struct TextPart<'a> {
    text: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// Tokens of a run.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TokenUsage {
    cache_read: u64,
    input: u64,
    output: u64,
    total: u64,
}

impl From<&Usage> for TokenUsage {
    fn from(usage: &Usage) -> Self {
        Self {
            cache_read: usage.cached_input_tokens,
            input: usage.input_tokens,
            output: usage.output_tokens,
            total: usage.total(),
        }
    }
}

/// Marks a `chat` final as a background worker's result.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct BackgroundMark<'a> {
    pub(super) agent: &'a str,
    pub(super) correlation_id: &'a str,
    pub(super) status: &'a str,
    pub(super) worker_id: &'a str,
    pub(super) worker_session: &'a str,
}

/// Marks a `chat` final as a message over the agent bus.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct BusMark<'a> {
    pub(super) correlation_id: &'a str,
    pub(super) from: &'a str,
    pub(super) message_id: &'a str,
    pub(super) priority: &'a str,
    pub(super) role: &'a str,
}

/// The final `res` payload of an `agent` request; `M` is the run's `meta`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AgentOutcome<'a, M> {
    result: OutcomeResult<'a, M>,
    run_id: &'a str,
    status: &'static str,
    summary: &'static str,
}

impl<'a, M> AgentOutcome<'a, M> {
    pub(super) fn new(run_id: &'a str, status: &'static str, summary: &'static str, text: &'a str, meta: M) -> Self {
        let payloads = [ReplyPayload { media_url: None, text }];
        Self { result: OutcomeResult { meta, payloads }, run_id, status, summary }
    }
}

#[derive(Serialize)]
struct OutcomeResult<'a, M> {
    meta: M,
    payloads: [ReplyPayload<'a>; 1],
}

/// The reply; OpenClaw's payloads may carry media, ours never do (`null`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplyPayload<'a> {
    media_url: Option<&'a str>,
    text: &'a str,
}

/// `meta` of a finished run.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FinishedMeta<'a> {
    pub(super) agent_meta: AgentMeta<'a>,
    pub(super) duration_ms: u64,
    pub(super) stop_reason: &'a str,
}

/// Which model answered, for which session, at what cost.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AgentMeta<'a> {
    pub(super) model: &'a str,
    pub(super) provider: &'a str,
    pub(super) session_key: &'a str,
    pub(super) usage: TokenUsage,
}

/// `meta` of an aborted run.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AbortedMeta {
    pub(super) aborted: bool,
    pub(super) duration_ms: u64,
}
