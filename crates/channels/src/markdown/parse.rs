//! A small CommonMark-ish parser for the Markdown models write: block structure
//! (paragraphs, headings, fenced code, quotes, lists, rules) and inline spans, as a tree
//! the renderers walk. Anything it does not recognise stays text.

use crate::markdown::inline::parse_inlines;
use crate::split::{closes_fence, opening_fence};

/// Deepest nesting of quotes and lists that is parsed; deeper markers stay text, so
/// hostile input can't exhaust the stack.
const MAX_BLOCK_DEPTH: usize = 16;

/// A block of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Block {
    /// Lines of text; line breaks are kept as `\n` inside the text.
    Paragraph(Vec<Inline>),
    /// An ATX heading (`#` to `######`).
    Heading { level: u8, content: Vec<Inline> },
    /// A fenced code block, its text verbatim.
    Code { language: Option<String>, text: String },
    /// A block quote.
    Quote(Vec<Block>),
    /// A bullet list (`start` is `None`) or a numbered list starting at `start`.
    List { start: Option<u64>, items: Vec<Vec<Block>> },
    /// A thematic break (`---`).
    Rule,
}

/// An inline span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inline {
    /// Plain text, unescaped.
    Text(String),
    /// An inline code span, verbatim.
    Code(String),
    /// `**strong**`.
    Strong(Vec<Inline>),
    /// `*emphasis*`.
    Emphasis(Vec<Inline>),
    /// `~~strikethrough~~`.
    Strike(Vec<Inline>),
    /// `[text](url)`, `![alt](url)` and `<https://autolink>`.
    Link { content: Vec<Inline>, url: String },
}

/// Parses a whole document.
pub(crate) fn parse(text: &str) -> Vec<Block> {
    let lines: Vec<String> = text.lines().map(expand_leading_tabs).collect();
    parse_blocks(&lines, 0)
}

