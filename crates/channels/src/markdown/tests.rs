//! Unit tests of Markdown rendering per platform: markup, escaping, code left verbatim,
//! unsafe links, and seeded random input checked for well-formed HTML.

use squidbot_core::random::{RandomSource, SeededRandom};

use super::*;

use MarkdownFlavor::{DiscordMarkdown, MatrixHtml, PlainText, SlackMrkdwn, TelegramHtml};

const ALL: [MarkdownFlavor; 5] = [TelegramHtml, SlackMrkdwn, DiscordMarkdown, MatrixHtml, PlainText];

#[test]
fn telegram_inline_markup() {
    assert_eq!(
        render("**bold** *it* ~~gone~~ `a<b` [link](https://x.test/?a=1&b=2)", TelegramHtml),
        "<b>bold</b> <i>it</i> <s>gone</s> <code>a&lt;b</code> <a href=\"https://x.test/?a=1&amp;b=2\">link</a>"
    );
    assert_eq!(render("*a **b** c*", TelegramHtml), "<i>a <b>b</b> c</i>");
}

#[test]
fn telegram_blocks() {
    assert_eq!(render("## Plan\n\nSteps:", TelegramHtml), "<b>Plan</b>\n\nSteps:");
    assert_eq!(
        render("```python\nif a < b and c: print('**x**')\n```", TelegramHtml),
        "<pre><code class=\"language-python\">if a &lt; b and c: print('**x**')</code></pre>"
    );
    assert_eq!(render("```\n<b>raw</b>\n```", TelegramHtml), "<pre>&lt;b&gt;raw&lt;/b&gt;</pre>");
    assert_eq!(render("- a\n- b\n  1. c\n  2. d", TelegramHtml), "• a\n• b\n  1. c\n  2. d");
    assert_eq!(render("- a\n  - b\n    - c\n      - d", TelegramHtml), "• a\n  ◦ b\n    ▪ c\n      • d");
    assert_eq!(render("---", TelegramHtml), "———");
}

#[test]
fn code_blocks_in_list_items_are_not_indented_where_indentation_would_show() {
    let text = "1. Run:\n   ```sh\n   make\n   make test\n   ```\n2. Done";
    assert_eq!(
        render(text, TelegramHtml),
        "1. Run:\n<pre><code class=\"language-sh\">make\nmake test</code></pre>\n2. Done"
    );
    assert_eq!(render(text, SlackMrkdwn), "1. Run:\n```\nmake\nmake test\n```\n2. Done");
    assert_eq!(render(text, DiscordMarkdown), "1. Run:\n   ```sh\n   make\n   make test\n   ```\n2. Done");
}

#[test]
fn telegram_quotes_do_not_nest_or_hold_code_blocks() {
    assert_eq!(
        render("> quoted *x*\n> > nested\n> ```\n> code\n> ```", TelegramHtml),
        "<blockquote>quoted <i>x</i>\n\nnested\n\ncode</blockquote>"
    );
}

#[test]
fn telegram_links_hold_no_code() {
    assert_eq!(render("[`cmd`](https://x.test)", TelegramHtml), "<a href=\"https://x.test\">cmd</a>");
}

#[test]
fn slack_inline_markup() {
    assert_eq!(render("**bold** *it* ~~gone~~ `c<d>`", SlackMrkdwn), "*bold* _it_ ~gone~ `c&lt;d&gt;`");
    assert_eq!(
        render("[the *docs*](https://x.test/a?b=1&c=2|3)", SlackMrkdwn),
        "<https://x.test/a?b=1&amp;c=2%7C3|the docs>"
    );
    assert_eq!(render("<https://x.test>", SlackMrkdwn), "<https://x.test>");
}

#[test]
fn slack_blocks() {
    assert_eq!(render("## Plan", SlackMrkdwn), "*Plan*");
    assert_eq!(render("- a\n- b", SlackMrkdwn), "• a\n• b");
    assert_eq!(render("1. a\n1. b", SlackMrkdwn), "1. a\n2. b");
    assert_eq!(render("```rust\nlet x = a < b;\n```", SlackMrkdwn), "```\nlet x = a &lt; b;\n```");
    assert_eq!(render("> hi\n> there\n>\n> again", SlackMrkdwn), "> hi\n> there\n>\n> again");
}

