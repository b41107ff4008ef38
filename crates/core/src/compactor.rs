//! The compactor: programmatic thresholds on a session's prompt size. Past the first a
//! background model call summarises older turns and extracts memories; past the second
//! it summarises harder; past the last, the oldest turns are cut without any model call.
//! Cuts happen only at user messages, so a tool call never loses its result.

use squidbot_types::ChatMessage;
use squidbot_types::memory::{MemoryType, NewMemory};
use squidbot_types::session::{EntryBody, MessageRole, SessionEntry};

use crate::context::Prompt;
use crate::provider::{CompletionRequest, DynLlmProvider, NoopSink, ProviderError};
use crate::session::Session;
use crate::text::{estimate_tokens, floor_char_boundary};

/// The summarise-and-extract instructions.
pub const COMPACTION_PROMPT: Prompt =
    Prompt { name: "compaction.md", default: include_str!("../prompts/compaction.md") };

/// Thresholds as shares of the model's context window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionPolicy {
    /// Start a background summary.
    pub compact_at: f32,
    /// Summarise aggressively.
    pub aggressive_at: f32,
    /// Truncate without a model call.
    pub emergency_at: f32,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        Self { compact_at: 0.80, aggressive_at: 0.85, emergency_at: 0.95 }
    }
}

/// How full the context is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pressure {
    /// Below every threshold.
    Low,
    /// Past `compact_at`.
    Compact,
    /// Past `aggressive_at`.
    Aggressive,
    /// Past `emergency_at`.
    Emergency,
}

impl Pressure {
    /// Share of the window the turns kept after compaction may use.
    pub fn keep_share(self) -> f64 {
        match self {
            Self::Low | Self::Compact => 0.40,
            Self::Aggressive => 0.20,
            Self::Emergency => 0.50,
        }
    }

    /// Name written into the compaction entry.
    pub fn method(self) -> &'static str {
        match self {
            Self::Low | Self::Compact => "summary",
            Self::Aggressive => "aggressive",
            Self::Emergency => "truncation",
        }
    }
}

impl CompactionPolicy {
    /// Pressure for a prompt of `tokens` in a window of `window` tokens.
    pub fn pressure(&self, tokens: u64, window: u32) -> Pressure {
        if window == 0 {
            return Pressure::Low;
        }
        let share = tokens as f64 / f64::from(window);
        // Thresholds come from f32 config: round away the widening error (0.8f32 > 0.8).
        let at = |threshold: f32| (f64::from(threshold) * 1e6).round() / 1e6;
        if share >= at(self.emergency_at) {
            Pressure::Emergency
        } else if share >= at(self.aggressive_at) {
            Pressure::Aggressive
        } else if share >= at(self.compact_at) {
            Pressure::Compact
        } else {
            Pressure::Low
        }
    }
}

/// What to condense.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionPlan {
    /// The first entry kept (a user message).
    pub first_kept: String,
    /// Messages before it that are condensed.
    pub condensed: usize,
    /// The condensed part as a plain transcript.
    pub transcript: String,
    /// The summary of an earlier compaction, folded into the new one.
    pub previous_summary: Option<String>,
    /// How hard to compact.
    pub pressure: Pressure,
}

/// Characters of one tool result kept in a transcript for summarising.
const TRANSCRIPT_RESULT_CHARS: usize = 400;

/// Renders entries as a compact plain-text transcript.
pub fn transcript(entries: &[&SessionEntry]) -> String {
    let clip = |text: &str, limit: usize| -> String {
        if text.len() <= limit { text.to_owned() } else { format!("{}…", &text[..floor_char_boundary(text, limit)]) }
    };
    let mut text = String::new();
    for entry in entries {
        let line = match &entry.body {
            EntryBody::Message { role: MessageRole::User, content, .. } => format!("User: {content}"),
            EntryBody::Message { role: MessageRole::Assistant, content, .. } if !content.is_empty() => {
                format!("Assistant: {content}")
            }
            EntryBody::ToolCall { name, arguments, .. } => format!("(tool {name} {})", clip(arguments, 200)),
            EntryBody::ToolResult { content, is_error, .. } => {
                format!(
                    "(result{}: {})",
                    if *is_error { ", error" } else { "" },
                    clip(content, TRANSCRIPT_RESULT_CHARS)
                )
            }
            EntryBody::Delegate { agent, status, result, .. } => {
                format!("(background {agent} result, {status}: {})", clip(result, TRANSCRIPT_RESULT_CHARS))
            }
            EntryBody::Message { .. } | EntryBody::Compaction { .. } | EntryBody::ModelChange { .. } => continue,
        };
        text.push_str(&line);
        text.push('\n');
    }
    text
}

fn entry_tokens(entry: &SessionEntry) -> usize {
    let characters = match &entry.body {
        EntryBody::Message { content, .. } => content.len(),
        EntryBody::ToolCall { name, arguments, call_id } => name.len() + arguments.len() + call_id.len(),
        EntryBody::ToolResult { content, name, call_id, .. } => content.len() + name.len() + call_id.len(),
        EntryBody::Compaction { summary, .. } => summary.len(),
        EntryBody::Delegate { task, result, .. } => task.len() + result.len() + 200,
        EntryBody::ModelChange { .. } => 0,
    };
    estimate_tokens(characters) + 4
}