/// Leading tabs count as four spaces, so indentation can be measured in spaces.
fn expand_leading_tabs(line: &str) -> String {
    let rest = line.trim_start_matches([' ', '\t']);
    let indentation = line.get(..line.len() - rest.len()).unwrap_or_default();
    if !indentation.contains('\t') {
        return line.to_owned();
    }
    let mut expanded: String =
        indentation.chars().map(|character| if character == '\t' { "    " } else { " " }).collect();
    expanded.push_str(rest);
    expanded
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// `line` without up to `columns` leading spaces.
fn strip_columns(line: &str, columns: usize) -> String {
    let strip = indentation(line).min(columns);
    line.get(strip..).unwrap_or_default().to_owned()
}

/// The level and text of an ATX heading line.
fn heading(line: &str) -> Option<(u8, &str)> {
    if indentation(line) > 3 {
        return None;
    }
    let rest = line.trim_start();
    let hashes = rest.chars().take_while(|character| *character == '#').count();
    let level = u8::try_from(hashes).ok().filter(|level| (1..=6).contains(level))?;
    let after = rest.get(hashes..)?;
    if !after.is_empty() && !after.starts_with([' ', '\t']) {
        return None;
    }
    let content = after.trim();
    let without_closing = content.trim_end_matches('#');
    let content = if without_closing.is_empty() {
        ""
    } else if without_closing.ends_with([' ', '\t']) {
        without_closing.trim_end()
    } else {
        content
    };
    Some((level, content))
}

/// Whether `line` is a thematic break: three or more `-`, `*` or `_`, spaces allowed.
fn is_rule(line: &str) -> bool {
    indentation(line) <= 3 && squidbot_core::text::is_thematic_break(line)
}

/// The rest of a block-quote line after its `>` (and one optional space).
fn quote_content(line: &str) -> Option<&str> {
    if indentation(line) > 3 {
        return None;
    }
    let rest = line.trim_start().strip_prefix('>')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// A list item's marker line.
struct ListMarker {
    /// Spaces before the marker.
    indent: usize,
    /// The number of an ordered item, `None` for a bullet.
    number: Option<u64>,
    /// Column where the item's content starts; continuation lines indented this far
    /// belong to the item.
    content_offset: usize,
    /// The text after the marker.
    content: String,
}

fn list_marker(line: &str) -> Option<ListMarker> {
    let indent = indentation(line);
    let rest = line.get(indent..)?;
    let (number, marker_width) = if rest.starts_with(['-', '*', '+']) {
        (None, 1)
    } else {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if !(1..=9).contains(&digits) || !rest.get(digits..)?.starts_with(['.', ')']) {
            return None;
        }
        (Some(rest.get(..digits)?.parse::<u64>().ok()?), digits + 1)
    };
    let after = rest.get(marker_width..)?;
    if !after.is_empty() && !after.starts_with(' ') {
        return None;
    }
    let spaces = indentation(after);
    // Content indented five or more spaces would be indented code in CommonMark; here
    // it is text that starts one space after the marker.
    let spaces = if spaces == 0 || spaces > 4 || spaces == after.len() { 1 } else { spaces };
    Some(ListMarker {
        indent,
        number,
        content_offset: indent + marker_width + spaces,
        content: after.trim_start().to_owned(),
    })
}

/// Whether `line` starts a block that interrupts a paragraph.
fn starts_block(line: &str, depth: usize) -> bool {
    opening_fence(line).is_some()
        || heading(line).is_some()
        || is_rule(line)
        || (depth < MAX_BLOCK_DEPTH
            && (quote_content(line).is_some()
                // As in CommonMark, only a list starting at 1 interrupts a paragraph, so
                // "in\n2024. We" stays one paragraph.
                || list_marker(line).is_some_and(|marker| marker.indent <= 3 && marker.number.is_none_or(|n| n == 1))))
}

/// Keeps only characters that are safe in a class name and on every platform's fence.
fn language_of(info: &str) -> Option<String> {
    let word = info.split_whitespace().next()?;
    let language: String = word
        .chars()
        .filter(|character| character.is_ascii_alphanumeric() || matches!(character, '_' | '+' | '#' | '.' | '-'))
        .take(32)
        .collect();
    (!language.is_empty()).then_some(language)
}

fn parse_blocks(lines: &[String], depth: usize) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut index = 0;
    while let Some(line) = lines.get(index) {
        if is_blank(line) {
            index += 1;
            continue;
        }
        if let Some(fence) = opening_fence(line) {
            let indent = indentation(line);
            let mut body = Vec::new();
            index += 1;
            while let Some(inner) = lines.get(index) {
                index += 1;
                if closes_fence(inner, &fence) {
                    break;
                }
                body.push(strip_columns(inner, indent));
            }
            blocks.push(Block::Code { language: language_of(&fence.info), text: body.join("\n") });
            continue;
        }
        if let Some((level, content)) = heading(line) {
            blocks.push(Block::Heading { level, content: parse_inlines(content) });
            index += 1;
            continue;
        }
        if is_rule(line) {
            blocks.push(Block::Rule);
            index += 1;
            continue;
        }
        if depth < MAX_BLOCK_DEPTH {
            if quote_content(line).is_some() {
                let (inner, next) = collect_quote(lines, index, depth);
                blocks.push(Block::Quote(parse_blocks(&inner, depth + 1)));
                index = next;
                continue;
            }
            if list_marker(line).is_some_and(|marker| marker.indent <= 3) {
                let (list, next) = parse_list(lines, index, depth);
                blocks.push(list);
                index = next;
                continue;
            }
        }
        let mut paragraph = vec![line.trim()];
        index += 1;
        while let Some(next) = lines.get(index) {
            if is_blank(next) || starts_block(next, depth) {
                break;
            }
            paragraph.push(next.trim());
            index += 1;
        }
        blocks.push(Block::Paragraph(parse_inlines(&paragraph.join("\n"))));
    }
    blocks
}

/// The lines of the quote starting at `start`, without their markers, and the index
/// after it. A non-blank line that starts no other block continues the quote (lazily).
fn collect_quote(lines: &[String], start: usize, depth: usize) -> (Vec<String>, usize) {
    let mut inner: Vec<String> = Vec::new();
    let mut index = start;
    while let Some(line) = lines.get(index) {
        if let Some(content) = quote_content(line) {
            inner.push(content.to_owned());
        } else if !is_blank(line) && !starts_block(line, depth) && inner.last().is_some_and(|last| !is_blank(last)) {
            inner.push(line.trim().to_owned());
        } else {
            break;
        }
        index += 1;
    }
    (inner, index)
}

/// The list starting at `start` and the index after it.
fn parse_list(lines: &[String], start: usize, depth: usize) -> (Block, usize) {
    let first = lines.get(start).and_then(|line| list_marker(line));
    let ordered = first.as_ref().is_some_and(|marker| marker.number.is_some());
    let list_start = first.and_then(|marker| marker.number);
    let same_list =
        |line: &String| list_marker(line).filter(|marker| marker.indent <= 3 && marker.number.is_some() == ordered);
    let mut items = Vec::new();
    let mut index = start;
    while let Some(marker) = lines.get(index).and_then(same_list) {
        let mut item_lines = vec![marker.content.clone()];
        index += 1;
        while let Some(line) = lines.get(index) {
            if is_blank(line) {
                // Blank lines belong to the item only when indented content follows.
                let next = lines.iter().skip(index).position(|next| !is_blank(next)).map(|offset| index + offset);
                match next.and_then(|next| lines.get(next).map(|line| (next, line))) {
                    Some((next, line)) if indentation(line) >= marker.content_offset => {
                        item_lines.extend(std::iter::repeat_n(String::new(), next - index));
                        index = next;
                        continue;
                    }
                    Some(_) | None => break,
                }
            }
            let indent = indentation(line);
            if indent >= marker.content_offset {
                item_lines.push(strip_columns(line, marker.content_offset));
            } else if list_marker(line).is_some() {
                // A marker indented less than the content but more than this item's
                // marker is still a nested list (models often indent by two).
                if indent <= marker.indent {
                    break;
                }
                item_lines.push(strip_columns(line, indent));
            } else if item_lines.last().is_some_and(|last| !is_blank(last)) && !starts_block(line, depth) {
                item_lines.push(line.trim().to_owned());
            } else {
                break;
            }
            index += 1;
        }
        items.push(parse_blocks(&item_lines, depth + 1));
        // A blank line between two items keeps the list going.
        let next =
            lines.iter().skip(index).position(|line| !is_blank(line)).map_or(lines.len(), |offset| index + offset);
        if next > index && lines.get(next).and_then(same_list).is_some() {
            index = next;
        }
    }
    (Block::List { start: list_start, items }, index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: &str) -> Inline {
        Inline::Text(value.to_owned())
    }

    fn paragraph(value: &str) -> Block {
        Block::Paragraph(vec![text(value)])
    }

    #[test]
    fn blocks_of_every_kind_are_recognised() {
        let document =
            "# Title #\n\nSome text\nmore text\n\n```rust\nlet a = 1;\n```\n\n> quoted\n> lines\n\n---\n\n- one\n- two";
        assert_eq!(
            parse(document),
            vec![
                Block::Heading { level: 1, content: vec![text("Title")] },
                paragraph("Some text\nmore text"),
                Block::Code { language: Some("rust".to_owned()), text: "let a = 1;".to_owned() },
                Block::Quote(vec![paragraph("quoted\nlines")]),
                Block::Rule,
                Block::List { start: None, items: vec![vec![paragraph("one")], vec![paragraph("two")]] },
            ]
        );
    }

    #[test]
    fn lists_nest_by_indentation_and_keep_their_start() {
        let document = "3. first\n   - inner a\n   - inner b\n4. second\n\n5. third";
        let inner = Block::List { start: None, items: vec![vec![paragraph("inner a")], vec![paragraph("inner b")]] };
        assert_eq!(
            parse(document),
            vec![Block::List {
                start: Some(3),
                items: vec![vec![paragraph("first"), inner], vec![paragraph("second")], vec![paragraph("third")]],
            }]
        );
    }

    #[test]
    fn two_space_nesting_under_a_numbered_item_is_accepted() {
        let document = "1. first\n  - inner\n2. second";
        let Block::List { items, .. } = &parse(document)[0] else { panic!("not a list") };
        assert_eq!(items.len(), 2);
        assert!(matches!(items[0].get(1), Some(Block::List { start: None, .. })), "{items:?}");
    }

    #[test]
    fn a_list_interrupts_a_paragraph_but_a_year_does_not() {
        assert_eq!(parse("Items:\n- a").len(), 2);
        assert_eq!(parse("It was in\n2024. We met.").len(), 1);
    }

    #[test]
    fn unclosed_fences_run_to_the_end_and_tildes_work() {
        assert_eq!(parse("~~~\ncode\n\nmore"), vec![Block::Code { language: None, text: "code\n\nmore".to_owned() }]);
    }

    #[test]
    fn not_headings_rules_or_lists() {
        assert_eq!(parse("#hashtag"), vec![paragraph("#hashtag")]);
        assert_eq!(parse("-5 degrees"), vec![paragraph("-5 degrees")]);
        assert_eq!(parse("--"), vec![paragraph("--")]);
        assert_eq!(parse("####### seven"), vec![paragraph("####### seven")]);
    }

    #[test]
    fn code_fence_languages_are_sanitised() {
        assert_eq!(language_of("c++ extra"), Some("c++".to_owned()));
        assert_eq!(language_of("\"><script>"), Some("script".to_owned()));
        assert_eq!(language_of("\"<>\""), None);
    }

    #[test]
    fn deep_quote_nesting_stops_at_the_limit() {
        let document = ">".repeat(10_000) + " deep";
        let mut blocks = parse(&document);
        let mut depth = 0;
        while let [Block::Quote(inner)] = blocks.as_slice() {
            blocks = inner.clone();
            depth += 1;
        }
        assert_eq!(depth, MAX_BLOCK_DEPTH);
    }

    #[test]
    fn tabs_indent_like_four_spaces() {
        assert_eq!(expand_leading_tabs("\t- a\tb"), "    - a\tb");
    }
}
