//! Inline Markdown: code spans, links, and emphasis resolved with CommonMark's delimiter
//! run rules (left/right flanking, intraword `_`), so unbalanced markers stay text.

use std::collections::HashMap;

use crate::markdown::parse::Inline;

/// Deepest nesting of links inside link text that is parsed.
const MAX_LINK_DEPTH: usize = 4;
/// Deepest nesting of emphasis spans; deeper markers stay text.
const MAX_SPAN_DEPTH: usize = 32;
/// Longest link text or destination looked for, in characters, which keeps parsing
/// linear on text full of unmatched brackets.
const MAX_LINK_SCAN: usize = 2048;

/// Parses the inline content of a block.
pub(crate) fn parse_inlines(text: &str) -> Vec<Inline> {
    let characters: Vec<char> = text.chars().collect();
    parse_characters(&characters, 0)
}

/// A run of `*`, `_` or `~~` that may open or close a span.
#[derive(Debug, Clone, Copy)]
struct Delimiter {
    character: char,
    /// Markers not yet used by a span.
    count: usize,
    can_open: bool,
    can_close: bool,
}

impl Delimiter {
    fn literal(self) -> Inline {
        Inline::Text(std::iter::repeat_n(self.character, self.count).collect())
    }
}

enum Node {
    /// A finished inline and how deeply spans nest inside it.
    Inline(Inline, usize),
    Delimiter(Delimiter),
}

fn parse_characters(characters: &[char], link_depth: usize) -> Vec<Inline> {
    let mut nodes = tokenize(characters, link_depth);
    resolve_emphasis(&mut nodes);
    merge_text(nodes.into_iter().map(|node| match node {
        Node::Inline(inline, _) => inline,
        Node::Delimiter(delimiter) => delimiter.literal(),
    }))
}

/// Joins neighbouring text nodes.
fn merge_text(inlines: impl Iterator<Item = Inline>) -> Vec<Inline> {
    let mut merged: Vec<Inline> = Vec::new();
    for inline in inlines {
        match (merged.last_mut(), inline) {
            (_, Inline::Text(text)) if text.is_empty() => {}
            (Some(Inline::Text(previous)), Inline::Text(text)) => previous.push_str(&text),
            (_, inline) => merged.push(inline),
        }
    }
    merged
}

fn run_length(characters: &[char], start: usize, character: char) -> usize {
    characters.iter().skip(start).take_while(|next| **next == character).count()
}

fn collect(characters: &[char], start: usize, end: usize) -> String {
    characters.get(start..end).unwrap_or_default().iter().collect()
}

/// Finds code span closers, remembering failures so text full of unmatched backticks
/// stays linear: once no run of length `n` follows position `p`, none follows any later
/// position either.
#[derive(Default)]
struct CodeClosers {
    none_after: HashMap<usize, usize>,
}

impl CodeClosers {
    fn find(&mut self, characters: &[char], from: usize, length: usize) -> Option<usize> {
        if self.none_after.get(&length).is_some_and(|failed| *failed <= from) {
            return None;
        }
        let mut index = from;
        while let Some(character) = characters.get(index) {
            if *character == '`' {
                let run = run_length(characters, index, '`');
                if run == length {
                    return Some(index);
                }
                index += run;
            } else {
                index += 1;
            }
        }
        self.none_after.insert(length, from);
        None
    }
}

/// Code span content: line breaks become spaces, and one space is stripped from both
/// ends when both have one (so `` ` `x` ` `` can show backticks).
fn code_content(characters: &[char], start: usize, end: usize) -> String {
    let content: String = collect(characters, start, end).chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    if content.len() >= 2 && content.starts_with(' ') && content.ends_with(' ') && !content.trim().is_empty() {
        content.get(1..content.len() - 1).unwrap_or_default().to_owned()
    } else {
        content
    }
}

