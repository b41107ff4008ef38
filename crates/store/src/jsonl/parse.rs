//! Reading session file contents: the header, entries, warnings for unreadable lines,
//! and listing summaries.

use std::cmp::Ordering;
use std::path::Path;

use squidbot_core::store::{LoadedSession, SessionSummary, StoreError};
use squidbot_types::session::{EntryBody, LeafLine, MessageRole, SESSION_FORMAT_VERSION, SessionEntry, SessionHeader};

/// Characters of the last user message shown in a listing.
const PREVIEW_CHARS: usize = 60;

/// Parses a whole session file. Only a missing or unreadable header is an error; an
/// entry line that can't be read is skipped and described in `warnings`.
pub(crate) fn parse_session(bytes: &[u8], path: &Path, key: &str) -> Result<LoadedSession, StoreError> {
    let file_label =
        path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned());
    let header_error = |reason: String| StoreError::Io {
        action: "read",
        key: key.to_owned(),
        reason: format!("{}: {reason}", path.display()),
    };
    let ends_with_newline = bytes.last() == Some(&b'\n');
    let piece_count = bytes.split(|byte| *byte == b'\n').count();
    let mut lines = bytes
        .split(|byte| *byte == b'\n')
        .enumerate()
        .map(|(index, line)| Line {
            number: index + 1,
            text: line.strip_suffix(b"\r").unwrap_or(line),
            torn: index + 1 == piece_count && !ends_with_newline,
        })
        .filter(|line| !line.text.trim_ascii().is_empty());

    let Some(first) = lines.next() else {
        return Err(header_error("the file has no header line".to_owned()));
    };
    let header: SessionHeader = serde_json::from_slice(first.text)
        .map_err(|error| header_error(format!("line {} is not a session header: {error}", first.number)))?;

    let mut warnings = Vec::new();
    if header.version > SESSION_FORMAT_VERSION {
        warnings.push(format!(
            "{file_label}: written in format version {}, newer than {SESSION_FORMAT_VERSION}; \
             lines this version does not know are skipped",
            header.version
        ));
    }
    if header.key != key {
        warnings.push(format!("{file_label}: the header names session {:?}, not {key:?}", header.key));
    }
    let mut entries = Vec::new();
    let mut moved_leaf = None;
    for line in lines {
        match serde_json::from_slice::<SessionEntry>(line.text) {
            Ok(entry) => {
                entries.push(entry);
                moved_leaf = None;
            }
            Err(_) if let Ok(leaf) = serde_json::from_slice::<LeafLine>(line.text) => moved_leaf = Some(leaf),
            Err(error) if line.torn => warnings.push(format!(
                "{file_label}: line {}: skipped a torn last line (a write was cut short): {error}",
                line.number
            )),
            Err(error) => {
                warnings.push(format!("{file_label}: line {}: skipped an unreadable entry: {error}", line.number))
            }
        }
    }
    Ok(LoadedSession { header, entries, moved_leaf, warnings })
}

/// One line of a session file.
struct Line<'a> {
    /// 1-based line number.
    number: usize,
    /// The line without its end of line.
    text: &'a [u8],
    /// True for a last line with no `\n` after it: a write cut short.
    torn: bool,
}

/// The listing row for a session stored under `key`.
pub(crate) fn summarize(key: String, session: &LoadedSession) -> SessionSummary {
    let updated =
        session.entries.last().map_or_else(|| session.header.created.clone(), |entry| entry.timestamp.clone());
    let message_count = session.entries.iter().filter(|entry| matches!(entry.body, EntryBody::Message { .. })).count();
    let preview = session
        .entries
        .iter()
        .rev()
        .find_map(|entry| match &entry.body {
            EntryBody::Message { role: MessageRole::User, content, .. } => Some(preview_of(content)),
            EntryBody::Message { role: MessageRole::Assistant, .. }
            | EntryBody::ToolCall { .. }
            | EntryBody::ToolResult { .. }
            | EntryBody::Compaction { .. }
            | EntryBody::Delegate { .. }
            | EntryBody::ModelChange { .. } => None,
        })
        .unwrap_or_default();
    SessionSummary {
        key,
        context: session.header.context.clone(),
        created: session.header.created.clone(),
        updated,
        entry_count: session.entries.len(),
        message_count,
        preview,
    }
}

/// The first [`PREVIEW_CHARS`] characters of `content` on one line, runs of whitespace
/// (newlines included) collapsed to one space.
fn preview_of(content: &str) -> String {
    content
        .split_whitespace()
        .flat_map(|word| std::iter::once(' ').chain(word.chars()))
        .skip(1)
        .take(PREVIEW_CHARS)
        .collect()
}

/// Sorts most recently updated first. Times are compared as instants, so offsets and
/// fractional seconds order correctly; unparseable times go last, ties go by key.
pub(crate) fn sort_by_updated(summaries: &mut Vec<SessionSummary>) {
    let mut keyed: Vec<(Option<jiff::Timestamp>, SessionSummary)> =
        summaries.drain(..).map(|summary| (summary.updated.parse().ok(), summary)).collect();
    keyed.sort_by(|(left_time, left), (right_time, right)| {
        right_time.cmp(left_time).then_with(|| compare_fallback(left, right))
    });
    summaries.extend(keyed.into_iter().map(|(_, summary)| summary));
}

