//! Tests of the mail body text transformations.

use super::*;

#[test]
fn html_tags_go_and_blocks_become_lines() {
    let html = "<html><head><title>T</title><style>p { color: red }</style></head><body>\
                <h1>Hello</h1><p>First   paragraph\nwith <b>bold</b> text.</p>\
                <div>A line</div><div>Another<br>broken line</div>\
                <ul><li>one</li><li>two</li></ul><script>alert('x')</script><!-- hidden --></body></html>";
    assert_eq!(
        html_to_text(html),
        "Hello\n\nFirst paragraph with bold text.\n\nA line\nAnother\nbroken line\n\n- one\n- two"
    );
}

#[test]
fn entities_are_decoded_once_and_never_become_markup() {
    assert_eq!(
        html_to_text("<p>a &lt;b&gt; &amp;amp; &quot;q&quot; &#233;&#xE9; &nbsp;x &unknown; & y</p>"),
        "a <b> &amp; \"q\" éé x &unknown; & y"
    );
    assert_eq!(decode_entities("&#0;&#xD800;&#1;"), "&#0;&#xD800;&#1;");
}

#[test]
fn links_show_their_target_when_it_is_not_the_text() {
    let html = "<a href=\"https://example.org/a?b=1&amp;c=2\">the docs</a>, \
                <a href='https://example.org'>https://example.org</a>, \
                <a href=\"javascript:alert(1)\">click</a>, <a href=\"mailto:x@example.org\">x@example.org</a>";
    assert_eq!(
        html_to_text(html),
        "the docs (https://example.org/a?b=1&c=2), https://example.org, click, x@example.org"
    );
}

#[test]
fn attribute_values_may_hold_angle_brackets() {
    assert_eq!(html_to_text("<p title=\"a > b\">text</p><img alt='<x>'>after"), "text\n\nafter");
}

#[test]
fn broken_html_still_gives_text() {
    assert_eq!(html_to_text("a < b and c<d <p unterminated"), "a < b and c<d <p unterminated");
    assert_eq!(html_to_text("<script>never closed"), "");
    assert_eq!(html_to_text("x <!-- never closed"), "x");
}

#[test]
fn blockquotes_become_quoted_lines_and_are_dropped_as_history() {
    let html = "<div>Sounds good!</div><div class=\"gmail_quote\"><div>On Mon, 1 Jan 2024 at 10:00, \
                Ann &lt;ann@example.org&gt; wrote:</div><blockquote><p>Shall we meet?</p><p>Ann</p></blockquote></div>";
    let text = html_to_text(html);
    assert!(text.contains("> Shall we meet?\n"), "{text}");
    assert_eq!(strip_quoted_reply(&text), "Sounds good!");
}

#[test]
fn preformatted_text_keeps_its_lines() {
    assert_eq!(html_to_text("<pre>a  b\n  c</pre>"), "a  b\n  c");
}

#[test]
fn quoted_history_below_an_attribution_is_dropped() {
    let text = "Yes, Tuesday works.\n\nOn Mon, Jan 1, 2024 at 10:00 AM Ann <ann@example.org> wrote:\n> Does Tuesday work?\n>\n> Ann\n";
    assert_eq!(strip_quoted_reply(text), "Yes, Tuesday works.");
}

#[test]
fn an_attribution_wrapped_over_two_lines_is_dropped() {
    let text = "Fine.\n\nOn Mon, Jan 1, 2024 at 10:00 AM Ann Example <ann@example.org>\nwrote:\n\n> earlier\n";
    assert_eq!(strip_quoted_reply(text), "Fine.");
}

#[test]
fn trailing_quotes_without_attribution_are_dropped() {
    assert_eq!(strip_quoted_reply("ok\n> old\n> older\n\n"), "ok");
}

#[test]
fn inline_answers_keep_their_quotes() {
    let text = "> Question one?\nAnswer one.\n> Question two?\nAnswer two.";
    assert_eq!(strip_quoted_reply(text), text);
}

#[test]
fn a_message_that_is_only_a_quote_is_kept() {
    assert_eq!(strip_quoted_reply("> forwarded thought\n"), "> forwarded thought");
    assert_eq!(strip_quoted_reply(""), "");
}

#[test]
fn a_line_that_merely_mentions_writing_stays() {
    assert_eq!(strip_quoted_reply("I think she wrote:\nnothing"), "I think she wrote:\nnothing");
}

#[test]
fn replies_get_escaped_html_paragraphs() {
    assert_eq!(
        text_to_html("Hi <Ann> & co,\nline two\n\nBye"),
        "<!DOCTYPE html>\n<html><body>\n<p>Hi &lt;Ann&gt; &amp; co,<br>\nline two</p>\n<p>Bye</p>\n</body></html>\n"
    );
}

#[test]
fn sizes_read_like_a_person_would_say_them() {
    assert_eq!(format_size(512), "512 bytes");
    assert_eq!(format_size(2048), "2 KB");
    assert_eq!(format_size(20 * 1024 * 1024), "20 MB");
    assert_eq!(format_size(20 * 1024 * 1024 + 1), "20.1 MB");
    assert_eq!(format_size(25 * 1024 * 1024 + 300 * 1024), "25.3 MB");
}
