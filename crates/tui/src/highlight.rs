//! A small syntax highlighter for fenced code: keywords, strings, comments and numbers
//! of the common languages, one line at a time (no state across lines, so a block
//! streamed line by line colours the same as a finished one).

use ratatui::text::Span;

use crate::theme::Theme;

/// Words coloured as keywords, across Rust, Python, JavaScript/TypeScript, Go, C, shell.
const KEYWORDS: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "def",
    "default",
    "defer",
    "del",
    "do",
    "done",
    "elif",
    "else",
    "enum",
    "esac",
    "except",
    "export",
    "extends",
    "false",
    "fi",
    "finally",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "is",
    "lambda",
    "let",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "nil",
    "None",
    "not",
    "null",
    "or",
    "and",
    "package",
    "pass",
    "pub",
    "raise",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "switch",
    "then",
    "this",
    "throw",
    "trait",
    "True",
    "False",
    "true",
    "try",
    "type",
    "typeof",
    "undefined",
    "unsafe",
    "use",
    "var",
    "void",
    "where",
    "while",
    "with",
    "yield",
    "echo",
    "local",
];

/// The line-comment marker of `language`.
fn comment_marker(language: &str) -> Option<&'static str> {
    match language {
        "python" | "py" | "sh" | "bash" | "shell" | "zsh" | "toml" | "yaml" | "yml" | "ruby" | "rb" | "perl" => {
            Some("#")
        }
        "sql" | "lua" | "haskell" => Some("--"),
        "" | "text" | "txt" | "json" | "markdown" | "md" => None,
        _ => Some("//"),
    }
}

/// The spans of one line of code in `language`.
pub fn highlight(line: &str, language: &str, theme: &Theme) -> Vec<Span<'static>> {
    if matches!(language, "" | "text" | "txt") {
        return vec![Span::styled(line.to_owned(), theme.code)];
    }
    let comment = comment_marker(language);
    let mut spans = Vec::new();
    let mut plain = String::new();
    let mut rest = line;
    while let Some(first) = rest.chars().next() {
        if let Some(marker) = comment
            && rest.starts_with(marker)
        {
            flush(&mut spans, &mut plain, theme);
            spans.push(Span::styled(rest.to_owned(), theme.comment));
            return spans;
        }
        if first == '"' || first == '\'' || first == '`' {
            let end = string_end(rest, first);
            flush(&mut spans, &mut plain, theme);
            spans.push(Span::styled(rest[..end].to_owned(), theme.string));
            rest = &rest[end..];
            continue;
        }
        if first.is_alphanumeric() || first == '_' {
            let end =
                rest.find(|character: char| !(character.is_alphanumeric() || character == '_')).unwrap_or(rest.len());
            let word = &rest[..end];
            if first.is_ascii_digit() {
                flush(&mut spans, &mut plain, theme);
                spans.push(Span::styled(word.to_owned(), theme.number));
            } else if KEYWORDS.contains(&word) {
                flush(&mut spans, &mut plain, theme);
                spans.push(Span::styled(word.to_owned(), theme.keyword));
            } else {
                plain.push_str(word);
            }
            rest = &rest[end..];
            continue;
        }
        plain.push(first);
        rest = &rest[first.len_utf8()..];
    }
    flush(&mut spans, &mut plain, theme);
    spans
}

/// Where the string literal opening `rest` with `quote` ends (past its closing quote, or
/// the end of the line), honouring backslash escapes.
fn string_end(rest: &str, quote: char) -> usize {
    let mut escaped = false;
    for (index, character) in rest.char_indices().skip(1) {
        match character {
            '\\' if !escaped => escaped = true,
            character if character == quote && !escaped => return index + character.len_utf8(),
            _ => escaped = false,
        }
    }
    rest.len()
}

fn flush(spans: &mut Vec<Span<'static>>, plain: &mut String, theme: &Theme) {
    if !plain.is_empty() {
        spans.push(Span::styled(std::mem::take(plain), theme.code));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::theme::ThemeName;

    #[test]
    fn keywords_strings_comments_and_numbers_get_their_styles() {
        let theme = Theme::named(ThemeName::Dark);
        let spans = highlight("let x = \"a \\\" b\" + 42; // done", "rust", &theme);
        let styled: Vec<(&str, bool)> =
            spans.iter().map(|span| (span.content.as_ref(), span.style == theme.code)).collect();
        assert_eq!(
            styled,
            vec![
                ("let", false),
                (" x = ", true),
                ("\"a \\\" b\"", false),
                (" + ", true),
                ("42", false),
                ("; ", true),
                ("// done", false)
            ]
        );
        assert_eq!(spans[0].style, theme.keyword);
        assert_eq!(spans[6].style, theme.comment);
    }

    #[test]
    fn shell_comments_use_a_hash() {
        let theme = Theme::named(ThemeName::Dark);
        let spans = highlight("echo hi # greet", "sh", &theme);
        assert_eq!(spans.last().map(|span| span.content.as_ref()), Some("# greet"));
    }
}
