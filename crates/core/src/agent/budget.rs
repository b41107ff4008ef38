//! Fitting history into the context window by dropping the oldest whole turns.

use squidbot_types::ChatMessage;

use crate::text::estimate_tokens;

/// History trimmed to a token budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FittedHistory {
    /// Messages to send.
    pub messages: Vec<ChatMessage>,
    /// Messages left out from the start.
    pub dropped: usize,
}

/// Drops the oldest turns (each starting at a user message) until the estimate fits
/// `budget_tokens`. The latest turn is always kept, and a tool result is never
/// separated from its call because cuts happen only at user messages.
pub fn fit_history(messages: Vec<ChatMessage>, budget_tokens: usize) -> FittedHistory {
    let sizes: Vec<usize> = messages.iter().map(ChatMessage::char_len).collect();
    let mut total: usize = sizes.iter().sum();
    let last_user = messages.iter().rposition(|message| matches!(message, ChatMessage::User { .. })).unwrap_or(0);
    let mut start = 0;
    while estimate_tokens(total) > budget_tokens && start < last_user {
        let next = messages[start + 1..]
            .iter()
            .position(|message| matches!(message, ChatMessage::User { .. }))
            .map_or(last_user, |offset| start + 1 + offset);
        total -= sizes[start..next].iter().sum::<usize>();
        start = next;
    }
    let dropped = start;
    FittedHistory { messages: messages.into_iter().skip(dropped).collect(), dropped }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_when_it_fits() {
        let history = vec![ChatMessage::user("a"), ChatMessage::assistant("b")];
        assert_eq!(fit_history(history.clone(), 100).messages, history);
    }

    #[test]
    fn drops_whole_turns_from_the_start_and_keeps_the_last() {
        let big = "x".repeat(400);
        let history = vec![
            ChatMessage::user(big.clone()),
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![squidbot_types::ToolCall { id: "1".into(), name: "t".into(), arguments: "{}".into() }],
            },
            ChatMessage::Tool { call_id: "1".into(), name: "t".into(), content: big.clone(), is_error: false },
            ChatMessage::user(big.clone()),
            ChatMessage::assistant("ok"),
            ChatMessage::user("latest"),
        ];
        let fitted = fit_history(history, 120);
        assert_eq!(fitted.dropped, 3);
        assert_eq!(fitted.messages[0], ChatMessage::user(big));
        let fitted = fit_history(fitted.messages, 1);
        assert_eq!(fitted.messages, vec![ChatMessage::user("latest")]);
    }
}
