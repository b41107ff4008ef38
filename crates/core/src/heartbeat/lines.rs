//! Splits HEARTBEAT.md into numbered lines and classifies each one (heading, code fence,
//! HTML comment, blank, text) so both format parsers see the same Markdown structure.

/// What a line is, as far as HEARTBEAT.md parsing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LineKind<'a> {
    /// Nothing but whitespace.
    Blank,
    /// An ATX heading (`#` to `######`), with its title stripped of the optional closing
    /// `#` run.
    Heading { level: usize, title: &'a str },
    /// Inside an HTML comment block (`<!-- … -->`), delimiters included.
    Comment,
    /// Inside a fenced code block, fences included.
    Fenced,
    /// Anything else.
    Text,
}

/// One line of the file, numbered from 1, without its line ending.
#[derive(Debug, Clone, Copy)]
pub(super) struct Line<'a> {
    pub number: usize,
    pub text: &'a str,
    pub kind: LineKind<'a>,
}

/// The classified lines plus the blocks that ran to the end of the file unclosed, which
/// are worth a warning because they swallow every heading after them.
#[derive(Debug)]
pub(super) struct ClassifiedLines<'a> {
    pub lines: Vec<Line<'a>>,
    pub unclosed_fence: Option<usize>,
    pub unclosed_comment: Option<usize>,
}

/// Classifies `text` (already stripped of any byte order mark). Both `\n` and `\r\n`
/// endings are accepted, so line numbers match what an editor shows either way.
pub(super) fn classify(text: &str) -> ClassifiedLines<'_> {
    let mut lines = Vec::new();
    let mut open_fence: Option<(Fence, usize)> = None;
    let mut open_comment: Option<usize> = None;
    for (index, raw) in text.split('\n').enumerate() {
        let number = index + 1;
        let text = raw.strip_suffix('\r').unwrap_or(raw);
        let kind = if let Some((fence, _)) = open_fence {
            if fence.is_closed_by(text) {
                open_fence = None;
            }
            LineKind::Fenced
        } else if open_comment.is_some() {
            if text.contains("-->") {
                open_comment = None;
            }
            LineKind::Comment
        } else if let Some(fence) = Fence::opened_by(text) {
            open_fence = Some((fence, number));
            LineKind::Fenced
        } else if let Some(rest) = strip_indent(text).filter(|rest| rest.starts_with("<!--")) {
            // Searching from byte 2 lets the degenerate `<!-->` close itself, as in
            // CommonMark; the `<!--` prefix is ASCII so the slice is on a boundary.
            if !rest[2..].contains("-->") {
                open_comment = Some(number);
            }
            LineKind::Comment
        } else if let Some((level, title)) = heading(text) {
            LineKind::Heading { level, title }
        } else if text.trim().is_empty() {
            LineKind::Blank
        } else {
            LineKind::Text
        };
        lines.push(Line { number, text, kind });
    }
    ClassifiedLines { lines, unclosed_fence: open_fence.map(|(_, line)| line), unclosed_comment: open_comment }
}

/// The rest of `line` after at most three spaces of indentation, or `None` when it is
/// indented further (or by a tab), which in Markdown makes it code or a continuation
/// rather than a heading, fence or HTML block.
fn strip_indent(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches(' ');
    let indent = line.len() - rest.len();
    (indent <= 3 && !rest.starts_with('\t')).then_some(rest)
}

/// An ATX heading's level and title.
fn heading(line: &str) -> Option<(usize, &str)> {
    let rest = strip_indent(line)?;
    let level = rest.bytes().take_while(|byte| *byte == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after = &rest[level..];
    if !(after.is_empty() || after.starts_with(' ') || after.starts_with('\t')) {
        return None;
    }
    let title = after.trim();
    let without_closing = title.trim_end_matches('#');
    let title = if without_closing.is_empty() {
        ""
    } else if without_closing.ends_with([' ', '\t']) {
        without_closing.trim_end()
    } else {
        // `## C#`: the `#` belongs to the title, not a closing sequence.
        title
    };
    Some((level, title))
}

/// An opening code fence: its character and length, which the closing fence must match.
#[derive(Debug, Clone, Copy)]
struct Fence {
    marker: u8,
    length: usize,
}

impl Fence {
    fn opened_by(line: &str) -> Option<Self> {
        let rest = strip_indent(line)?;
        let marker = *rest.as_bytes().first()?;
        if marker != b'`' && marker != b'~' {
            return None;
        }
        let length = rest.bytes().take_while(|byte| *byte == marker).count();
        // A backtick run followed by more backticks is inline code, not a fence.
        if length < 3 || (marker == b'`' && rest[length..].contains('`')) {
            return None;
        }
        Some(Self { marker, length })
    }

    fn is_closed_by(self, line: &str) -> bool {
        let Some(rest) = strip_indent(line) else {
            return false;
        };
        let length = rest.bytes().take_while(|byte| *byte == self.marker).count();
        length >= self.length && rest[length..].trim().is_empty()
    }
}