fn is_punctuation(character: char) -> bool {
    !character.is_alphanumeric() && !character.is_whitespace()
}

/// The delimiter a run of `character` at `start` forms, `None` when it can neither open
/// nor close (then it is text).
fn classify(characters: &[char], start: usize, run: usize, character: char) -> Option<Delimiter> {
    if character == '~' && run != 2 {
        return None;
    }
    let before = start.checked_sub(1).and_then(|index| characters.get(index)).copied();
    let after = characters.get(start + run).copied();
    let before_is_space_or_punctuation = before.is_none_or(|c| c.is_whitespace() || is_punctuation(c));
    let after_is_space_or_punctuation = after.is_none_or(|c| c.is_whitespace() || is_punctuation(c));
    let left_flanking = after.is_some_and(|c| !c.is_whitespace())
        && (!after.is_some_and(is_punctuation) || before_is_space_or_punctuation);
    let right_flanking = before.is_some_and(|c| !c.is_whitespace())
        && (!before.is_some_and(is_punctuation) || after_is_space_or_punctuation);
    let (can_open, can_close) = if character == '_' {
        // `snake_case_words` keep their underscores.
        (
            left_flanking && (!right_flanking || before.is_some_and(is_punctuation)),
            right_flanking && (!left_flanking || after.is_some_and(is_punctuation)),
        )
    } else {
        (left_flanking, right_flanking)
    };
    (can_open || can_close).then_some(Delimiter { character, count: run, can_open, can_close })
}

/// A link's text end, destination and the index after it, for link text starting at
/// `start` (just after the `[`).
fn link_at(characters: &[char], start: usize) -> Option<(usize, String, usize)> {
    let mut depth = 1_usize;
    let mut index = start;
    let close = loop {
        if index >= start + MAX_LINK_SCAN {
            return None;
        }
        match characters.get(index)? {
            '\\' => index += 1,
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    break index;
                }
            }
            _ => {}
        }
        index += 1;
    };
    if characters.get(close + 1) != Some(&'(') {
        return None;
    }
    let mut index = close + 2;
    let skip_spaces = |index: &mut usize| {
        while characters.get(*index).is_some_and(|c| c.is_whitespace()) {
            *index += 1;
        }
    };
    skip_spaces(&mut index);
    let limit = index + MAX_LINK_SCAN;
    let mut url = String::new();
    if characters.get(index) == Some(&'<') {
        index += 1;
        loop {
            match *characters.get(index).filter(|_| index < limit)? {
                '>' => break,
                '\n' | '<' => return None,
                '\\' if characters.get(index + 1).is_some_and(char::is_ascii_punctuation) => {
                    index += 1;
                    url.push(*characters.get(index)?);
                }
                other => url.push(other),
            }
            index += 1;
        }
        index += 1;
    } else {
        let mut parentheses = 0_usize;
        loop {
            let character = *characters.get(index).filter(|_| index < limit)?;
            match character {
                ')' if parentheses == 0 => break,
                ')' => parentheses -= 1,
                '(' => parentheses += 1,
                '\\' if characters.get(index + 1).is_some_and(char::is_ascii_punctuation) => {
                    index += 1;
                    url.push(*characters.get(index)?);
                    index += 1;
                    continue;
                }
                other if other.is_whitespace() || other.is_control() => break,
                _ => {}
            }
            url.push(character);
            index += 1;
        }
    }
    skip_spaces(&mut index);
    // An optional title, which chat platforms have no place for.
    if let Some(&quote) = characters.get(index).filter(|c| matches!(c, '"' | '\'' | '(')) {
        let end_quote = if quote == '(' { ')' } else { quote };
        index += 1;
        while characters.get(index).is_some_and(|c| *c != end_quote) && index < limit {
            index += 1;
        }
        index += 1;
        skip_spaces(&mut index);
    }
    (characters.get(index) == Some(&')') && !url.is_empty()).then_some((close, url, index + 1))
}

