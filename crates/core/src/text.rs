//! Text helpers shared by tools and context assembly: char-boundary-safe truncation.

/// Largest index `<= index` that lies on a char boundary of `text`.
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    let mut boundary = index;
    while !text.is_char_boundary(boundary) {
        boundary -= 1;
    }
    boundary
}

/// Smallest index `>= index` that lies on a char boundary of `text`.
pub fn ceil_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    let mut boundary = index;
    while !text.is_char_boundary(boundary) {
        boundary += 1;
    }
    boundary
}

/// Keeps at most `max_chars` bytes of `text` by cutting out its middle and putting
/// `marker(omitted_chars)` there instead. `head_share` of the kept budget goes to the
/// start, the rest to the end. Text already short enough is returned unchanged.
pub fn truncate_middle(
    text: &str,
    max_chars: usize,
    head_share: f64,
    tail_share: f64,
    marker: impl Fn(usize) -> String,
) -> String {
    if text.len() <= max_chars {
        return text.to_owned();
    }
    let head_len = floor_char_boundary(text, (max_chars as f64 * head_share) as usize);
    let tail_budget = (max_chars as f64 * tail_share) as usize;
    let tail_start = ceil_char_boundary(text, text.len().saturating_sub(tail_budget).max(head_len));
    let omitted = tail_start - head_len;
    let mut result = String::with_capacity(max_chars + 64);
    result.push_str(&text[..head_len]);
    result.push_str(&marker(omitted));
    result.push_str(&text[tail_start..]);
    result
}

/// Tool-output truncation: half head, half tail, the middle replaced by a note.
pub fn truncate_output(text: &str, max_chars: usize) -> String {
    truncate_middle(text, max_chars, 0.5, 0.5, |omitted| format!("\n\n[... {omitted} characters omitted ...]\n\n"))
}

/// Rough token estimate (4 characters a token) used for context budgeting.
pub fn estimate_tokens(characters: usize) -> usize {
    characters.div_ceil(4)
}

/// Whether `text` is a Markdown thematic break (a horizontal rule): three or more of the
/// same `-`, `*` or `_`, with any whitespace between.
pub fn is_thematic_break(text: &str) -> bool {
    let mut marks = text.chars().filter(|character| !character.is_whitespace());
    let Some(first) = marks.next().filter(|first| matches!(first, '-' | '*' | '_')) else {
        return false;
    };
    let mut count = 1;
    for mark in marks {
        if mark != first {
            return false;
        }
        count += 1;
    }
    count >= 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(truncate_output("hello", 10), "hello");
    }

    #[test]
    fn long_text_keeps_head_and_tail_and_reports_omission() {
        let text = format!("{}{}{}", "a".repeat(100), "b".repeat(1000), "c".repeat(100));
        let cut = truncate_output(&text, 200);
        assert!(cut.starts_with(&"a".repeat(100)));
        assert!(cut.ends_with(&"c".repeat(100)));
        assert!(cut.contains("[... 1000 characters omitted ...]"), "{cut}");
    }

    #[test]
    fn truncation_never_splits_a_multibyte_char() {
        let text = "é".repeat(1000);
        let cut = truncate_middle(&text, 101, 0.7, 0.2, |n| format!("[{n}]"));
        assert!(cut.len() < 200);
        assert!(cut.starts_with('é'));
    }
}
