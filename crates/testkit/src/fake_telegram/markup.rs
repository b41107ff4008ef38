//! What the fake reads in texts as Telegram does: entities and HTML markup.

use serde_json::{Value, json};

/// Entities as Telegram finds them in plain text: a leading `/command[@bot]` and
/// `@username` mentions, with offsets and lengths in UTF-16 code units.
pub(super) fn detect_entities(text: &str) -> Value {
    let mut entities = Vec::new();
    let characters: Vec<char> = text.chars().collect();
    let utf16_offset =
        |index: usize| characters.iter().take(index).map(|character| character.len_utf16()).sum::<usize>();
    let word_character = |character: char| character.is_ascii_alphanumeric() || character == '_';
    let mut index = 0;
    while index < characters.len() {
        let starts_word = index == 0 || !word_character(characters[index - 1]);
        let marker = characters[index];
        if starts_word && (marker == '@' || (marker == '/' && index == 0)) {
            let mut end = index + 1;
            while end < characters.len()
                && (word_character(characters[end]) || (marker == '/' && characters[end] == '@'))
            {
                end += 1;
            }
            let kind = if marker == '@' { "mention" } else { "bot_command" };
            if end - index > 1 {
                let offset = utf16_offset(index);
                entities.push(json!({ "type": kind, "offset": offset, "length": utf16_offset(end) - offset }));
            }
            index = end;
        } else {
            index += 1;
        }
    }
    Value::Array(entities)
}

/// Why Telegram would refuse `text` with `parse_mode` HTML, if it would.
pub(super) fn html_problem(text: &str) -> Option<String> {
    const SUPPORTED: [&str; 15] = [
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "code",
        "pre",
        "blockquote",
    ];
    let mut open: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        let offset = text.len() - rest.len() + start;
        let tail = &rest[start + 1..];
        let Some(end) = tail.find('>') else { return Some(format!("Unclosed start tag at byte offset {offset}")) };
        let tag = &tail[..end];
        let closing = tag.strip_prefix('/');
        let name = closing.unwrap_or(tag).split_whitespace().next().unwrap_or("").to_ascii_lowercase();
        if !SUPPORTED.contains(&name.as_str()) {
            return Some(format!("Unsupported start tag \"{name}\" at byte offset {offset}"));
        }
        let name = SUPPORTED.iter().find(|supported| **supported == name).copied().unwrap_or("");
        if closing.is_some() {
            if open.pop() != Some(name) {
                return Some(format!("Unmatched end tag at byte offset {offset}"));
            }
        } else {
            open.push(name);
        }
        rest = &tail[end + 1..];
    }
    open.last().map(|name| format!("Can't find end tag corresponding to start tag \"{name}\""))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn entities_are_detected_with_utf16_offsets() {
        let entities = detect_entities("/new@thebot hi 🦑 @ada_l, x@y");
        assert_eq!(
            entities,
            json!([
                { "type": "bot_command", "offset": 0, "length": 11 },
                { "type": "mention", "offset": 18, "length": 6 },
            ])
        );
    }

    #[test]
    fn html_is_checked_like_telegram_does() {
        assert_eq!(html_problem("<b>ok</b> <a href=\"x\">l</a> &lt;"), None);
        assert!(html_problem("<p>no</p>").is_some_and(|problem| problem.starts_with("Unsupported start tag \"p\"")));
        assert!(html_problem("<b>open").is_some());
        assert!(html_problem("<b><i>x</b></i>").is_some());
    }
}
