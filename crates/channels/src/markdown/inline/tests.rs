//! Unit tests of inline parsing: emphasis rules, code spans, escapes, links, and hostile
//! input that must stay fast and shallow.

use super::*;

fn text(value: &str) -> Inline {
    Inline::Text(value.to_owned())
}

#[test]
fn emphasis_strong_and_strike() {
    assert_eq!(
        parse_inlines("a *b* **c** ~~d~~ _e_ __f__"),
        vec![
            text("a "),
            Inline::Emphasis(vec![text("b")]),
            text(" "),
            Inline::Strong(vec![text("c")]),
            text(" "),
            Inline::Strike(vec![text("d")]),
            text(" "),
            Inline::Emphasis(vec![text("e")]),
            text(" "),
            Inline::Strong(vec![text("f")]),
        ]
    );
}

#[test]
fn nested_spans() {
    assert_eq!(
        parse_inlines("**bold *both* bold**"),
        vec![Inline::Strong(vec![text("bold "), Inline::Emphasis(vec![text("both")]), text(" bold")])]
    );
    assert_eq!(parse_inlines("***x***"), vec![Inline::Emphasis(vec![Inline::Strong(vec![text("x")])])]);
}

#[test]
fn unbalanced_markers_stay_text() {
    for literal in ["2 * 3 = 6", "**unclosed bold", "a*b", "snake_case_name", "~single~", "trailing *", "* not a list"]
    {
        assert_eq!(parse_inlines(literal), vec![text(literal)], "{literal}");
    }
    assert_eq!(parse_inlines("**a*"), vec![text("*"), Inline::Emphasis(vec![text("a")])]);
}

#[test]
fn code_spans_are_verbatim_and_win_over_emphasis() {
    assert_eq!(parse_inlines("`*not* <b>`"), vec![Inline::Code("*not* <b>".to_owned())]);
    assert_eq!(
        parse_inlines("*a `b*` c*"),
        vec![Inline::Emphasis(vec![text("a "), Inline::Code("b*".to_owned()), text(" c")])]
    );
    assert_eq!(parse_inlines("`` a`b ``"), vec![Inline::Code("a`b".to_owned())]);
    assert_eq!(parse_inlines("`unclosed"), vec![text("`unclosed")]);
}

#[test]
fn backslash_escapes() {
    assert_eq!(parse_inlines(r"\*not emphasis\* \[x\] C:\path"), vec![text(r"*not emphasis* [x] C:\path")]);
}

#[test]
fn links_images_and_autolinks() {
    assert_eq!(
        parse_inlines("see [the *docs*](https://example.com/a_(b) \"title\") now"),
        vec![
            text("see "),
            Inline::Link {
                content: vec![text("the "), Inline::Emphasis(vec![text("docs")])],
                url: "https://example.com/a_(b)".to_owned()
            },
            text(" now"),
        ]
    );
    assert_eq!(
        parse_inlines("![alt](<https://x.test/a b.png>)"),
        vec![Inline::Link { content: vec![text("alt")], url: "https://x.test/a b.png".to_owned() }]
    );
    assert_eq!(
        parse_inlines("<https://x.test>"),
        vec![Inline::Link { content: vec![text("https://x.test")], url: "https://x.test".to_owned() }]
    );
    for literal in ["[no link]", "[empty]()", "[broken](https://x.test", "a < b > c", "<not a link>", "!"] {
        assert_eq!(parse_inlines(literal), vec![text(literal)], "{literal}");
    }
}

#[test]
fn emphasis_does_not_cross_links() {
    assert_eq!(
        parse_inlines("*[a*](u)"),
        vec![text("*"), Inline::Link { content: vec![text("a*")], url: "u".to_owned() }]
    );
}

#[test]
fn hostile_input_is_parsed_quickly_and_without_deep_recursion() {
    let inputs = [
        "*a ".repeat(20_000),
        "`".repeat(5_000) + &"``x".repeat(5_000),
        "[".repeat(20_000),
        "*".repeat(10_000) + "x" + &"*".repeat(10_000),
        "_(".repeat(10_000),
        "[a](".repeat(5_000),
    ];
    for input in inputs {
        let started = std::time::Instant::now();
        let parsed = parse_inlines(&input);
        let total: usize = parsed.iter().map(plain_text).map(|text| text.chars().count()).sum();
        assert!(total > 0);
        assert!(parsed.iter().map(span_depth).max().unwrap_or(0) <= MAX_SPAN_DEPTH + 1);
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }
}
