//! A forgiving HTML tokenizer: start tags with attributes, end tags and text, with
//! comments, CDATA sections, doctypes and processing instructions dropped and the
//! content of raw-text elements (`script`, `style`, `title` …) kept whole. It never
//! fails: broken markup becomes text or is skipped, which is what readers of arbitrary
//! pages and mail need.

use crate::html::entities;

/// Elements whose content is text up to the matching end tag, never markup.
const RAW_TEXT: [&str; 9] =
    ["script", "style", "title", "textarea", "xmp", "iframe", "noembed", "noframes", "noscript"];

/// One piece of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token<'a> {
    /// `<name attributes…>`.
    Start(Tag),
    /// `</name>`, the name lowercased.
    End(String),
    /// Text as written (character references not yet decoded).
    Text(&'a str),
}

/// A start tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    /// Lowercased element name.
    pub name: String,
    /// Attributes in order, names lowercased, values decoded (as browsers do).
    pub attributes: Vec<(String, String)>,
    /// Written as `<name … />`.
    pub self_closing: bool,
}

impl Tag {
    /// The value of attribute `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// True when the `class` attribute lists `class`.
    pub fn has_class(&self, class: &str) -> bool {
        self.attribute("class").is_some_and(|classes| classes.split_ascii_whitespace().any(|name| name == class))
    }
}

/// Iterates over the tokens of a document.
#[derive(Debug)]
pub struct Tokenizer<'a> {
    input: &'a str,
    position: usize,
    /// Inside a raw-text element: its name; the next token is its text.
    raw_text_of: Option<String>,
    /// Where the input's last `>` is: a tag starting after it can't be closed, so its
    /// `<` is text, known without scanning to the end for every such `<`.
    last_close: Option<usize>,
}

impl<'a> Tokenizer<'a> {
    /// Tokens of `input`.
    pub fn new(input: &'a str) -> Self {
        Self { input, position: 0, raw_text_of: None, last_close: input.rfind('>') }
    }

    /// Whether a `>` follows `position` somewhere.
    fn closes_after(&self, position: usize) -> bool {
        self.last_close.is_some_and(|close| close > position)
    }

