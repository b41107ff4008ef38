//! The Markdown models write, made into the CommonMark they mean before it is parsed:
//! leading tabs count as four spaces, and a list nested under an item by fewer spaces
//! than the item's text is indented (`1. first` then `  - inner`, as models often
//! write) moves under that text, where CommonMark would end the list and start another.

use crate::split::{closes_fence, opening_fence};

/// `text` with leading tabs expanded and under-indented nested lists moved under their
/// item's text.
pub(super) fn prepare(text: &str) -> String {
    let mut output = String::with_capacity(text.len() + text.len() / 8);
    let mut items: Vec<OpenItem> = Vec::new();
    let mut fence = None;
    let mut previous_blank = false;
    for line in text.lines() {
        let line = expand_leading_tabs(line);
        let shift = match &fence {
            Some((open, shift)) => {
                let shift = *shift;
                // Fences inside list items are indented: judged without the indentation.
                if closes_fence(line.trim_start(), open) {
                    fence = None;
                }
                shift
            }
            None if is_blank(&line) => 0,
            None => {
                let shift = line_shift(&line, &mut items, previous_blank);
                fence = opening_fence(line.trim_start()).map(|open| (open, shift));
                shift
            }
        };
        previous_blank = fence.is_none() && is_blank(&line);
        if !output.is_empty() {
            output.push('\n');
        }
        output.extend(std::iter::repeat_n(' ', shift));
        output.push_str(&line);
    }
    output
}

/// A list item that later lines may belong to, in the input's columns.
#[derive(Debug, Clone, Copy)]
struct OpenItem {
    /// Spaces before its marker.
    marker: usize,
    /// Column where its text starts.
    content: usize,
    /// Spaces its lines are moved right by.
    shift: usize,
}

/// How far `line` (not blank, not in a fence) moves right, keeping `items` up to date.
fn line_shift(line: &str, items: &mut Vec<OpenItem>, previous_blank: bool) -> usize {
    let indent = indentation(line);
    if let Some(marker) = list_marker(line).filter(|_| !squidbot_core::text::is_thematic_break(line)) {
        // Siblings and items further left end the items they would be inside of.
        while items.last().is_some_and(|item| item.marker >= indent) {
            items.pop();
        }
        let shift = items.last().map_or(0, |parent| parent.shift + parent.content.saturating_sub(indent));
        items.push(OpenItem { marker: indent, content: marker.content_offset, shift });
        return shift;
    }
    if previous_blank {
        // After a blank line, text left of an item's content ends the item.
        while items.last().is_some_and(|item| indent < item.content) {
            items.pop();
        }
    }
    items.iter().rev().find(|item| indent >= item.content).map_or(0, |item| item.shift)
}

/// Leading tabs count as four spaces, so indentation can be measured in spaces.
pub(super) fn expand_leading_tabs(line: &str) -> String {
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

/// A list item's marker line.
struct ListMarker {
    /// Column where the item's content starts; continuation lines indented this far
    /// belong to the item.
    content_offset: usize,
}

fn list_marker(line: &str) -> Option<ListMarker> {
    let indent = indentation(line);
    let rest = line.get(indent..)?;
    let marker_width = if rest.starts_with(['-', '*', '+']) {
        1
    } else {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if !(1..=9).contains(&digits) || !rest.get(digits..)?.starts_with(['.', ')']) {
            return None;
        }
        digits + 1
    };
    let after = rest.get(marker_width..)?;
    if !after.is_empty() && !after.starts_with(' ') {
        return None;
    }
    let spaces = indentation(after);
    // Content indented five or more spaces is indented code after a one-space marker.
    let spaces = if spaces == 0 || spaces > 4 || spaces == after.len() { 1 } else { spaces };
    Some(ListMarker { content_offset: indent + marker_width + spaces })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_indented_nested_lists_move_under_their_item() {
        assert_eq!(prepare("1. first\n  - inner\n  - more\n2. second"), "1. first\n   - inner\n   - more\n2. second");
        assert_eq!(prepare("1. a\n  - b\n    - c\n2. d"), "1. a\n   - b\n     - c\n2. d");
        assert_eq!(prepare("- a\n  - b\n    - c"), "- a\n  - b\n    - c");
    }

    #[test]
    fn code_in_a_moved_item_moves_with_it() {
        assert_eq!(
            prepare("1. a\n  - b\n\n    ```\n    x\n      - not a list\n    ```\n2. c"),
            "1. a\n   - b\n\n     ```\n     x\n       - not a list\n     ```\n2. c"
        );
    }

    #[test]
    fn text_after_the_list_stays() {
        assert_eq!(prepare("1. a\n\nText\n  - x"), "1. a\n\nText\n  - x");
        assert_eq!(prepare("```\n1. a\n  - b\n```"), "```\n1. a\n  - b\n```");
    }
}
