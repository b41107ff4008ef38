//! Telegram HTML to plain text, for resending a message whose markup Telegram refused:
//! tags dropped (a link keeps its address in parentheses), entities decoded.

/// The plain text of Telegram-flavoured HTML.
pub(crate) fn html_to_plain(html: &str) -> String {
    let mut plain = String::with_capacity(html.len());
    // Open links: (address, where the link text starts in `plain`).
    let mut links: Vec<(Option<String>, usize)> = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(['<', '&']) {
        plain.push_str(rest.get(..start).unwrap_or(""));
        let tail = rest.get(start..).unwrap_or("");
        if tail.starts_with('<') {
            let Some(end) = tail.find('>') else {
                // A lone '<' is text.
                plain.push_str(tail);
                rest = "";
                break;
            };
            let tag = tail.get(1..end).unwrap_or("").trim();
            if tag.eq_ignore_ascii_case("/a") {
                if let Some((Some(address), text_start)) = links.pop() {
                    let text = plain.get(text_start..).unwrap_or("");
                    if text.trim() != address {
                        plain.push_str(&format!(" ({address})"));
                    }
                }
            } else if tag.len() > 2 && tag.get(..2).is_some_and(|name| name.eq_ignore_ascii_case("a ")) {
                links.push((href(tag).map(|address| decode_entities(&address)), plain.len()));
            }
            rest = tail.get(end + 1..).unwrap_or("");
        } else {
            let end = tail.find(';').filter(|end| *end <= 10);
            match end.and_then(|end| squidbot_channels::html_entity(tail.get(1..end).unwrap_or(""))) {
                Some(character) => {
                    plain.push(character);
                    rest = tail.get(end.map_or(1, |end| end + 1)..).unwrap_or("");
                }
                None => {
                    plain.push('&');
                    rest = tail.get(1..).unwrap_or("");
                }
            }
        }
    }
    plain.push_str(rest);
    plain
}

/// The `href` attribute of an `a` tag.
fn href(tag: &str) -> Option<String> {
    let after = tag.get(tag.find("href=")? + 5..)?;
    let quote = after.chars().next().filter(|character| *character == '"' || *character == '\'')?;
    let value = after.get(1..)?;
    Some(value.get(..value.find(quote)?)?.to_owned())
}

fn decode_entities(text: &str) -> String {
    html_to_plain(text)
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
