//! Server-sent events parser: network bytes in, complete events out, whatever the chunking.

/// Longest line we buffer; a stream that never ends a line is broken, not slow.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when the server named the event.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Why the byte stream can't be parsed as events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line grew past [`MAX_LINE_BYTES`] without ending.
    #[error("can't parse event stream: a line is longer than {MAX_LINE_BYTES} bytes")]
    LineTooLong,
}

/// Incremental parser following the WHATWG event-stream rules (`\n`, `\r\n` or `\r` line
/// ends, `:` comments, multi-line `data:`, a blank line dispatches).
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the line not yet terminated.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`, so a leading `\n` belongs to that line end.
    after_carriage_return: bool,
    /// `event:` of the event being built.
    event: Option<String>,
    /// `data:` of the event being built, each line followed by `\n`.
    data: String,
    /// At least one `data:` line arrived for the event being built.
    has_data: bool,
    /// Lines that were neither fields we know nor comments, kept to tell garbage from events.
    unknown_lines: usize,
    /// The first unknown line, for error messages.
    first_unknown_line: Option<String>,
}

impl SseParser {
    /// A parser with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one network chunk and returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        let mut rest = chunk;
        if self.after_carriage_return {
            self.after_carriage_return = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(position) = rest.iter().position(|byte| *byte == b'\n' || *byte == b'\r') {
            self.line.extend_from_slice(&rest[..position]);
            let terminator = rest[position];
            rest = &rest[position + 1..];
            if terminator == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_carriage_return = true,
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.process_line(&line) {
                events.push(event);
            }
        }
        self.line.extend_from_slice(rest);
        if self.line.len() > MAX_LINE_BYTES {
            return Err(SseError::LineTooLong);
        }
        Ok(events)
    }

    /// Ends the stream: a final event without its blank line is still delivered.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.line);
        let from_line = if line.is_empty() { None } else { self.process_line(&line) };
        from_line.or_else(|| self.dispatch())
    }

    /// Number of lines that were not SSE fields or comments.
    pub fn unknown_lines(&self) -> usize {
        self.unknown_lines
    }

    /// The first line that was not an SSE field or comment.
    pub fn first_unknown_line(&self) -> Option<&str> {
        self.first_unknown_line.as_deref()
    }

    fn process_line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(b":") {
            return None;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text.as_ref(), ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            "id" | "retry" => {}
            _ => {
                self.unknown_lines += 1;
                if self.first_unknown_line.is_none() {
                    self.first_unknown_line = Some(text.chars().take(200).collect());
                }
            }
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        Some(SseEvent { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for chunk in input.chunks(piece) {
            events.extend(parser.push(chunk).unwrap());
        }
        events.extend(parser.finish());
        events
    }

    fn data(text: &str) -> SseEvent {
        SseEvent { event: None, data: text.to_owned() }
    }

    #[test]
    fn events_survive_any_chunking() {
        let input = b"data: {\"a\":1}\n\n: keep-alive\n\nevent: message_start\ndata: {\"b\":\"\xc3\xa9\"}\r\n\r\ndata: [DONE]\n\n";
        let expected = vec![
            data("{\"a\":1}"),
            SseEvent { event: Some("message_start".into()), data: "{\"b\":\"é\"}".into() },
            data("[DONE]"),
        ];
        for piece in 1..input.len() {
            assert_eq!(parse_in_pieces(input, piece), expected, "piece size {piece}");
        }
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let events = parse_in_pieces(b"data: first\ndata:second\ndata\n\n", 64);
        assert_eq!(events, vec![data("first\nsecond\n")]);
    }

    #[test]
    fn carriage_return_alone_ends_lines() {
        let events = parse_in_pieces(b"data: one\r\rdata: two\r\r", 3);
        assert_eq!(events, vec![data("one"), data("two")]);
    }

    #[test]
    fn crlf_split_between_chunks_is_one_line_end() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"data: x\r").unwrap().is_empty());
        assert!(parser.push(b"\n").unwrap().is_empty());
        assert_eq!(parser.push(b"\r\n").unwrap(), vec![data("x")]);
    }

    #[test]
    fn comments_and_blank_events_dispatch_nothing() {
        let events = parse_in_pieces(b": ping\n\nevent: ping\n\nid: 4\nretry: 10\n\n", 5);
        assert!(events.is_empty());
    }

    #[test]
    fn event_name_does_not_leak_into_the_next_event() {
        let events = parse_in_pieces(b"event: error\ndata: a\n\ndata: b\n\n", 4);
        assert_eq!(events[0].event.as_deref(), Some("error"));
        assert_eq!(events[1], data("b"));
    }

    #[test]
    fn final_event_without_blank_line_is_delivered_on_finish() {
        assert_eq!(parse_in_pieces(b"data: tail", 4), vec![data("tail")]);
    }

    #[test]
    fn garbage_is_counted_not_dispatched() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"<html>oops</html>\nnot sse\n").unwrap().is_empty());
        assert!(parser.finish().is_none());
        assert_eq!(parser.unknown_lines(), 2);
        assert_eq!(parser.first_unknown_line(), Some("<html>oops</html>"));
    }
}