    fn bytes(&self) -> &'a [u8] {
        self.input.as_bytes()
    }

    /// Position of the first byte at or after `from` for which `stop` holds, else the end.
    fn position_of(&self, from: usize, stop: impl Fn(u8) -> bool) -> usize {
        self.bytes()[from..].iter().position(|byte| stop(*byte)).map_or(self.input.len(), |offset| from + offset)
    }

    /// Position just past the next `>` at or after `from`, else the end.
    fn past_next_close(&self, from: usize) -> usize {
        let close = self.position_of(from, |byte| byte == b'>');
        (close + 1).min(self.input.len())
    }

    /// Start of `</name` (ASCII case-insensitive, followed by a delimiter) at or after
    /// `from`, else the end.
    fn find_end_tag(&self, from: usize, name: &str) -> usize {
        let bytes = self.bytes();
        let mut cursor = from;
        while let Some(offset) = bytes[cursor..].iter().position(|byte| *byte == b'<') {
            let start = cursor + offset;
            let name_start = start + 2;
            let name_end = name_start + name.len();
            if bytes.get(start + 1) == Some(&b'/')
                && bytes
                    .get(name_start..name_end)
                    .is_some_and(|candidate| candidate.eq_ignore_ascii_case(name.as_bytes()))
                && bytes.get(name_end).is_none_or(|byte| byte.is_ascii_whitespace() || matches!(byte, b'/' | b'>'))
            {
                return start;
            }
            cursor = start + 1;
        }
        self.input.len()
    }

    /// Parses the start tag whose `<` is at `self.position`; `None` (and the position
    /// unchanged) when the input ends before its `>`.
    fn start_tag(&mut self) -> Option<Tag> {
        let bytes = self.bytes();
        let name_start = self.position + 1;
        let name_end = self.position_of(name_start, |byte| byte.is_ascii_whitespace() || matches!(byte, b'/' | b'>'));
        let name = self.input[name_start..name_end].to_ascii_lowercase();
        let mut attributes = Vec::new();
        let mut self_closing = false;
        let mut cursor = name_end;
        loop {
            cursor = self.position_of(cursor, |byte| !byte.is_ascii_whitespace());
            match bytes.get(cursor) {
                None => return None,
                Some(b'>') => {
                    cursor += 1;
                    break;
                }
                Some(b'/') => {
                    self_closing = bytes.get(cursor + 1) == Some(&b'>');
                    cursor += 1;
                    continue;
                }
                Some(_) => {}
            }
            self_closing = false;
            let key_end =
                self.position_of(cursor + 1, |byte| byte.is_ascii_whitespace() || matches!(byte, b'=' | b'>' | b'/'));
            let key = self.input[cursor..key_end].to_ascii_lowercase();
            cursor = self.position_of(key_end, |byte| !byte.is_ascii_whitespace());
            let mut value = String::new();
            if bytes.get(cursor) == Some(&b'=') {
                cursor = self.position_of(cursor + 1, |byte| !byte.is_ascii_whitespace());
                match bytes.get(cursor) {
                    Some(quote @ (b'"' | b'\'')) => {
                        let quote = *quote;
                        let value_end = self.position_of(cursor + 1, |byte| byte == quote);
                        value = entities::decode(&self.input[cursor + 1..value_end]);
                        cursor = (value_end + 1).min(self.input.len());
                    }
                    Some(_) => {
                        let value_end = self.position_of(cursor, |byte| byte.is_ascii_whitespace() || byte == b'>');
                        value = entities::decode(&self.input[cursor..value_end]);
                        cursor = value_end;
                    }
                    None => {}
                }
            }
            attributes.push((key, value));
        }
        self.position = cursor;
        Some(Tag { name, attributes, self_closing })
    }

    /// The lone `<` at `start` as text.
    fn lone_angle_bracket(&mut self, start: usize) -> Token<'a> {
        self.position = start + 1;
        Token::Text(&self.input[start..start + 1])
    }
}