/// An autolink (`<https://…>`, `<mailto:…>`) at `start`: its URL and the index after it.
fn autolink_at(characters: &[char], start: usize) -> Option<(String, usize)> {
    let mut url = String::new();
    let mut index = start + 1;
    loop {
        let character = *characters.get(index).filter(|_| index <= start + MAX_LINK_SCAN)?;
        match character {
            '>' => break,
            '<' => return None,
            other if other.is_whitespace() || other.is_control() => return None,
            other => url.push(other),
        }
        index += 1;
    }
    let lowercase = url.to_ascii_lowercase();
    let known = ["http://", "https://", "mailto:"].iter().any(|scheme| lowercase.starts_with(scheme));
    (known && lowercase.len() > "mailto:".len()).then_some((url, index + 1))
}

fn tokenize(characters: &[char], link_depth: usize) -> Vec<Node> {
    let mut nodes = Vec::new();
    let mut text = String::new();
    let mut code_closers = CodeClosers::default();
    let flush = |text: &mut String, nodes: &mut Vec<Node>| {
        if !text.is_empty() {
            nodes.push(Node::Inline(Inline::Text(std::mem::take(text)), 0));
        }
    };
    let mut index = 0;
    while let Some(&character) = characters.get(index) {
        match character {
            '\\' => match characters.get(index + 1).copied() {
                Some(next) if next.is_ascii_punctuation() || next == '\n' => {
                    text.push(next);
                    index += 2;
                }
                Some(_) | None => {
                    text.push('\\');
                    index += 1;
                }
            },
            '`' => {
                let run = run_length(characters, index, '`');
                if let Some(close) = code_closers.find(characters, index + run, run) {
                    flush(&mut text, &mut nodes);
                    nodes.push(Node::Inline(Inline::Code(code_content(characters, index + run, close)), 0));
                    index = close + run;
                } else {
                    text.extend(std::iter::repeat_n('`', run));
                    index += run;
                }
            }
            '*' | '_' | '~' => {
                let run = run_length(characters, index, character);
                if let Some(delimiter) = classify(characters, index, run, character) {
                    flush(&mut text, &mut nodes);
                    nodes.push(Node::Delimiter(delimiter));
                } else {
                    text.extend(std::iter::repeat_n(character, run));
                }
                index += run;
            }
            '[' | '!' => {
                let text_start = if character == '!' { index + 2 } else { index + 1 };
                let is_link_start = character == '[' || characters.get(index + 1) == Some(&'[');
                let link =
                    if is_link_start && link_depth < MAX_LINK_DEPTH { link_at(characters, text_start) } else { None };
                match link {
                    Some((close, url, after)) => {
                        flush(&mut text, &mut nodes);
                        let inner = characters.get(text_start..close).unwrap_or_default();
                        let content = parse_characters(inner, link_depth + 1);
                        let depth = content.iter().map(span_depth).max().unwrap_or(0) + 1;
                        nodes.push(Node::Inline(Inline::Link { content, url }, depth));
                        index = after;
                    }
                    None => {
                        text.push(character);
                        index += 1;
                    }
                }
            }
            '<' => match autolink_at(characters, index) {
                Some((url, after)) => {
                    flush(&mut text, &mut nodes);
                    nodes.push(Node::Inline(Inline::Link { content: vec![Inline::Text(url.clone())], url }, 1));
                    index = after;
                }
                None => {
                    text.push('<');
                    index += 1;
                }
            },
            _ => {
                text.push(character);
                index += 1;
            }
        }
    }
    flush(&mut text, &mut nodes);
    nodes
}

/// How deeply spans nest in `inline` (bounded by construction).
fn span_depth(inline: &Inline) -> usize {
    match inline {
        Inline::Text(_) | Inline::Code(_) => 0,
        Inline::Strong(children) | Inline::Emphasis(children) | Inline::Strike(children) => {
            children.iter().map(span_depth).max().unwrap_or(0) + 1
        }
        Inline::Link { content, .. } => content.iter().map(span_depth).max().unwrap_or(0) + 1,
    }
}

