//! Splitting a long reply into messages that fit a platform's length limit, on the most
//! natural boundary available and without breaking fenced code blocks.

/// Splits `text` into parts of at most `max_chars` characters (Unicode scalar values, not
/// bytes; a `max_chars` of 0 counts as 1).
///
/// Boundaries are preferred in this order: blank lines between paragraphs, line breaks,
/// sentence ends, spaces between words, and only as a last resort the middle of a word
/// (never inside an emoji sequence when it can be helped). A part holds as many whole
/// paragraphs as fit; a unit that must itself be split starts a new part, so a break
/// between paragraphs is always taken before one inside a paragraph.
///
/// A fenced code block is kept whole unless it alone exceeds the limit; then it is cut
/// between lines (or inside a line longer than a part), each part's piece is closed with
/// the fence and the next one reopens it with the same info string (language), so every
/// part renders as code. Only when `max_chars` is too small to hold the fences is the
/// block split like plain text.
///
/// Every part is non-empty and trimmed of surrounding whitespace; no other text is lost
/// or reordered. Text that is empty or only whitespace gives no parts.
pub fn split_message(text: &str, max_chars: usize) -> Vec<String> {
    let max = max_chars.max(1);
    let text = text.trim();
    if text.is_empty() {
        return Vec::new();
    }
    if char_count(text) <= max {
        return vec![text.to_owned()];
    }
    let mut packer = Packer::new(max);
    for (separator, block) in blocks(text) {
        match block {
            Block::Text(paragraph) => push_text(&mut packer, separator, &paragraph, Level::Line),
            Block::Code(code) => push_code(&mut packer, separator, &code),
        }
    }
    packer.finish()
}

fn char_count(text: &str) -> usize {
    text.chars().count()
}

/// Collects parts greedily: each piece joins the current part (after its separator) when
/// it fits, otherwise it starts the next part.
struct Packer {
    max: usize,
    parts: Vec<String>,
    current: String,
    current_chars: usize,
}

impl Packer {
    fn new(max: usize) -> Self {
        Self { max, parts: Vec::new(), current: String::new(), current_chars: 0 }
    }

    /// Adds a piece of at most `max` characters.
    fn push(&mut self, separator: &str, piece: &str) {
        let piece_chars = char_count(piece);
        if self.current.trim().is_empty() {
            self.current.clear();
            self.current.push_str(piece);
            self.current_chars = piece_chars;
            return;
        }
        let joined = self.current_chars + char_count(separator) + piece_chars;
        if joined <= self.max {
            self.current.push_str(separator);
            self.current.push_str(piece);
            self.current_chars = joined;
        } else {
            self.flush();
            self.current.push_str(piece);
            self.current_chars = piece_chars;
        }
    }

    /// Ends the current part.
    fn flush(&mut self) {
        let part = self.current.trim();
        if !part.is_empty() {
            self.parts.push(part.to_owned());
        }
        self.current.clear();
        self.current_chars = 0;
    }

    fn finish(mut self) -> Vec<String> {
        self.flush();
        self.parts
    }
}

/// A top-level unit of the reply.
enum Block {
    /// A paragraph: lines of text without a blank line between them.
    Text(String),
    /// A fenced code block, fences included.
    Code(CodeBlock),
}

struct CodeBlock {
    /// The opening fence line without its indentation, e.g. "```rust".
    opening: String,
    /// The fence that closes it, e.g. "```".
    closing: String,
    /// The lines between the fences.
    body: Vec<String>,
    /// The block as written.
    source: String,
}

/// An opening code fence: its character, run length and the whole trimmed line.
pub(crate) struct Fence {
    /// '`' or '~'.
    pub(crate) character: char,
    /// How many fence characters open it (three or more).
    pub(crate) length: usize,
    /// The info string after the fence (the language comes first), trimmed.
    #[cfg_attr(not(test), expect(dead_code, reason = "splitting needs no language; the tests check it is read"))]
    pub(crate) info: String,
}

/// The fence `line` opens, if it is an opening code fence: up to three spaces, then
/// three or more backticks or tildes (a backtick fence's info string has no backtick).
pub(crate) fn opening_fence(line: &str) -> Option<Fence> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = line.trim_start_matches(' ');
    let character = rest.chars().next().filter(|first| *first == '`' || *first == '~')?;
    let length = rest.chars().take_while(|next| *next == character).count();
    if length < 3 {
        return None;
    }
    let info = rest.get(length..).unwrap_or_default().trim();
    if character == '`' && info.contains('`') {
        return None;
    }
    Some(Fence { character, length, info: info.to_owned() })
}

