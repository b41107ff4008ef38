//! Tests of the HTML to Markdown conversion.

use super::*;

fn convert(html: &str) -> String {
    let base = Url::parse("https://site.test/docs/page.html").ok();
    to_markdown(html, base.as_ref()).markdown
}

#[test]
fn a_page_becomes_markdown() {
    let html = r#"<!doctype html><html><head><title> The  Page </title>
        <style>body { color: red }</style><script>alert("x")</script></head>
        <body><nav><a href="/">Home</a></nav>
        <h1>Main   title</h1><p>Some <b>bold</b> text and a <a href="other.html">relative link</a>.</p>
        <h2>Part</h2><ul><li>one</li><li>two <a href="https://elsewhere.test/x">x</a></li></ul>
        <ol start="3"><li>three</li><li>four</li></ol>
        <pre><code>fn main() {
    println!("hi &lt;3");
}</code></pre>
        <p>Use <code>cargo   test</code> daily.</p><noscript>enable js</noscript></body></html>"#;
    let document = to_markdown(html, Url::parse("https://site.test/docs/page.html").ok().as_ref());
    assert_eq!(document.title.as_deref(), Some("The Page"));
    assert_eq!(
        document.markdown,
        "[Home](https://site.test/)\n\n# Main title\n\nSome bold text and a [relative link](https://site.test/docs/other.html).\n\n\
         ## Part\n\n- one\n- two [x](https://elsewhere.test/x)\n\n3. three\n4. four\n\n\
         ```\nfn main() {\n    println!(\"hi <3\");\n}\n```\n\nUse `cargo test` daily."
    );
}

#[test]
fn nested_lists_quotes_tables_and_breaks() {
    assert_eq!(convert("<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>"), "- a\n  - b\n- c");
    assert_eq!(convert("<blockquote><p>quoted</p><p>twice</p></blockquote>after"), "> quoted\n\n> twice\n\nafter");
    assert_eq!(convert("<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>"), "k | v\na | 1");
    assert_eq!(convert("line one<br>line two<br/><br>line four"), "line one\nline two\n\nline four");
    assert_eq!(convert("<p>a</p><hr><p>b</p>"), "a\n\n---\n\nb");
}

#[test]
fn links_without_targets_or_text_stay_plain() {
    assert_eq!(convert(r##"<a href="#top">top</a> <a href="javascript:void(0)">js</a> <a>none</a>"##), "top js none");
    assert_eq!(convert(r#"x <a href="/y"> </a> z"#), "x z");
    assert_eq!(convert(r#"<a href="/logo"><img src="l.png" alt="Logo"></a>"#), "[Logo](https://site.test/logo)");
    assert_eq!(convert(r#"<a href="/card"><h3>Card</h3><p>desc</p></a>"#), "### Card\n\ndesc (https://site.test/card)");
}

#[test]
fn skipped_elements_and_their_nesting() {
    assert_eq!(convert("a<svg><svg><title>t</title></svg><path/></svg>b<select><option>o</option></select>c"), "abc");
    assert_eq!(convert("<template><p>hidden</p></template>shown"), "shown");
}

#[test]
fn arbitrary_markup_never_panics() {
    const PIECES: [&str; 44] = [
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
        "script",
        "<a href=",
        "<pre>",
        "</",
        "<li>",
        "<ol>",
        "<td>",
        "<blockquote>",
        "<code>",
        "</code>",
        "</a>",
        "😀",
        "&#x",
        "<title>",
        "<h2>",
        "<br>",
        "<svg>",
        "<table>",
        "<tr>",
        "<ul>",
        "</li>",
        "</ol>",
        "<img alt=x>",
        "</pre>",
        "</blockquote>",
        "&amp;",
        "\t",
        "<hr>",
        "</h2>",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..2000 {
        let mut input = String::new();
        for _ in 0..64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            input.push_str(PIECES[(state % PIECES.len() as u64) as usize]);
        }
        let document = to_markdown(&input, Url::parse("https://site.test/").ok().as_ref());
        assert!(!document.markdown.contains("\n\n\n"), "{input:?}");
        let _ = to_text(&input);
    }
}

#[test]
fn snippets_become_plain_text() {
    assert_eq!(to_text("The <b>Rust</b> &amp; <em>Cargo</em>\n book<br>next"), "The Rust & Cargo book next");
}
