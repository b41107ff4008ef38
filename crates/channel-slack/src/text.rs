//! Slack's message markup read back as plain text: `<…>` tokens (links, user, channel
//! and special mentions) and the three HTML entities Slack escapes.

/// A Slack message's text as plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlainText {
    /// The text with Slack's markup resolved and the bot's own mentions removed.
    pub text: String,
    /// Whether the text mentioned the bot.
    pub mentions_bot: bool,
}

/// Reads Slack's `text` field: `<@BOT>` is removed (and noted), `<@U123>` becomes
/// `@U123`, `<#C1|general>` `#general`, `<!here>` `@here`, `<http://x|label>`
/// `label (http://x)` and `<http://x>` the bare URL; `&amp; &lt; &gt;` are unescaped.
pub(crate) fn plain_text(raw: &str, bot_user_id: &str) -> PlainText {
    let mut output = String::with_capacity(raw.len());
    let mut mentions_bot = false;
    let mut after_bot_mention = false;
    let mut rest = raw;
    loop {
        let (before, token, remainder) = match rest.split_once('<') {
            Some((before, after)) => match after.split_once('>') {
                Some((token, remainder)) => (before, Some(token), remainder),
                // A lone `<` can't come from Slack (it escapes them); keep it as text.
                None => (rest, None, ""),
            },
            None => (rest, None, ""),
        };
        push_text(&mut output, before, after_bot_mention);
        after_bot_mention = false;
        match token {
            Some(token) => match read_token(token, bot_user_id) {
                Token::BotMention => {
                    mentions_bot = true;
                    after_bot_mention = true;
                }
                Token::Text(text) => output.push_str(&text),
            },
            None => break,
        }
        rest = remainder;
    }
    PlainText { text: output.trim().to_owned(), mentions_bot }
}

/// Appends unescaped text; right after a removed bot mention, drops the space (and, when
/// the mention opened the message, the `:` or `,`) that went with it.
fn push_text(output: &mut String, text: &str, after_bot_mention: bool) {
    let mut text = text;
    if after_bot_mention {
        if output.trim().is_empty() {
            text = text.trim_start_matches([':', ',']);
        }
        if output.is_empty() || output.ends_with(char::is_whitespace) {
            text = text.trim_start();
        }
    }
    output.push_str(&unescape(text));
}

/// What one `<…>` token stands for.
enum Token {
    BotMention,
    Text(String),
}

fn read_token(token: &str, bot_user_id: &str) -> Token {
    let (target, label) = match token.split_once('|') {
        Some((target, label)) => (target, Some(label).filter(|label| !label.is_empty())),
        None => (token, None),
    };
    if let Some(user) = target.strip_prefix('@') {
        if user == bot_user_id {
            return Token::BotMention;
        }
        return Token::Text(format!("@{}", unescape(user)));
    }
    if let Some(channel) = target.strip_prefix('#') {
        return Token::Text(format!("#{}", unescape(label.unwrap_or(channel))));
    }
    if let Some(special) = target.strip_prefix('!') {
        // `<!here>`, `<!subteam^S1|@team>`, `<!date^1392734382^{date}|fallback>`.
        return Token::Text(match label {
            Some(label) => unescape(label),
            None => format!("@{}", unescape(special.split('^').next().unwrap_or(special))),
        });
    }
    let url = unescape(target);
    Token::Text(match label.map(unescape) {
        Some(label) if label != url && label != without_scheme(&url) => format!("{label} ({url})"),
        // Slack links what people type (`example.com`, an email address); the label is
        // then just the URL again.
        Some(label) => label,
        None => url,
    })
}

fn without_scheme(url: &str) -> &str {
    ["https://", "http://", "mailto:"].iter().find_map(|scheme| url.strip_prefix(scheme)).unwrap_or(url)
}

/// Undoes the only escaping Slack does in message text.
pub(crate) fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    // `&amp;` last, so `&amp;lt;` (a literal `&lt;`) stays `&lt;`.
    text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOT: &str = "U0BOT";

    fn read(raw: &str) -> (String, bool) {
        let plain = plain_text(raw, BOT);
        (plain.text, plain.mentions_bot)
    }

    #[test]
    fn the_bots_own_mention_is_removed_with_its_punctuation() {
        assert_eq!(read("<@U0BOT> what's up?"), ("what's up?".to_owned(), true));
        assert_eq!(read("<@U0BOT>: deploy it"), ("deploy it".to_owned(), true));
        assert_eq!(read("hey <@U0BOT> are you there"), ("hey are you there".to_owned(), true));
        assert_eq!(read("thanks <@U0BOT|squidbot>"), ("thanks".to_owned(), true));
        assert_eq!(read("no mention here"), ("no mention here".to_owned(), false));
    }

    #[test]
    fn other_mentions_channels_and_specials_become_readable() {
        assert_eq!(read("ask <@U123> in <#C9|general>").0, "ask @U123 in #general");
        assert_eq!(read("see <#C9>").0, "see #C9");
        assert_eq!(read("<!here> and <!channel>").0, "@here and @channel");
        assert_eq!(read("<!subteam^S1|@oncall> please").0, "@oncall please");
        assert_eq!(read("on <!date^1392734382^{date}|Feb 18, 2014>").0, "on Feb 18, 2014");
    }

    #[test]
    fn links_keep_their_url() {
        assert_eq!(
            read("read <https://example.com/a?b=1&amp;c=2|the docs>").0,
            "read the docs (https://example.com/a?b=1&c=2)"
        );
        assert_eq!(read("go to <https://example.com>").0, "go to https://example.com");
        assert_eq!(read("typed <http://example.com|example.com>").0, "typed example.com");
        assert_eq!(read("mail <mailto:a@b.org|a@b.org>").0, "mail a@b.org");
    }

    #[test]
    fn entities_are_unescaped_exactly_once() {
        assert_eq!(read("1 &lt; 2 &amp;&amp; 3 &gt; 2").0, "1 < 2 && 3 > 2");
        assert_eq!(read("literal &amp;lt; stays").0, "literal &lt; stays");
        assert_eq!(read("a <b").0, "a <b");
    }
}