/// Whether `line` closes a code block opened by `fence`.
pub(crate) fn closes_fence(line: &str, fence: &Fence) -> bool {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = line.trim();
    indent <= 3 && rest.chars().all(|next| next == fence.character) && rest.chars().count() >= fence.length
}

/// The reply as paragraphs and code blocks, each with the whitespace that separated it
/// from the one before ("\n\n" after a blank line, "\n" otherwise).
fn blocks(text: &str) -> Vec<(&'static str, Block)> {
    let mut blocks = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let mut separator = "";
    let mut lines = text.split('\n');
    while let Some(line) = lines.next() {
        if line.trim().is_empty() {
            if !paragraph.is_empty() {
                blocks.push((separator, Block::Text(paragraph.join("\n"))));
                paragraph.clear();
                separator = "\n";
            }
            if !blocks.is_empty() {
                separator = "\n\n";
            }
            continue;
        }
        let Some(fence) = opening_fence(line) else {
            paragraph.push(line);
            continue;
        };
        if !paragraph.is_empty() {
            blocks.push((separator, Block::Text(paragraph.join("\n"))));
            paragraph.clear();
            separator = "\n";
        }
        let mut source = vec![line];
        let mut body = Vec::new();
        for inner in lines.by_ref() {
            source.push(inner);
            if closes_fence(inner, &fence) {
                break;
            }
            body.push(inner.to_owned());
        }
        let closing: String = std::iter::repeat_n(fence.character, fence.length).collect();
        blocks.push((
            separator,
            Block::Code(CodeBlock { opening: line.trim().to_owned(), closing, body, source: source.join("\n") }),
        ));
        separator = "\n";
    }
    if !paragraph.is_empty() {
        blocks.push((separator, Block::Text(paragraph.join("\n"))));
    }
    blocks
}

/// How finely a piece of text that is too long gets cut.
#[derive(Debug, Clone, Copy)]
enum Level {
    Line,
    Sentence,
    Word,
    Character,
}

/// Adds `text`, cutting it at `level` (and finer levels as needed) when it is too long.
/// A piece that must be cut starts a new part.
fn push_text(packer: &mut Packer, separator: &str, text: &str, level: Level) {
    if char_count(text) <= packer.max {
        packer.push(separator, text);
        return;
    }
    packer.flush();
    let (pieces, finer) = match level {
        Level::Line => (split_lines(text), Level::Sentence),
        Level::Sentence => (split_sentences(text), Level::Word),
        Level::Word => (split_words(text), Level::Character),
        Level::Character => {
            for piece in split_characters(text, packer.max) {
                packer.push("", &piece);
            }
            return;
        }
    };
    for (piece_separator, piece) in pieces {
        push_text(packer, piece_separator, piece, finer);
    }
}

fn split_lines(text: &str) -> Vec<(&str, &str)> {
    text.split('\n').enumerate().map(|(index, line)| (if index == 0 { "" } else { "\n" }, line)).collect()
}

/// Characters that end a sentence when whitespace follows.
fn ends_sentence(character: char) -> bool {
    matches!(character, '.' | '!' | '?' | '…')
}

/// Characters that end a sentence even without whitespace after them (CJK).
fn ends_sentence_without_space(character: char) -> bool {
    matches!(character, '。' | '！' | '？' | '；')
}

/// Cuts after sentence-ending punctuation; each sentence comes with the whitespace that
/// preceded it.
fn split_sentences(text: &str) -> Vec<(&str, &str)> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut separator_start = 0;
    let mut previous: Option<char> = None;
    let mut in_whitespace = false;
    for (index, character) in text.char_indices() {
        if character.is_whitespace() {
            if !in_whitespace && previous.is_some_and(ends_sentence) {
                in_whitespace = true;
                pieces.push((text.get(separator_start..start).unwrap_or_default(), text.get(start..index)));
                separator_start = index;
                start = index;
            }
        } else {
            if in_whitespace {
                in_whitespace = false;
                start = index;
            } else if previous.is_some_and(ends_sentence_without_space) && index > start {
                pieces.push((text.get(separator_start..start).unwrap_or_default(), text.get(start..index)));
                separator_start = index;
                start = index;
            }
            previous = Some(character);
        }
    }
    if in_whitespace {
        start = text.len();
    }
    pieces.push((text.get(separator_start..start).unwrap_or_default(), text.get(start..)));
    pieces.into_iter().filter_map(|(separator, piece)| piece.map(|piece| (separator, piece))).collect()
}