#[test]
fn discord_markup_and_escapes() {
    assert_eq!(render("**b** *i* ~~s~~ `c`", DiscordMarkdown), "**b** *i* ~~s~~ `c`");
    assert_eq!(render("2 * 3 = 6 and snake_case | pipe", DiscordMarkdown), "2 \\* 3 = 6 and snake\\_case \\| pipe");
    assert_eq!(render("# Title\n\n#### Small", DiscordMarkdown), "# Title\n\n**Small**");
    assert_eq!(render("```py\nx = '**'\n```", DiscordMarkdown), "```py\nx = '**'\n```");
    assert_eq!(render("`a`b`", DiscordMarkdown), "`a`b\\`");
    assert_eq!(render("``a`b``", DiscordMarkdown), "`` a`b ``");
    assert_eq!(render("[t](https://x.test/a_(b))", DiscordMarkdown), "[t](https://x.test/a_%28b%29)");
    assert_eq!(render("\\# not a heading\n\\- nor a list", DiscordMarkdown), "\\# not a heading\n\\- nor a list");
    assert_eq!(render("1. a\n   - b", DiscordMarkdown), "1. a\n   - b");
    assert_eq!(render("> q", DiscordMarkdown), "> q");
}

#[test]
fn matrix_html() {
    assert_eq!(render("a **b** <c> & \"d\"", MatrixHtml), "a <strong>b</strong> &lt;c&gt; &amp; &quot;d&quot;");
    assert_eq!(
        render("# T\n\npara\nline 2\n\n```rust\nfn x() {}\n```\n\n- a\n- b\n\n3. c\n\n> q\n\n---", MatrixHtml),
        "<h1>T</h1>\n<p>para<br>line 2</p>\n<pre><code class=\"language-rust\">fn x() {}</code></pre>\n\
         <ul>\n<li>a</li>\n<li>b</li>\n</ul>\n<ol start=\"3\">\n<li>c</li>\n</ol>\n<blockquote>\n<p>q</p>\n</blockquote>\n<hr>"
    );
    assert_eq!(
        render("[x](https://x.test/?q=\"a\"&b='c')", MatrixHtml),
        "<a href=\"https://x.test/?q=&quot;a&quot;&amp;b=&#39;c&#39;\">x</a>"
    );
    assert_eq!(render("~~old~~ *new*", MatrixHtml), "<del>old</del> <em>new</em>");
    assert_eq!(render("```\n<i>\n```", MatrixHtml), "<pre><code>&lt;i&gt;</code></pre>");
}

#[test]
fn plain_text_drops_markup() {
    assert_eq!(
        render(
            "**b** [docs](https://x.test) `c` <https://y.test>\n\n# H\n\n- a\n\n```\ncode *x*\n```\n\n> q",
            PlainText
        ),
        "b docs (https://x.test) c https://y.test\n\nH\n\n- a\n\ncode *x*\n\n> q"
    );
}