impl<'a> Iterator for Tokenizer<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        loop {
            if self.position >= self.input.len() {
                return None;
            }
            if let Some(name) = self.raw_text_of.take() {
                let end = self.find_end_tag(self.position, &name);
                let text = &self.input[self.position..end];
                self.position = end;
                if !text.is_empty() {
                    return Some(Token::Text(text));
                }
                continue;
            }
            let bytes = self.bytes();
            let start = self.position;
            if bytes[start] != b'<' {
                let end = self.position_of(start, |byte| byte == b'<');
                self.position = end;
                return Some(Token::Text(&self.input[start..end]));
            }
            match bytes.get(start + 1) {
                Some(b'!') if bytes[start..].starts_with(b"<!--") => {
                    self.position = match self.input[start + 4..].find("-->") {
                        Some(offset) => start + 4 + offset + 3,
                        None => self.input.len(),
                    };
                }
                // In HTML a CDATA section is a comment; it ends at `]]>`, not the first `>`.
                Some(b'!') if bytes[start..].starts_with(b"<![CDATA[") => {
                    self.position = match self.input[start + 9..].find("]]>") {
                        Some(offset) => start + 9 + offset + 3,
                        None => self.input.len(),
                    };
                }
                Some(b'!' | b'?') => self.position = self.past_next_close(start),
                Some(b'/') if bytes.get(start + 2).is_some_and(u8::is_ascii_alphabetic) => {
                    if !self.closes_after(start) {
                        return Some(self.lone_angle_bracket(start));
                    }
                    let name_end =
                        self.position_of(start + 2, |byte| byte.is_ascii_whitespace() || matches!(byte, b'/' | b'>'));
                    let name = self.input[start + 2..name_end].to_ascii_lowercase();
                    self.position = self.past_next_close(name_end);
                    return Some(Token::End(name));
                }
                Some(b'/') => self.position = self.past_next_close(start),
                Some(byte) if byte.is_ascii_alphabetic() => {
                    // A tag the input ends inside is text, as a reader would see it.
                    let tag = if self.closes_after(start) { self.start_tag() } else { None };
                    let Some(tag) = tag else {
                        return Some(self.lone_angle_bracket(start));
                    };
                    if RAW_TEXT.contains(&tag.name.as_str()) {
                        self.raw_text_of = Some(tag.name.clone());
                    }
                    return Some(Token::Start(tag));
                }
                _ => return Some(self.lone_angle_bracket(start)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: &str) -> Vec<Token<'_>> {
        Tokenizer::new(input).collect()
    }

    fn start(name: &str, attributes: &[(&str, &str)], self_closing: bool) -> Token<'static> {
        Token::Start(Tag {
            name: name.to_owned(),
            attributes: attributes.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect(),
            self_closing,
        })
    }

    #[test]
    fn tags_attributes_and_text() {
        assert_eq!(
            tokens(r#"<!DOCTYPE html><P Class="a b" data-x='1 &amp; 2' hidden href=/x?a=1&amp;b=2>Hi <br/>there</p>"#),
            vec![
                start("p", &[("class", "a b"), ("data-x", "1 & 2"), ("hidden", ""), ("href", "/x?a=1&b=2")], false),
                Token::Text("Hi "),
                start("br", &[], true),
                Token::Text("there"),
                Token::End("p".to_owned()),
            ]
        );
    }

    #[test]
    fn comments_and_processing_instructions_vanish() {
        assert_eq!(
            tokens("a<!-- <b>hidden</b> -->b<?xml version='1.0'?>c<![CDATA[x]]>d"),
            vec![Token::Text("a"), Token::Text("b"), Token::Text("c"), Token::Text("d")]
        );
    }

    #[test]
    fn raw_text_elements_keep_markup_as_text() {
        assert_eq!(
            tokens("<script>if (a < b && c > d) { x = '</div>'; }</SCRIPT >after"),
            vec![
                start("script", &[], false),
                Token::Text("if (a < b && c > d) { x = '</div>'; }"),
                Token::End("script".to_owned()),
                Token::Text("after"),
            ]
        );
        assert_eq!(
            tokens("<style>p{}</stylesheet></style>"),
            vec![start("style", &[], false), Token::Text("p{}</stylesheet>"), Token::End("style".to_owned())]
        );
    }

    #[test]
    fn cdata_sections_end_at_their_own_close() {
        assert_eq!(tokens("a<![CDATA[x > y]]>b"), vec![Token::Text("a"), Token::Text("b")]);
        assert_eq!(tokens("a<![CDATA[never closed"), vec![Token::Text("a")]);
    }

    #[test]
    fn tags_the_input_ends_inside_are_text() {
        assert_eq!(
            tokens("c<d <p x"),
            vec![Token::Text("c"), Token::Text("<"), Token::Text("d "), Token::Text("<"), Token::Text("p x")]
        );
        assert_eq!(tokens("a</b"), vec![Token::Text("a"), Token::Text("<"), Token::Text("/b")]);
        assert_eq!(tokens(r#"<p title="a > b">t"#), vec![start("p", &[("title", "a > b")], false), Token::Text("t")]);
        assert_eq!(tokens(r#"<p title="x>t"#), vec![Token::Text("<"), Token::Text(r#"p title="x>t"#)]);
    }

    #[test]
    fn broken_markup_never_panics_and_keeps_text() {
        for input in
            ["<", "<a", "<a href=\"unterminated", "</", "</>", "<!--", "a < b", "<3", "<a =x>", "<é>", "<p\u{e9}>"]
        {
            let _ = tokens(input);
        }
        assert_eq!(tokens("a < b"), vec![Token::Text("a "), Token::Text("<"), Token::Text(" b")]);
        assert_eq!(tokens("<script>never closed"), vec![start("script", &[], false), Token::Text("never closed")]);
    }

    #[test]
    fn class_lists_are_matched_by_word() {
        let Some(Token::Start(tag)) = Tokenizer::new(r#"<a class="result__a big">"#).next() else {
            panic!("expected a start tag");
        };
        assert!(tag.has_class("result__a"));
        assert!(!tag.has_class("result"));
    }
}