/// Cuts at whitespace; each word comes with the whitespace that preceded it.
fn split_words(text: &str) -> Vec<(&str, &str)> {
    let mut pieces = Vec::new();
    let mut separator_start = 0;
    let mut word_start: Option<usize> = None;
    for (index, character) in text.char_indices() {
        match (character.is_whitespace(), word_start) {
            (true, Some(start)) => {
                pieces.push((
                    text.get(separator_start..start).unwrap_or_default(),
                    text.get(start..index).unwrap_or_default(),
                ));
                separator_start = index;
                word_start = None;
            }
            (false, None) => word_start = Some(index),
            (true, None) | (false, Some(_)) => {}
        }
    }
    if let Some(start) = word_start {
        pieces.push((text.get(separator_start..start).unwrap_or_default(), text.get(start..).unwrap_or_default()));
    }
    pieces
}

/// Characters that belong to the character before them: cutting before one would break
/// an emoji sequence or an accented letter.
fn continues_cluster(character: char) -> bool {
    matches!(character,
        '\u{200D}'                    // zero-width joiner
        | '\u{FE00}'..='\u{FE0F}'     // variation selectors
        | '\u{1F3FB}'..='\u{1F3FF}'   // skin tones
        | '\u{0300}'..='\u{036F}'     // combining diacritical marks
        | '\u{20D0}'..='\u{20FF}'     // combining marks for symbols, keycap
        | '\u{E0020}'..='\u{E007F}'   // emoji tag sequences
    )
}

/// Cuts a word into pieces of at most `max` characters, moving a cut back (a few
/// characters at most) so it does not fall inside an emoji sequence.
fn split_characters(text: &str, max: usize) -> Vec<String> {
    let characters: Vec<char> = text.chars().collect();
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < characters.len() {
        let mut end = (start + max).min(characters.len());
        if end < characters.len() {
            let mut candidate = end;
            while candidate > start + 1 && candidate + 8 > end && breaks_cluster(&characters, candidate) {
                candidate -= 1;
            }
            if !breaks_cluster(&characters, candidate) {
                end = candidate;
            }
        }
        pieces.push(characters.get(start..end).unwrap_or_default().iter().collect());
        start = end;
    }
    pieces
}

/// Whether cutting before `characters[index]` splits a cluster.
fn breaks_cluster(characters: &[char], index: usize) -> bool {
    let next = characters.get(index).copied();
    let previous = index.checked_sub(1).and_then(|before| characters.get(before)).copied();
    next.is_some_and(continues_cluster) || previous == Some('\u{200D}')
}

/// Adds a code block, whole when it fits, otherwise cut between lines with the fences
/// repeated on every piece.
fn push_code(packer: &mut Packer, separator: &str, code: &CodeBlock) {
    let max = packer.max;
    if char_count(&code.source) <= max {
        packer.push(separator, &code.source);
        return;
    }
    let overhead = char_count(&code.opening) + char_count(&code.closing) + 2;
    let Some(budget) = max.checked_sub(overhead).filter(|budget| *budget > 0) else {
        // No room for the fences: the block is cut like text rather than not at all.
        push_text(packer, separator, &code.source, Level::Line);
        return;
    };
    packer.flush();
    let mut chunk = String::new();
    let mut chunk_chars = 0;
    let mut chunk_started = false;
    let mut emit = |chunk: &str| {
        packer.push("\n", &format!("{}\n{chunk}\n{}", code.opening, code.closing));
    };
    for line in &code.body {
        let pieces = if char_count(line) > budget { split_characters(line, budget) } else { vec![line.clone()] };
        for (index, piece) in pieces.iter().enumerate() {
            let separator = if index == 0 { "\n" } else { "" };
            let piece_chars = char_count(piece);
            if chunk_started && chunk_chars + char_count(separator) + piece_chars <= budget {
                chunk.push_str(separator);
                chunk.push_str(piece);
                chunk_chars += char_count(separator) + piece_chars;
            } else {
                if chunk_started {
                    emit(&chunk);
                }
                chunk.clear();
                chunk.push_str(piece);
                chunk_chars = piece_chars;
                chunk_started = true;
            }
        }
    }
    if chunk_started {
        emit(&chunk);
    }
}

#[cfg(test)]
mod tests;
