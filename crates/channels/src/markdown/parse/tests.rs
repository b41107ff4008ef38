//! Unit tests of the Markdown tree: blocks of every kind, list nesting as models write
//! it, emphasis rules, code spans, escapes, links, tables, and hostile input that must
//! stay fast and shallow.

use super::nesting::expand_leading_tabs;
use super::*;

fn text(value: &str) -> Inline {
    Inline::Text(value.to_owned())
}

fn paragraph(value: &str) -> Block {
    Block::Paragraph(vec![text(value)])
}

/// The inlines of a one-paragraph document.
fn parse_inlines(markdown: &str) -> Vec<Inline> {
    match parse(markdown).as_slice() {
        [Block::Paragraph(inlines)] => inlines.clone(),
        [] => Vec::new(),
        other => panic!("not one paragraph: {other:?}"),
    }
}

/// How deeply spans nest in `inline`.
fn span_depth(inline: &Inline) -> usize {
    match inline {
        Inline::Text(_) | Inline::Code(_) => 0,
        Inline::Strong(children) | Inline::Emphasis(children) | Inline::Strike(children) => {
            children.iter().map(span_depth).max().unwrap_or(0) + 1
        }
        Inline::Link { content, .. } => content.iter().map(span_depth).max().unwrap_or(0) + 1,
    }
}

/// Every inline of `block`, nested blocks included.
fn block_inlines(block: &Block) -> Vec<Inline> {
    match block {
        Block::Paragraph(inlines) | Block::Heading { content: inlines, .. } => inlines.clone(),
        Block::Quote(blocks) => blocks.iter().flat_map(block_inlines).collect(),
        Block::List { items, .. } => items.iter().flatten().flat_map(block_inlines).collect(),
        Block::Table(table) => table.head.iter().chain(table.rows.iter().flatten()).flatten().cloned().collect(),
        Block::Code { .. } | Block::Rule => Vec::new(),
    }
}

/// The text of `block` without markup.
fn block_text(block: &Block) -> String {
    match block {
        Block::Code { text, .. } => text.clone(),
        other => block_inlines(other).iter().map(plain_text).collect(),
    }
}

/// How deeply quotes and list items nest in `block`.
fn block_depth(block: &Block) -> usize {
    match block {
        Block::Quote(blocks) => blocks.iter().map(block_depth).max().unwrap_or(0) + 1,
        Block::List { items, .. } => items.iter().flatten().map(block_depth).max().unwrap_or(0) + 1,
        Block::Paragraph(_) | Block::Heading { .. } | Block::Code { .. } | Block::Rule | Block::Table(_) => 0,
    }
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

#[test]
fn tables_keep_their_cells_and_alignment() {
    let document = "| Name | Qty |\n|:-----|----:|\n| **Apple** | 3 |\n| Pear | 12 |";
    let blocks = parse(document);
    let [Block::Table(table)] = blocks.as_slice() else { panic!("not a table") };
    assert_eq!(table.alignments, vec![Alignment::Left, Alignment::Right]);
    assert_eq!(table.head, vec![vec![text("Name")], vec![text("Qty")]]);
    assert_eq!(
        table.rows,
        vec![
            vec![vec![Inline::Strong(vec![text("Apple")])], vec![text("3")]],
            vec![vec![text("Pear")], vec![text("12")]]
        ]
    );
}

#[test]
fn raw_html_is_text() {
    assert_eq!(parse("<div>\n**x**\n</div>"), vec![paragraph("<div>\n**x**\n</div>")]);
    assert_eq!(parse_inlines("a <b>c</b>"), vec![text("a <b>c</b>")]);
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
    // A line starting with `* ` is a list item; after a word it is text.
    for literal in
        ["2 * 3 = 6", "**unclosed bold", "a*b", "snake_case_name", "~single~", "trailing *", "x * not a list"]
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
    assert_eq!(
        parse_inlines("<ann@x.test>"),
        vec![Inline::Link { content: vec![text("ann@x.test")], url: "mailto:ann@x.test".to_owned() }]
    );
    for literal in
        ["[no link]", "[empty]()", "[broken](https://x.test", "a < b > c", "<not a link>", "!", "<ftp://x.test>"]
    {
        assert_eq!(parse_inlines(literal), vec![text(literal)], "{literal}");
    }
}

#[test]
fn an_image_inside_a_link_is_its_alt_text() {
    assert_eq!(
        parse_inlines("[![logo](https://x.test/l.png)](https://x.test)"),
        vec![Inline::Link { content: vec![text("logo")], url: "https://x.test".to_owned() }]
    );
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
        "- ".repeat(10_000) + "x",
        "> - ".repeat(5_000) + "x",
    ];
    for input in inputs {
        let started = std::time::Instant::now();
        let parsed = parse(&input);
        let total: usize = parsed.iter().map(block_text).map(|text| text.chars().count()).sum();
        assert!(total > 0);
        assert!(parsed.iter().map(block_depth).max().unwrap_or(0) <= MAX_BLOCK_DEPTH + 1);
        let inlines = parsed.iter().flat_map(block_inlines);
        assert!(inlines.map(|inline| span_depth(&inline)).max().unwrap_or(0) <= MAX_SPAN_DEPTH + 1);
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }
}
