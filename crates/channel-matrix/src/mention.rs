//! Whether a message's text mentions the bot, and the text with that mention removed.
//!
//! Clients mention with a "pill": `m.mentions.user_ids` holds the bot and the body
//! holds its display name (`Squidbot: hello`) or user id. Older clients and people
//! typing by hand write the user id, `@localpart` or the bare name. Matching is
//! ASCII-case-insensitive at word boundaries. The user id and `@localpart` are removed
//! wherever they are; the display name and bare localpart only at the start of the
//! text (how pills are written), since inside a sentence they are part of it ("ask
//! squidbot later").

/// How the bot is named in message bodies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BotNames {
    /// Its full user id, `@squidbot:example.org`.
    pub user_id: String,
    /// Its localpart, `squidbot`.
    pub localpart: String,
    /// Its display name, when it has one.
    pub display_name: Option<String>,
}

impl BotNames {
    /// The forms removed anywhere in the text.
    fn anywhere(&self) -> Vec<String> {
        vec![self.user_id.clone(), format!("@{}", self.localpart)]
    }

    /// The forms removed only at the start of the text.
    fn leading(&self) -> Vec<String> {
        let mut names: Vec<String> = self.display_name.iter().filter(|name| !name.trim().is_empty()).cloned().collect();
        names.push(self.localpart.clone());
        names
    }

    /// Whether `text` names the bot in any form.
    pub(crate) fn mentioned_in(&self, text: &str) -> bool {
        self.anywhere().iter().chain(self.leading().iter()).any(|name| find_word(text, name, 0).is_some())
    }

    /// `text` without the bot's mentions, with the `:` or `,` after a leading one and
    /// the space around removed ones tidied.
    pub(crate) fn strip_from(&self, text: &str) -> String {
        let mut text = text.trim().to_owned();
        for name in self.anywhere() {
            while let Some(start) = find_word(&text, &name, 0) {
                text = remove(&text, start, start + name.len());
            }
        }
        // Longest first, so a display name that starts with the localpart goes whole.
        let mut leading = self.leading();
        leading.sort_by_key(|name| std::cmp::Reverse(name.len()));
        for name in leading {
            if find_word(&text, &name, 0) == Some(0) {
                text = remove(&text, 0, name.len());
            }
        }
        text
    }
}

/// The byte offset of the first occurrence of `name` in `text` from `from`, compared
/// ASCII-case-insensitively, that stands as a word of its own.
fn find_word(text: &str, name: &str, from: usize) -> Option<usize> {
    let haystack = text.as_bytes();
    let needle = name.as_bytes();
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    (from..=haystack.len() - needle.len()).find(|&start| {
        let end = start + needle.len();
        // Byte comparison of valid UTF-8 that differs only in ASCII case: a match starts
        // and ends on character boundaries.
        haystack.get(start..end).is_some_and(|window| window.eq_ignore_ascii_case(needle))
            && text.is_char_boundary(start)
            && text.is_char_boundary(end)
            && boundary_before(text, start)
            && boundary_after(text, end)
    })
}

fn boundary_before(text: &str, start: usize) -> bool {
    text.get(..start)
        .and_then(|before| before.chars().next_back())
        .is_none_or(|character| !is_name_character(character))
}

fn boundary_after(text: &str, end: usize) -> bool {
    let mut rest = text.get(end..).unwrap_or_default().chars();
    match rest.next() {
        None => true,
        // A sentence's full stop ends the name; a dot before more name characters
        // continues a server name (`@bot:example.org`).
        Some('.' | ':') => rest.next().is_none_or(|after| !is_name_character(after)),
        Some(character) => !is_name_character(character),
    }
}

fn is_name_character(character: char) -> bool {
    character.is_alphanumeric() || "_-=/@".contains(character)
}

/// `text` without `start..end`, and without a `:` or `,` right after it; the spaces
/// on both sides become one (none at the start or end).
fn remove(text: &str, start: usize, end: usize) -> String {
    let before = text.get(..start).unwrap_or_default().trim_end_matches([' ', '\t']);
    let after = text.get(end..).unwrap_or_default();
    let after = after.strip_prefix([':', ',']).unwrap_or(after).trim_start_matches([' ', '\t']);
    let joined = if before.is_empty() || after.is_empty() || before.ends_with('\n') || after.starts_with('\n') {
        format!("{before}{after}")
    } else {
        format!("{before} {after}")
    };
    joined.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> BotNames {
        BotNames {
            user_id: "@squidbot:localhost".to_owned(),
            localpart: "squidbot".to_owned(),
            display_name: Some("Squid Bot".to_owned()),
        }
    }

    #[test]
    fn every_form_of_the_name_is_a_mention() {
        let names = names();
        for text in [
            "@squidbot:localhost what time is it?",
            "hey @SquidBot:localhost.",
            "Squid Bot: hi",
            "ask squidbot later",
            "@squidbot, hi",
            "thanks squidbot.",
        ] {
            assert!(names.mentioned_in(text), "{text}");
        }
        for text in ["squidbots are great", "@squidbot:localhost.org hi", "mysquidbot", "nothing here"] {
            assert!(!names.mentioned_in(text), "{text}");
        }
    }

    #[test]
    fn mentions_are_stripped() {
        let names = names();
        assert_eq!(names.strip_from("@squidbot:localhost what time is it?"), "what time is it?");
        assert_eq!(names.strip_from("Squid Bot: hi there"), "hi there");
        assert_eq!(names.strip_from("squidbot, hi"), "hi");
        assert_eq!(names.strip_from("hey @squidbot:localhost how are you"), "hey how are you");
        assert_eq!(names.strip_from("hey @squidbot"), "hey");
        assert_eq!(names.strip_from("line one\n@squidbot:localhost: line two"), "line one\nline two");
        // Inside a sentence the bare name is part of it.
        assert_eq!(names.strip_from("ask squidbot later"), "ask squidbot later");
        assert_eq!(names.strip_from("no mention"), "no mention");
    }

    #[test]
    fn non_ascii_text_around_a_mention_is_kept_whole() {
        let names = names();
        assert_eq!(names.strip_from("héllo @squidbot:localhost ünïcödé"), "héllo ünïcödé");
        assert!(!names.mentioned_in("ßquidbot"));
        assert!(!names.mentioned_in("é"));
    }
}