/// Chooses where to cut: keep the most recent turns that fit `keep_share` of the window
/// minus `overhead_tokens` (what the prompt costs besides the turns: system prompt, tool
/// schemas, and the gap between our estimate and the provider's count), always at least
/// the last turn, and condense the rest. `None` when nothing older is left to condense.
pub fn plan(session: &Session, window_tokens: u32, overhead_tokens: u64, pressure: Pressure) -> Option<CompactionPlan> {
    let path = session.active_path();
    let starts = session.turn_starts();
    let (first_position, _) = starts.first()?;
    let budget = ((f64::from(window_tokens) * pressure.keep_share()) as usize)
        .saturating_sub(usize::try_from(overhead_tokens).unwrap_or(usize::MAX));
    let mut kept_tokens = 0;
    let mut cut = starts.len() - 1;
    for index in (0..starts.len()).rev() {
        let (position, _) = starts[index];
        let end = starts.get(index + 1).map_or(path.len(), |(next, _)| *next);
        let turn: usize = path[position..end].iter().map(|entry| entry_tokens(entry)).sum();
        if index != starts.len() - 1 && kept_tokens + turn > budget {
            break;
        }
        kept_tokens += turn;
        cut = index;
    }
    let (cut_position, first_kept) = starts[cut].clone();
    if cut_position <= *first_position {
        return None;
    }
    let condensed_entries: Vec<&SessionEntry> = path[*first_position..cut_position].to_vec();
    let condensed = condensed_entries.iter().filter(|entry| matches!(entry.body, EntryBody::Message { .. })).count();
    Some(CompactionPlan {
        first_kept,
        condensed,
        transcript: transcript(&condensed_entries),
        previous_summary: session.current_summary().filter(|summary| !summary.trim().is_empty()),
        pressure,
    })
}

/// The compaction entry for an emergency cut: no model call, the older turns dropped.
pub fn truncation(plan: &CompactionPlan) -> EntryBody {
    let note = format!("[{} earlier messages were dropped to fit the context window]", plan.condensed);
    let summary = match &plan.previous_summary {
        Some(previous) => format!("{previous}\n{note}"),
        None => note,
    };
    EntryBody::Compaction {
        summary,
        first_kept: plan.first_kept.clone(),
        condensed: plan.condensed,
        method: Pressure::Emergency.method().to_owned(),
    }
}

/// A memory the model extracted.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct ExtractedMemory {
    /// Type name.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// What to remember.
    pub content: String,
    /// 0 to 1.
    #[serde(default)]
    pub importance: Option<f32>,
    /// Labels.
    #[serde(default)]
    pub tags: Vec<String>,
}

impl ExtractedMemory {
    /// As a memory to save in `context`.
    pub fn into_new_memory(self, context: &str, source: &str) -> NewMemory {
        NewMemory {
            context: context.to_owned(),
            kind: MemoryType::parse(&self.kind).unwrap_or(MemoryType::Fact),
            content: self.content,
            importance: self.importance.filter(|value| (0.0..=1.0).contains(value)).unwrap_or(0.5),
            tags: self.tags,
            source: source.to_owned(),
            expires_at: None,
            links: Vec::new(),
        }
    }
}

/// What a summarise-and-extract call produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompactionOutput {
    /// The new summary.
    pub summary: String,
    /// Memories to save.
    pub memories: Vec<ExtractedMemory>,
}

#[derive(serde::Deserialize)]
struct RawOutput {
    #[serde(default)]
    summary: String,
    #[serde(default)]
    memories: Vec<ExtractedMemory>,
}

/// Reads the model's reply: the JSON object if there is one, else the whole text as
/// the summary with no memories.
pub fn parse_output(reply: &str) -> CompactionOutput {
    let json = match (reply.find('{'), reply.rfind('}')) {
        (Some(start), Some(end)) if start < end => &reply[start..=end],
        _ => "",
    };
    match serde_json::from_str::<RawOutput>(json) {
        Ok(raw) => CompactionOutput {
            summary: raw.summary.trim().to_owned(),
            memories: raw.memories.into_iter().filter(|memory| !memory.content.trim().is_empty()).collect(),
        },
        Err(_) => CompactionOutput { summary: reply.trim().to_owned(), memories: Vec::new() },
    }
}

/// Asks the model to summarise `plan` and extract memories.
pub async fn summarize(
    provider: &dyn DynLlmProvider,
    model: &str,
    instructions: &str,
    previous_summary: Option<&str>,
    transcript: &str,
    pressure: Pressure,
) -> Result<CompactionOutput, ProviderError> {
    let style = match pressure {
        Pressure::Aggressive | Pressure::Emergency => "a terse summary of at most 120 words.",
        Pressure::Low | Pressure::Compact => "a thorough summary of at most 300 words.",
    };
    let mut input = String::new();
    if let Some(previous) = previous_summary {
        input.push_str(&format!("Previous summary:\n{previous}\n\n"));
    }
    input.push_str(&format!("Conversation:\n{transcript}"));
    let request = CompletionRequest {
        model: model.to_owned(),
        system: instructions.replace("{{style}}", style),
        messages: vec![ChatMessage::user(input)],
        tools: std::sync::Arc::default(),
        max_tokens: 1024,
        temperature: Some(0.2),
        stream: false,
    };
    let completion = provider.complete_boxed(&request, &NoopSink).await?;
    Ok(parse_output(&completion.content))
}