#[test]
fn script_tags_are_escaped_everywhere_html_matters() {
    let text = "<script>alert('x')</script> & more";
    assert_eq!(render(text, TelegramHtml), "&lt;script&gt;alert('x')&lt;/script&gt; &amp; more");
    assert_eq!(render(text, SlackMrkdwn), "&lt;script&gt;alert('x')&lt;/script&gt; &amp; more");
    assert_eq!(render(text, MatrixHtml), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more");
    assert_eq!(render(text, PlainText), text);
}

#[test]
fn unsafe_links_are_not_made_clickable() {
    let text = "[click](javascript:alert(1))";
    assert_eq!(render(text, TelegramHtml), "click (javascript:alert(1))");
    assert_eq!(render(text, MatrixHtml), "click (javascript:alert(1))");
    assert_eq!(render(text, SlackMrkdwn), "click (javascript:alert(1))");
    assert_eq!(render(text, DiscordMarkdown), "click (javascript:alert(1))");
}

#[test]
fn unbalanced_markup_stays_literal_in_every_flavor() {
    let text = "2 * 3 and **open and `tick";
    assert_eq!(render(text, TelegramHtml), text);
    assert_eq!(render(text, SlackMrkdwn), text);
    assert_eq!(render(text, MatrixHtml), text);
    assert_eq!(render(text, PlainText), text);
    assert_eq!(render(text, DiscordMarkdown), "2 \\* 3 and \\*\\*open and \\`tick");
}

#[test]
fn code_blocks_containing_markup_are_left_verbatim() {
    let text = "```md\n# not a heading\n**not bold** [no](link) > no quote\n```";
    assert_eq!(
        render(text, TelegramHtml),
        "<pre><code class=\"language-md\"># not a heading\n**not bold** [no](link) &gt; no quote</code></pre>"
    );
    assert_eq!(render(text, SlackMrkdwn), "```\n# not a heading\n**not bold** [no](link) &gt; no quote\n```");
    assert_eq!(render(text, DiscordMarkdown), text);
    assert_eq!(render(text, PlainText), "# not a heading\n**not bold** [no](link) > no quote");
}

#[test]
fn empty_input_renders_empty() {
    for flavor in ALL {
        assert_eq!(render("", flavor), "");
        assert_eq!(render("  \n\n ", flavor), "");
    }
}

/// Checks that HTML output has only known tags, balanced, and no bare `<`, `>` or `&`.
fn assert_well_formed_html(html: &str, allowed: &[&str], input: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(position) = rest.find(['<', '>', '&']) {
        let after = &rest[position..];
        if let Some(entity_rest) = after.strip_prefix('&') {
            let known = ["amp;", "lt;", "gt;", "quot;", "#39;"];
            let entity = known.iter().find(|entity| entity_rest.starts_with(*entity));
            let entity = entity.unwrap_or_else(|| panic!("bare & in {html:?} from {input:?}"));
            rest = &entity_rest[entity.len()..];
            continue;
        }
        assert!(after.starts_with('<'), "bare > in {html:?} from {input:?}");
        let end = after.find('>').unwrap_or_else(|| panic!("unclosed tag in {html:?} from {input:?}"));
        let tag = &after[1..end];
        let name: String = tag.trim_start_matches('/').chars().take_while(char::is_ascii_alphanumeric).collect();
        assert!(allowed.contains(&name.as_str()), "tag {tag:?} in {html:?} from {input:?}");
        if tag.starts_with('/') {
            assert_eq!(stack.pop().as_deref(), Some(name.as_str()), "misnested {html:?} from {input:?}");
        } else if !matches!(name.as_str(), "br" | "hr") {
            stack.push(name);
        }
        rest = &after[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed {stack:?} in {html:?} from {input:?}");
}

fn random_markdown(random: &mut SeededRandom) -> String {
    const TOKENS: &[&str] = &[
        "word",
        " ",
        " ",
        "\n",
        "\n\n",
        "*",
        "**",
        "_",
        "__",
        "~~",
        "~",
        "`",
        "```",
        "```rust\n",
        "[",
        "]",
        "(",
        ")",
        "](https://x.test)",
        "<",
        ">",
        "&",
        "\"",
        "'",
        "# ",
        "## ",
        "- ",
        "1. ",
        "> ",
        "  ",
        "\\",
        "日本",
        "🦑",
        "<script>",
        "https://y.test",
        "<https://z.test>",
        "---",
        "\t",
        "|",
        "!",
    ];
    let length = random.next_u64() % 40;
    (0..length).map(|_| TOKENS[usize::try_from(random.next_u64() % TOKENS.len() as u64).unwrap()]).collect()
}

#[test]
fn random_markdown_renders_to_well_formed_html() {
    let mut random = SeededRandom::new(2024);
    let telegram_tags = ["b", "i", "s", "code", "pre", "a", "blockquote"];
    let matrix_tags = [
        "strong",
        "em",
        "del",
        "code",
        "pre",
        "a",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "ul",
        "ol",
        "li",
        "blockquote",
        "p",
        "br",
        "hr",
    ];
    for _ in 0..5000 {
        let input = random_markdown(&mut random);
        assert_well_formed_html(&render(&input, TelegramHtml), &telegram_tags, &input);
        assert_well_formed_html(&render(&input, MatrixHtml), &matrix_tags, &input);
        for flavor in [SlackMrkdwn, DiscordMarkdown, PlainText] {
            let rendered = render(&input, flavor);
            if flavor == SlackMrkdwn {
                // Slack control characters only appear as links or entities.
                assert!(!rendered.contains("<script"), "{rendered:?} from {input:?}");
            }
        }
    }
}

#[test]
fn plain_text_keeps_every_word() {
    let mut random = SeededRandom::new(77);
    for _ in 0..3000 {
        let input = random_markdown(&mut random);
        // A fence's info string (language) is not shown in plain text.
        if input.contains("```") || input.contains("~~~") {
            continue;
        }
        let rendered = render(&input, PlainText);
        let words =
            |text: &str| text.matches("word").count() + text.matches("日本").count() + text.matches("🦑").count();
        assert_eq!(words(&rendered), words(&input), "{rendered:?} from {input:?}");
    }
}

/// A table with alignment, markup, a link, a wide character and HTML's special characters.
const TABLE: &str = "Stock:\n\n| Fruit | Qty | Note |\n|:--|--:|:-:|\n| **Apple** | 3 | [site](https://a.test) |\n| Kiwi 🥝 | 12 | a<b & c |";

/// [`TABLE`] as aligned columns, before the platform's escaping.
const ALIGNED: &str = "Fruit   | Qty |         Note\n\
                       --------|-----|----------------------\n\
                       Apple   |   3 | site (https://a.test)\n\
                       Kiwi 🥝 |  12 |        a<b & c";

#[test]
fn telegram_tables_are_aligned_in_pre() {
    let escaped = ALIGNED.replace('&', "&amp;").replace('<', "&lt;");
    assert_eq!(render(TABLE, TelegramHtml), format!("Stock:\n\n<pre>{escaped}</pre>"));
    assert_eq!(
        render("> | a | b |\n> |---|---|\n> | 1 | 2 |", TelegramHtml),
        "<blockquote>a | b\n--|--\n1 | 2</blockquote>"
    );
    assert_eq!(
        render("- item\n\n  | a | b |\n  |---|---|\n  | 1 | 2 |", TelegramHtml),
        "• item\n<pre>a | b\n--|--\n1 | 2</pre>"
    );
}

#[test]
fn slack_tables_are_aligned_in_a_code_block() {
    let escaped = ALIGNED.replace('&', "&amp;").replace('<', "&lt;");
    assert_eq!(render(TABLE, SlackMrkdwn), format!("Stock:\n\n```\n{escaped}\n```"));
}

#[test]
fn discord_tables_are_aligned_in_a_code_block() {
    assert_eq!(render(TABLE, DiscordMarkdown), format!("Stock:\n\n```\n{ALIGNED}\n```"));
    assert_eq!(render("| a |\n|---|\n| ``` |", DiscordMarkdown), "```\na\n---\n`\u{200B}``\n```");
}

#[test]
fn matrix_tables_are_html_tables() {
    assert_eq!(
        render(TABLE, MatrixHtml),
        "<p>Stock:</p>\n<table>\n<thead>\n<tr><th>Fruit</th><th>Qty</th><th>Note</th></tr>\n</thead>\n<tbody>\n\
         <tr><td><strong>Apple</strong></td><td>3</td><td><a href=\"https://a.test\">site</a></td></tr>\n\
         <tr><td>Kiwi 🥝</td><td>12</td><td>a&lt;b &amp; c</td></tr>\n</tbody>\n</table>"
    );
    assert_eq!(render("| a |\n|---|", MatrixHtml), "<table>\n<thead>\n<tr><th>a</th></tr>\n</thead>\n</table>");
}

#[test]
fn plain_text_tables_are_aligned_columns() {
    assert_eq!(render(TABLE, PlainText), format!("Stock:\n\n{ALIGNED}"));
    assert_eq!(render("| a | b |\n|---|---|\n| 1 |", PlainText), "a | b\n--|--\n1");
}
