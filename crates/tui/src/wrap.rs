//! Wrapping styled text to a width: words stay whole where they fit, a prefix (a quote
//! bar, a list indent) starts every wrapped line.

use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `spans` wrapped to `width` columns: the first line starts with `first`, the others
/// with `rest` (both usually as wide).
pub fn wrap(
    first: &[Span<'static>],
    rest: &[Span<'static>],
    spans: Vec<Span<'static>>,
    width: usize,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut current: Vec<Span<'static>> = first.to_vec();
    let mut used: usize = first.iter().map(|span| span.width()).sum();
    let rest_width: usize = rest.iter().map(|span| span.width()).sum();
    // Never narrower than a few columns, so a deep prefix can't loop forever.
    let width = width.max(rest_width + 4);
    let mut line_has_text = false;
    for span in spans {
        let style = span.style;
        for piece in pieces(&span.content) {
            let piece_width = piece.width();
            let is_space = piece.chars().all(char::is_whitespace);
            if used + piece_width > width && line_has_text {
                trim_end(&mut current);
                lines.push(Line::from(std::mem::replace(&mut current, rest.to_vec())));
                used = rest_width;
                line_has_text = false;
                if is_space {
                    continue;
                }
            }
            if used + piece_width <= width {
                push(&mut current, piece, style);
                used += piece_width;
                line_has_text |= !is_space;
                continue;
            }
            // A word longer than a line: cut it by characters.
            for character in piece.chars() {
                let character_width = character.width().unwrap_or(0);
                if used + character_width > width && line_has_text {
                    lines.push(Line::from(std::mem::replace(&mut current, rest.to_vec())));
                    used = rest_width;
                }
                push(&mut current, &character.to_string(), style);
                used += character_width;
                line_has_text = true;
            }
        }
    }
    lines.push(Line::from(current));
    lines
}

/// Words and the runs of spaces between them.
fn pieces(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut in_space = None;
    for (index, character) in text.char_indices() {
        let space = character.is_whitespace();
        if in_space.is_some_and(|was| was != space) {
            pieces.push(&text[start..index]);
            start = index;
        }
        in_space = Some(space);
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Drops the spaces a wrapped line ends with.
fn trim_end(spans: &mut Vec<Span<'static>>) {
    if let Some(last) = spans.last_mut() {
        let trimmed = last.content.trim_end().len();
        if trimmed == 0 {
            spans.pop();
        } else {
            last.content.to_mut().truncate(trimmed);
        }
    }
}

/// Appends `text` to the last span when it has the same style.
fn push(spans: &mut Vec<Span<'static>>, text: &str, style: ratatui::style::Style) {
    if let Some(last) = spans.last_mut()
        && last.style == style
    {
        last.content.to_mut().push_str(text);
        return;
    }
    spans.push(Span::styled(text.to_owned(), style));
}

/// Plain text wrapped to `width`, one [`Line`] per wrapped line, in `style`.
pub fn wrap_text(text: &str, style: ratatui::style::Style, width: usize) -> Vec<Line<'static>> {
    text.split('\n').flat_map(|line| wrap(&[], &[], vec![Span::styled(line.to_owned(), style)], width)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|line| line.spans.iter().map(|span| span.content.as_ref()).collect()).collect()
    }

    #[test]
    fn words_wrap_at_the_width_with_the_prefix_on_every_line() {
        let prefix = [Span::raw("> ")];
        let lines = wrap(&prefix, &prefix, vec![Span::raw("one two three four")], 10);
        assert_eq!(texts(&lines), vec!["> one two", "> three", "> four"]);
    }

    #[test]
    fn a_long_word_is_cut() {
        let lines = wrap(&[], &[], vec![Span::raw("abcdefghij")], 4);
        assert_eq!(texts(&lines), vec!["abcd", "efgh", "ij"]);
    }
}
