//! Tests of the HTML reader through its renderers: entities, lists, links, dropped
//! elements, comments, CDATA, broken markup, and arbitrary input that must never panic.

use super::*;

const MAIL: Layout = Layout::Blocks { quotes: QuoteMarks::Prefixed };
const BROWSER: Layout = Layout::Blocks { quotes: QuoteMarks::Dropped };

/// Resolves links against `https://site.test/` the simple way a caller might.
fn site(href: &str) -> Option<String> {
    if href.contains(':') {
        Some(href.to_owned())
    } else {
        Some(format!("https://site.test/{}", href.trim_start_matches('/')))
    }
}

fn markdown(html: &str) -> String {
    to_markdown(html, &site).markdown
}

#[test]
fn entities_decode_browser_style_in_markdown_and_strictly_in_plain_text() {
    let html = "<p>Fish &amp; Chips &lt;3 caf&eacute; &amp b &#150; &#1;x</p>";
    assert_eq!(markdown(html), "Fish & Chips <3 café & b – \u{1}x");
    assert_eq!(to_plain(html, MAIL), "Fish & Chips <3 café &amp b – &#1;x");
    assert_eq!(to_plain("a&nbsp;&nbsp;b", MAIL), "a b");
    assert_eq!(to_plain("a&nbsp;&nbsp;b", Layout::AsWritten), "a  b");
}

#[test]
fn nested_lists_indent_and_number() {
    let html = "<ul><li>a<ul><li>b</li><li>c</li></ul></li><li>d<ol start=\"3\"><li>e</li><li>f</li></ol></li></ul>";
    assert_eq!(markdown(html), "- a\n  - b\n  - c\n- d\n  3. e\n  4. f");
    assert_eq!(to_plain(html, MAIL), "- a\n  - b\n  - c\n- d\n  3. e\n  4. f");
    assert_eq!(to_plain("<p>x</p><ol><li>one</li><li>two</li></ol><p>y</p>", BROWSER), "x\n\n1. one\n2. two\n\ny");
}

#[test]
fn links_show_where_they_lead() {
    let html = r##"<a href="/docs">the docs</a>, <a href="https://x.test">https://x.test</a>, <a href="#top">top</a>, <a href="javascript:go()">go</a>, <a href="mailto:a@x.test">a@x.test</a>, <a href="rel">rel</a>"##;
    assert_eq!(
        markdown(html),
        "[the docs](https://site.test/docs), [https://x.test](https://x.test), top, go, [a@x.test](mailto:a@x.test), [rel](https://site.test/rel)"
    );
    assert_eq!(to_plain(html, MAIL), "the docs, https://x.test, top, go, a@x.test, rel");
    assert_eq!(
        to_plain(r#"see <a href="https://x.test/?a=1&amp;b=2">the docs</a>. <a href="https://y.test"></a>"#, MAIL),
        "see the docs (https://x.test/?a=1&b=2). https://y.test"
    );
    assert_eq!(to_plain("<a href=\"https://x.test\">x\n  y</a>\n\n", Layout::AsWritten), "x\n  y (https://x.test)\n\n");
}

#[test]
fn scripts_styles_and_the_head_are_dropped() {
    let html = "<html><head><title>T</title><style>p { color: red }</style></head><body>\
                <script>if (a < b) { document.write('<p>x</p>') }</script><p>shown</p>\
                <noscript>enable js</noscript><svg><text>drawn</text></svg><template><p>later</p></template></body>";
    assert_eq!(to_plain(html, MAIL), "shown");
    let document = to_markdown(html, &site);
    assert_eq!(document.title.as_deref(), Some("T"));
    assert_eq!(document.markdown, "shown");
    assert_eq!(to_plain("<head><title>T</title><body>no end of head", MAIL), "no end of head");
}

#[test]
fn comments_and_cdata_vanish() {
    let html = "a<!-- <b>hidden</b> -->b<![CDATA[x > y]]>c<!--never closed";
    assert_eq!(to_plain(html, MAIL), "abc");
    assert_eq!(markdown(html), "abc");
}

#[test]
fn quotes_are_marked_or_set_off() {
    let html = "<p>Yes.</p><blockquote><p>Meet?</p><p>Ann</p></blockquote><p>Bye</p>";
    assert_eq!(to_plain(html, MAIL), "Yes.\n\n> Meet?\n\n> Ann\n\nBye");
    assert_eq!(to_plain(html, BROWSER), "Yes.\n\nMeet?\n\nAnn\n\nBye");
    assert_eq!(markdown(html), "Yes.\n\n> Meet?\n\n> Ann\n\nBye");
}

#[test]
fn tables_become_rows_of_cells() {
    let html = "<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr><tr><td></td><td>2</td></tr></table>";
    assert_eq!(markdown(html), "k | v\na | 1\n | 2");
    assert_eq!(to_plain(html, MAIL), "k | v\na | 1\n2");
}

#[test]
fn preformatted_text_keeps_its_lines() {
    let html = "<p>run</p><pre>\nmake  all\n  done</pre><p>ok</p>";
    assert_eq!(to_plain(html, MAIL), "run\n\nmake  all\n  done\n\nok");
    assert_eq!(markdown(html), "run\n\n```\nmake  all\n  done\n```\n\nok");
}

#[test]
fn text_as_written_keeps_its_whitespace() {
    let html = "<b>Plan</b>\n\n• one\n<blockquote>q</blockquote>\n<pre><code>x &gt; y\n  z</code></pre>";
    assert_eq!(to_plain(html, Layout::AsWritten), "Plan\n\n• one\nq\nx > y\n  z");
}

#[test]
fn malformed_markup_stays_readable() {
    assert_eq!(to_plain("a < b and c<d <p unterminated", MAIL), "a < b and c<d <p unterminated");
    assert_eq!(to_plain("<p>a</b></p></div>b</p>", MAIL), "a\n\nb");
    assert_eq!(to_plain("<p title=\"a > b\">t</p>", MAIL), "t");
    assert_eq!(to_plain("<script>never closed", MAIL), "");
    assert_eq!(markdown("<ul><li>open<li>items"), "- open\n- items");
    assert_eq!(to_plain("<ul><li>open<li>items", MAIL), "- open\n- items");
}

#[test]
fn arbitrary_markup_never_panics() {
    const PIECES: [&str; 40] = [
        "<",
        ">",
        "/",
        "a",
        "é",
        "&",
        "#",
        ";",
        "\"",
        "'",
        "=",
        " ",
        "\n",
        "<!--",
        "-->",
        "<![CDATA[",
        "]]>",
        "script",
        "<a href=",
        "<pre>",
        "</",
        "<li>",
        "<ol>",
        "<td>",
        "<blockquote>",
        "</blockquote>",
        "<br>",
        "</a>",
        "😀",
        "&#x",
        "<title>",
        "<head>",
        "<body>",
        "<table>",
        "<tr>",
        "<ul>",
        "</li>",
        "&nbsp;",
        "<svg>",
        "mailto:",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..3000 {
        let mut input = String::new();
        for _ in 0..48 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            input.push_str(PIECES[(state % PIECES.len() as u64) as usize]);
        }
        let document = to_markdown(&input, &site);
        assert!(!document.markdown.contains("\n\n\n"), "{input:?}");
        for layout in [MAIL, BROWSER, Layout::AsWritten] {
            let text = to_plain(&input, layout);
            if layout != Layout::AsWritten {
                assert!(!text.contains("\n\n\n"), "{input:?}");
            }
        }
    }
}