fn delimiter_at(nodes: &[Node], index: usize) -> Option<Delimiter> {
    match nodes.get(index) {
        Some(Node::Delimiter(delimiter)) => Some(*delimiter),
        Some(Node::Inline(..)) | None => None,
    }
}

fn set_count(nodes: &mut [Node], index: usize, count: usize) {
    if let Some(Node::Delimiter(delimiter)) = nodes.get_mut(index) {
        delimiter.count = count;
    }
}

/// CommonMark's "process emphasis": each closer, left to right, takes the nearest
/// earlier opener of the same character; the nodes between become the span's children.
fn resolve_emphasis(nodes: &mut Vec<Node>) {
    // Per character, the lowest index worth searching for an opener (none below it).
    let mut floors: HashMap<char, usize> = HashMap::new();
    let mut closer = 0;
    while closer < nodes.len() {
        let Some(close) = delimiter_at(nodes, closer).filter(|close| close.can_close && close.count > 0) else {
            closer += 1;
            continue;
        };
        let floor = floors.get(&close.character).copied().unwrap_or(0);
        let opener = (floor..closer).rev().find(|index| {
            delimiter_at(nodes, *index)
                .is_some_and(|open| open.character == close.character && open.can_open && open.count > 0)
        });
        let Some((opener, open)) = opener.and_then(|index| delimiter_at(nodes, index).map(|open| (index, open))) else {
            floors.insert(close.character, closer);
            if !close.can_open
                && let Some(node) = nodes.get_mut(closer)
            {
                *node = Node::Inline(close.literal(), 0);
            }
            closer += 1;
            continue;
        };
        let used = if close.character == '~' || (open.count >= 2 && close.count >= 2) { 2 } else { 1 };
        let children: Vec<Node> = nodes.drain(opener + 1..closer).collect();
        let depth = children.iter().map(|node| if let Node::Inline(_, depth) = node { *depth } else { 0 }).max();
        let depth = depth.unwrap_or(0) + 1;
        let children = merge_text(children.into_iter().map(|node| match node {
            Node::Inline(inline, _) => inline,
            Node::Delimiter(delimiter) => delimiter.literal(),
        }));
        let span = if depth > MAX_SPAN_DEPTH {
            // Too deep to render safely: the span becomes text, its markers included.
            let markers: String = std::iter::repeat_n(close.character, used).collect();
            let inner: String = children.iter().map(plain_text).collect();
            Node::Inline(Inline::Text(format!("{markers}{inner}{markers}")), 0)
        } else {
            match (close.character, used) {
                ('~', _) => Node::Inline(Inline::Strike(children), depth),
                (_, 2) => Node::Inline(Inline::Strong(children), depth),
                (_, _) => Node::Inline(Inline::Emphasis(children), depth),
            }
        };
        nodes.insert(opener + 1, span);
        let mut closer_index = opener + 2;
        set_count(nodes, opener, open.count - used);
        set_count(nodes, closer_index, close.count - used);
        if open.count == used {
            nodes.remove(opener);
            closer_index -= 1;
        }
        if close.count == used {
            nodes.remove(closer_index);
        }
        closer = closer_index;
        for floor in floors.values_mut() {
            *floor = (*floor).min(opener);
        }
    }
}

/// The text of an inline without its markup.
fn plain_text(inline: &Inline) -> String {
    match inline {
        Inline::Text(text) | Inline::Code(text) => text.clone(),
        Inline::Strong(children) | Inline::Emphasis(children) | Inline::Strike(children) => {
            children.iter().map(plain_text).collect()
        }
        Inline::Link { content, .. } => content.iter().map(plain_text).collect(),
    }
}

#[cfg(test)]
mod tests;