#[cfg(test)]
mod tests {
    use super::*;
    use squidbot_types::session::{HeaderTag, SessionHeader};

    fn session_with_turns(turns: usize, words: usize) -> Session {
        let mut session = Session::new(SessionHeader {
            kind: HeaderTag::Header,
            version: 1,
            id: "s".into(),
            key: "k".into(),
            context: "owner".into(),
            created: "t".into(),
        });
        for turn in 0..turns {
            let text = format!("turn {turn} ") + &"word ".repeat(words);
            session.push(
                EntryBody::Message {
                    role: MessageRole::User,
                    content: text,
                    images: Vec::new(),
                    model: None,
                    usage: None,
                    interrupted: false,
                },
                "t".into(),
            );
            session.push(
                EntryBody::Message {
                    role: MessageRole::Assistant,
                    content: String::new(),
                    images: Vec::new(),
                    model: None,
                    usage: None,
                    interrupted: false,
                },
                "t".into(),
            );
            session.push(
                EntryBody::ToolCall { call_id: format!("c{turn}"), name: "t".into(), arguments: "{}".into() },
                "t".into(),
            );
            session.push(
                EntryBody::ToolResult {
                    call_id: format!("c{turn}"),
                    name: "t".into(),
                    content: "ok".into(),
                    is_error: false,
                },
                "t".into(),
            );
        }
        session
    }

    #[test]
    fn thresholds_map_to_pressure() {
        let policy = CompactionPolicy::default();
        assert_eq!(policy.pressure(799, 1000), Pressure::Low);
        assert_eq!(policy.pressure(800, 1000), Pressure::Compact);
        assert_eq!(policy.pressure(850, 1000), Pressure::Aggressive);
        assert_eq!(policy.pressure(950, 1000), Pressure::Emergency);
    }

    #[test]
    fn plan_cuts_at_a_user_message_and_keeps_recent_turns() {
        let session = session_with_turns(10, 100);
        let plan = plan(&session, 1000, 0, Pressure::Compact).unwrap();
        let kept = session.entry(&plan.first_kept).unwrap();
        assert!(matches!(kept.body, EntryBody::Message { role: MessageRole::User, .. }));
        assert!(plan.condensed >= 2 && plan.condensed < 20, "{}", plan.condensed);
        assert!(plan.transcript.starts_with("User: turn 0"), "{}", plan.transcript);
        let aggressive = super::plan(&session, 1000, 0, Pressure::Aggressive).unwrap();
        assert!(aggressive.condensed > plan.condensed);
    }

    #[test]
    fn overhead_shrinks_what_is_kept() {
        let session = session_with_turns(10, 100);
        let roomy = plan(&session, 10_000, 0, Pressure::Emergency);
        assert!(roomy.is_none(), "everything fits in half of a large window");
        let crowded = plan(&session, 10_000, 4_900, Pressure::Emergency).unwrap();
        assert_eq!(crowded.condensed, 18, "only the last turn is kept");
    }

    #[test]
    fn nothing_to_condense_with_a_single_turn() {
        let session = session_with_turns(1, 10_000);
        assert!(plan(&session, 1000, 0, Pressure::Emergency).is_none());
    }

    #[test]
    fn applied_truncation_keeps_every_tool_call_with_its_result() {
        let mut session = session_with_turns(10, 100);
        let plan = plan(&session, 1000, 0, Pressure::Emergency).unwrap();
        session.push(truncation(&plan), "t".into());
        let history = session.history();
        assert!(matches!(&history[0], ChatMessage::User { content, .. } if content.contains("were dropped")));
        for (index, message) in history.iter().enumerate() {
            if let ChatMessage::Tool { call_id, .. } = message {
                assert!(
                    matches!(&history[index - 1], ChatMessage::Assistant { tool_calls, .. } if tool_calls.iter().any(|call| &call.id == call_id)),
                    "{history:?}"
                );
            }
        }
    }

    #[test]
    fn model_output_is_parsed_leniently() {
        let output = parse_output(
            "Sure:\n{\"summary\": \"They planned a trip.\", \"memories\": [{\"type\": \"preference\", \"content\": \"Likes trains\", \"importance\": 0.8}, {\"type\": \"x\", \"content\": \" \"}]}",
        );
        assert_eq!(output.summary, "They planned a trip.");
        assert_eq!(output.memories.len(), 1);
        let memory = output.memories[0].clone().into_new_memory("owner", "compaction");
        assert_eq!(memory.kind, MemoryType::Preference);
        assert_eq!(parse_output("just prose").summary, "just prose");
    }
}