fn compare_fallback(left: &SessionSummary, right: &SessionSummary) -> Ordering {
    right.updated.cmp(&left.updated).then_with(|| left.key.cmp(&right.key))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"header","version":1,"id":"s1","key":"cli:local","context":"local","created":"2026-01-01T00:00:00Z"}"#;

    fn message(id: &str, role: &str, content: &str, timestamp: &str) -> String {
        format!(
            r#"{{"id":"{id}","parent":null,"timestamp":"{timestamp}","type":"message","role":"{role}","content":"{content}"}}"#
        )
    }

    fn parse(text: &str) -> Result<LoadedSession, StoreError> {
        parse_session(text.as_bytes(), Path::new("/s/cli:local.jsonl"), "cli:local")
    }

    #[test]
    fn header_and_entries_are_read() {
        let text = format!(
            "{HEADER}\n{}\n{}\n",
            message("a", "user", "hi", "2026-01-01T00:00:01Z"),
            message("b", "assistant", "hello", "2026-01-01T00:00:02Z"),
        );
        let session = parse(&text).unwrap();
        assert_eq!(session.header.id, "s1");
        assert_eq!(session.entries.len(), 2);
        assert!(session.warnings.is_empty(), "{:?}", session.warnings);
    }

    #[test]
    fn crlf_and_blank_lines_are_tolerated() {
        let text = format!("{HEADER}\r\n\r\n{}\r\n\n", message("a", "user", "hi", "2026-01-01T00:00:01Z"));
        let session = parse(&text).unwrap();
        assert_eq!(session.entries.len(), 1);
        assert!(session.warnings.is_empty(), "{:?}", session.warnings);
    }

    #[test]
    fn bad_lines_become_numbered_warnings() {
        let text = format!(
            "{HEADER}\nnot json\n{{\"id\":\"x\",\"parent\":null,\"timestamp\":\"t\",\"type\":\"mystery\"}}\n{}\n{{\"id\":\"to",
            message("a", "user", "hi", "2026-01-01T00:00:01Z")
        );
        let session = parse(&text).unwrap();
        assert_eq!(session.entries.len(), 1);
        assert_eq!(session.warnings.len(), 3, "{:?}", session.warnings);
        assert!(session.warnings[0].contains("line 2"));
        assert!(session.warnings[1].contains("line 3"));
        assert!(session.warnings[2].contains("line 5"));
        assert!(session.warnings[2].contains("torn"));
    }

    #[test]
    fn missing_or_bad_header_is_an_error_naming_the_file() {
        for text in ["", "\n\n", "garbage\n", &message("a", "user", "hi", "t")] {
            let error = parse(text).unwrap_err();
            assert!(error.to_string().contains("cli:local.jsonl"), "{error}");
        }
    }

    #[test]
    fn header_naming_another_key_is_a_warning() {
        let text = HEADER.replace("cli:local", "cli:other");
        let session = parse(&text).unwrap();
        assert_eq!(session.warnings.len(), 1, "{:?}", session.warnings);
    }

    #[test]
    fn preview_is_one_line_of_at_most_sixty_characters() {
        assert_eq!(preview_of("  hello\n\n  world\t!  "), "hello world !");
        let long = "é".repeat(100);
        assert_eq!(preview_of(&long).chars().count(), PREVIEW_CHARS);
        assert_eq!(preview_of(""), "");
    }

    #[test]
    fn summary_counts_messages_and_previews_last_user_message() {
        let text = format!(
            "{HEADER}\n{}\n{}\n{}\n",
            message("a", "user", "first", "2026-01-01T00:00:01Z"),
            message("b", "user", "second\\nline", "2026-01-01T00:00:02Z"),
            message("c", "assistant", "answer", "2026-01-01T00:00:03Z"),
        );
        let summary = summarize("cli:local".to_owned(), &parse(&text).unwrap());
        assert_eq!(summary.entry_count, 3);
        assert_eq!(summary.message_count, 3);
        assert_eq!(summary.preview, "second line");
        assert_eq!(summary.updated, "2026-01-01T00:00:03Z");
        assert_eq!(summary.created, "2026-01-01T00:00:00Z");
    }

    #[test]
    fn sorting_compares_instants_not_strings() {
        let summary = |key: &str, updated: &str| SessionSummary {
            key: key.to_owned(),
            context: String::new(),
            created: String::new(),
            updated: updated.to_owned(),
            entry_count: 0,
            message_count: 0,
            preview: String::new(),
        };
        let mut summaries = vec![
            summary("bad", "not a time"),
            // 09:00Z, later than the 10:00+02:00 (08:00Z) below.
            summary("nine", "2026-01-01T09:00:00Z"),
            summary("eight", "2026-01-01T10:00:00+02:00"),
            summary("eight-b", "2026-01-01T08:00:00Z"),
        ];
        sort_by_updated(&mut summaries);
        let keys: Vec<&str> = summaries.iter().map(|summary| summary.key.as_str()).collect();
        assert_eq!(keys, ["nine", "eight", "eight-b", "bad"]);
    }
}
