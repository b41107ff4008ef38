//! The event contents the bot sends: messages (HTML with a plain-text `body`), replies
//! and thread replies, replacements for edits, files, reactions and the encryption
//! notice. Pure functions.

use serde_json::{Value, json};
use squidbot_core::html::{Layout, QuoteMarks};

/// The reaction key that acknowledges a message.
pub(crate) const ACKNOWLEDGE_KEY: &str = "👀";

/// Where a message goes relative to others: the reply and thread it belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Placement<'a> {
    /// The event it replies to.
    pub reply_to: Option<&'a str>,
    /// The root of the thread it goes into.
    pub thread_root: Option<&'a str>,
}

/// An `m.text` message of already rendered Matrix HTML.
pub(crate) fn text_message(html: &str, placement: Placement<'_>) -> Value {
    let mut content = html_content(html);
    insert_relation(&mut content, placement);
    content
}

/// The replacement of message `event_id` with `html`.
pub(crate) fn edit(event_id: &str, html: &str) -> Value {
    let new_content = html_content(html);
    let plain = html_to_plain(html);
    // The fallback for clients without edits is plain only: an edit then carries the
    // text three times, not four.
    json!({
        "msgtype": "m.text",
        "body": format!("* {plain}"),
        "m.new_content": new_content,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
        "m.mentions": {},
    })
}

/// A file message (`m.image`, `m.video`, `m.audio` or `m.file` by media type) of an
/// uploaded file.
pub(crate) fn file_message(name: &str, mime: &str, size: usize, mxc: &str, placement: Placement<'_>) -> Value {
    let msgtype = match mime.split('/').next() {
        Some("image") => "m.image",
        Some("video") => "m.video",
        Some("audio") => "m.audio",
        Some(_) | None => "m.file",
    };
    let mut content = json!({
        "msgtype": msgtype,
        "body": name,
        "filename": name,
        "url": mxc,
        "info": {"mimetype": mime, "size": size},
        "m.mentions": {},
    });
    insert_relation(&mut content, placement);
    content
}

/// An `m.reaction` annotating `event_id` with `key`.
pub(crate) fn reaction(event_id: &str, key: &str) -> Value {
    json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}})
}

/// The plain notice sent once to an encrypted room.
pub(crate) fn encryption_notice() -> Value {
    json!({
        "msgtype": "m.notice",
        "body": "I can't read end-to-end encrypted messages, so I won't answer in this room. \
                 Talk to me in a room without encryption.",
        "m.mentions": {},
    })
}

/// The most content bytes sent in one event: the homeserver refuses events over
/// 65,536 bytes, and the envelope (ids, signatures, hashes) needs some of them.
const MAX_CONTENT_BYTES: usize = 60_000;

/// Drops the HTML of content too large for an event, keeping the plain text: a reply
/// without formatting beats a refused one (multi-byte text can exceed the limit below
/// [`crate::MAX_MESSAGE_CHARS`]).
pub(crate) fn fit_event_size(content: &mut Value) {
    if serde_json::to_vec(content).map_or(0, |bytes| bytes.len()) <= MAX_CONTENT_BYTES {
        return;
    }
    strip_html(content);
    if let Some(new_content) = content.get_mut("m.new_content") {
        strip_html(new_content);
    }
}

fn strip_html(content: &mut Value) {
    if let Some(object) = content.as_object_mut() {
        object.remove("format");
        object.remove("formatted_body");
    }
}

fn html_content(html: &str) -> Value {
    json!({
        "msgtype": "m.text",
        "body": html_to_plain(html),
        "format": "org.matrix.custom.html",
        "formatted_body": html,
        // Nobody is pinged by the bot's replies.
        "m.mentions": {},
    })
}

fn insert_relation(content: &mut Value, placement: Placement<'_>) {
    let relation = match (placement.thread_root, placement.reply_to) {
        (Some(root), reply_to) => json!({
            "rel_type": "m.thread",
            "event_id": root,
            "is_falling_back": true,
            "m.in_reply_to": {"event_id": reply_to.unwrap_or(root)},
        }),
        (None, Some(reply_to)) => json!({"m.in_reply_to": {"event_id": reply_to}}),
        (None, None) => return,
    };
    if let Some(object) = content.as_object_mut() {
        object.insert("m.relates_to".to_owned(), relation);
    }
}

