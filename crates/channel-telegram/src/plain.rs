//! Telegram HTML to plain text, for resending a message whose markup Telegram refused:
//! tags dropped (a link keeps its address in parentheses), entities decoded, through
//! core's one HTML reader.

use squidbot_core::html::{self, Layout};

/// The plain text of Telegram-flavoured HTML, whose line breaks are its own text's.
pub(crate) fn html_to_plain(html: &str) -> String {
    html::to_plain(html, Layout::AsWritten)
}

#[cfg(test)]
mod tests {
    use super::html_to_plain;

    #[test]
    fn tags_go_and_entities_are_decoded() {
        assert_eq!(html_to_plain("<b>bold</b> <i>it</i> <code>a &lt; b &amp;&amp; c</code>"), "bold it a < b && c");
        assert_eq!(html_to_plain("<pre><code class=\"language-sh\">x &gt; y</code></pre>"), "x > y");
        assert_eq!(html_to_plain("&#39;q&#x27; &quot;"), "'q' \"");
    }

    #[test]
    fn links_keep_their_address() {
        assert_eq!(
            html_to_plain("see <a href=\"https://x.test/?a=1&amp;b=2\">the docs</a>."),
            "see the docs (https://x.test/?a=1&b=2)."
        );
        assert_eq!(html_to_plain("<a href=\"https://x.test\">https://x.test</a>"), "https://x.test");
    }

    #[test]
    fn stray_markup_characters_stay_text() {
        assert_eq!(html_to_plain("a & b < c"), "a & b < c");
        assert_eq!(html_to_plain("1 &unknown; 2"), "1 &unknown; 2");
    }
}