/// The plain-text fallback of Matrix HTML: tags removed (blocks and `<br>` become line
/// breaks, list items start with `- ` or their number, links show their address),
/// entities decoded. Quotes get no `> `: clients read leading `> ` lines of a reply's
/// body as the quoted message and hide them.
pub(crate) fn html_to_plain(html: &str) -> String {
    squidbot_core::html::to_plain(html, Layout::Blocks { quotes: QuoteMarks::Dropped })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_plain_text() {
        assert_eq!(html_to_plain("<strong>bold</strong> &amp; <em>it</em>"), "bold & it");
        assert_eq!(html_to_plain("<p>one</p><p>two<br>three</p>"), "one\n\ntwo\nthree");
        assert_eq!(
            html_to_plain("<h1>T</h1>\n<p>para<br>line 2</p>\n<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n<hr>"),
            "T\n\npara\nline 2\n\n- a\n- b"
        );
        assert_eq!(html_to_plain("<ul><li>a</li><li>b</li></ul>"), "- a\n- b");
        assert_eq!(html_to_plain("<pre><code class=\"language-rust\">a &lt; b</code></pre>"), "a < b");
        assert_eq!(html_to_plain("5 &gt; 3 &#39;x&#x27; &bogus; &"), "5 > 3 'x' &bogus; &");
        assert_eq!(html_to_plain("a <b"), "a <b");
        assert_eq!(html_to_plain("<p>a</p>\n\n\n<p>b</p>"), "a\n\nb");
    }

    #[test]
    fn messages_carry_html_plain_body_and_no_mentions() {
        let content = text_message("<strong>hi</strong>", Placement::default());
        assert_eq!(
            content,
            json!({"msgtype": "m.text", "body": "hi", "format": "org.matrix.custom.html",
                   "formatted_body": "<strong>hi</strong>", "m.mentions": {}})
        );
    }

    #[test]
    fn replies_and_thread_replies_relate_to_their_events() {
        let reply = text_message("ok", Placement { reply_to: Some("$asked"), thread_root: None });
        assert_eq!(reply["m.relates_to"], json!({"m.in_reply_to": {"event_id": "$asked"}}));
        let in_thread = text_message("ok", Placement { reply_to: Some("$asked"), thread_root: Some("$root") });
        assert_eq!(
            in_thread["m.relates_to"],
            json!({"rel_type": "m.thread", "event_id": "$root", "is_falling_back": true,
                   "m.in_reply_to": {"event_id": "$asked"}})
        );
        let thread_only = text_message("ok", Placement { reply_to: None, thread_root: Some("$root") });
        assert_eq!(thread_only["m.relates_to"]["m.in_reply_to"]["event_id"], "$root");
    }

    #[test]
    fn edits_replace_with_new_content() {
        let content = edit("$sent", "<em>better</em>");
        assert_eq!(content["body"], "* better");
        assert_eq!(content.get("formatted_body"), None);
        assert_eq!(content["m.new_content"]["body"], "better");
        assert_eq!(content["m.new_content"]["formatted_body"], "<em>better</em>");
        assert_eq!(content["m.relates_to"], json!({"rel_type": "m.replace", "event_id": "$sent"}));
    }

    #[test]
    fn oversized_content_loses_its_html_not_its_text() {
        let small = text_message("<em>hi</em>", Placement::default());
        let mut unchanged = small.clone();
        fit_event_size(&mut unchanged);
        assert_eq!(unchanged, small);

        let long = format!("<em>{}</em>", "語".repeat(crate::MAX_MESSAGE_CHARS));
        let mut edited = edit("$sent", &long);
        fit_event_size(&mut edited);
        assert_eq!(edited.get("formatted_body"), None);
        assert_eq!(edited["m.new_content"].get("formatted_body"), None);
        assert_eq!(edited["m.new_content"]["body"], "語".repeat(crate::MAX_MESSAGE_CHARS));
        assert!(serde_json::to_vec(&edited).unwrap().len() <= MAX_CONTENT_BYTES);
    }

    #[test]
    fn files_are_typed_by_media_type() {
        let image = file_message("cat.png", "image/png", 10, "mxc://localhost/a", Placement::default());
        assert_eq!(image["msgtype"], "m.image");
        assert_eq!(image["info"], json!({"mimetype": "image/png", "size": 10}));
        assert_eq!(file_message("a.pdf", "application/pdf", 1, "mxc://l/b", Placement::default())["msgtype"], "m.file");
        assert_eq!(file_message("a.ogg", "audio/ogg", 1, "mxc://l/b", Placement::default())["msgtype"], "m.audio");
        assert_eq!(reaction("$e", ACKNOWLEDGE_KEY)["m.relates_to"]["key"], "👀");
    }
}
