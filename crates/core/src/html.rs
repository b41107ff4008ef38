//! The one HTML reader: a forgiving tokenizer, the character reference table, and the
//! renderers its readers need: Markdown for web pages read by the model, plain text for
//! mail, Matrix's `body` fallback and Telegram's resend without markup.
//!
//! Hand-written rather than a crate: the HTML-to-text crates sit on a full HTML5 parser
//! whose generated tables and build-time code generation cost more compile time on two
//! cores than all of this, and reading pages and mail for a model needs none of its tree
//! fidelity. Pure code, no IO.

pub mod entities;
pub mod markdown;
pub mod plain;
pub mod tokenizer;

#[cfg(test)]
mod tests;

pub use markdown::{Document, to_markdown};
pub use plain::{Layout, QuoteMarks, to_plain};
pub use tokenizer::{Tag, Token, Tokenizer};

/// Elements dropped with everything inside them: code, styles, graphics, embedded
/// documents, a form's option lists, and the `<head>` of a document (for the plain
/// renderer; the Markdown one reads its `<title>`).
const SKIPPED: [&str; 12] = [
    "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas", "select", "noembed",
    "noframes",
];

/// Blocks set off by a blank line.
const PARAGRAPH_BLOCKS: [&str; 16] = [
    "p", "section", "article", "header", "footer", "main", "nav", "aside", "figure", "form", "fieldset", "table", "dl",
    "details", "address", "center",
];

/// Blocks that start on a new line.
const LINE_BLOCKS: [&str; 8] = ["div", "dt", "dd", "tr", "summary", "figcaption", "caption", "legend"];

/// How an element sits in the text around it, for the renderers' generic cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Display {
    /// Set off by a blank line.
    Paragraph,
    /// Starts on a new line.
    Line,
    /// Flows within the line (and every element not listed).
    Inline,
}

/// How `name` (lowercased) is laid out.
fn display(name: &str) -> Display {
    if PARAGRAPH_BLOCKS.contains(&name) {
        Display::Paragraph
    } else if LINE_BLOCKS.contains(&name) {
        Display::Line
    } else {
        Display::Inline
    }
}

/// Whether a link to `href` goes nowhere a reader could follow: empty, a place on the
/// same page, or script.
/// What the Markdown and the plain-text writers share: text goes into `out` after what is
/// owed before it (`flush`: line breaks, markers, a space), and every line of
/// preformatted text starts with the line's markers.
trait Flow {
    /// The text written so far.
    fn out(&mut self) -> &mut String;
    /// Writes what is owed before the next text.
    fn flush(&mut self);
    /// Writes what starts a new line (quote markers).
    fn push_line_start(&mut self);
    /// Notes that a space is owed before the next text.
    fn want_space(&mut self);
    /// Notes that at least `count` line breaks are owed before the next text.
    fn want_newlines(&mut self, count: usize);

    /// The line breaks owed at the start or end of element `name`.
    fn block_edge(&mut self, name: &str) {
        match display(name) {
            Display::Paragraph => self.want_newlines(2),
            Display::Line => self.want_newlines(1),
            Display::Inline => {}
        }
    }

    /// Writes preformatted text as it stands, line starts after each line break.
    fn write_as_is(&mut self, text: &str) {
        self.flush();
        for character in text.chars() {
            self.out().push(character);
            if character == '\n' {
                self.push_line_start();
            }
        }
    }

    /// Writes flowing text: each run of whitespace becomes one owed space.
    fn write_flowing(&mut self, text: &str) {
        for character in text.chars() {
            if character.is_whitespace() {
                self.want_space();
            } else {
                self.flush();
                self.out().push(character);
            }
        }
    }
}

/// `text` without the line break that HTML drops right after `<pre>`, when it is the
/// first text of the `<pre>` (`pre_started`, which this clears).
fn after_pre_start(pre_started: &mut bool, text: String) -> String {
    if std::mem::take(pre_started) { text.strip_prefix('\n').map(str::to_owned).unwrap_or(text) } else { text }
}

/// The marker that starts a list item inside `lists` (one entry per open list: the next
/// number of an ordered one, `None` for bullets), indented two spaces per outer list;
/// an ordered list's number moves on.
fn list_item_prefix(lists: &mut [Option<u64>]) -> String {
    let indent = "  ".repeat(lists.len().saturating_sub(1));
    match lists.last_mut() {
        Some(Some(number)) => {
            let prefix = format!("{indent}{number}. ");
            *number += 1;
            prefix
        }
        Some(None) | None => format!("{indent}- "),
    }
}

fn is_dead_link(href: &str) -> bool {
    let href = href.trim();
    href.is_empty()
        || href.starts_with('#')
        || href.get(..11).is_some_and(|scheme| scheme.eq_ignore_ascii_case("javascript:"))
}

/// Follows open elements that are dropped with their content, nesting included.
#[derive(Debug, Default)]
struct Skipping {
    /// The element being dropped and how many of it are open.
    open: Option<(String, usize)>,
}

impl Skipping {
    /// Takes `token` if it is inside (or starts, or ends) a dropped element, given the
    /// names that are dropped.
    fn takes(&mut self, token: &Token<'_>, skipped: &dyn Fn(&str) -> bool) -> bool {
        if let Some((name, depth)) = &mut self.open {
            match token {
                Token::Start(tag) if tag.name == *name && !tag.self_closing => *depth += 1,
                Token::End(end) if end == name => {
                    *depth -= 1;
                    if *depth == 0 {
                        self.open = None;
                    }
                }
                // A document's head ends where its body starts, even without `</head>`.
                Token::Start(tag) if name == "head" && tag.name == "body" => self.open = None,
                Token::Start(_) | Token::End(_) | Token::Text(_) => {}
            }
            return true;
        }
        match token {
            Token::Start(tag) if skipped(&tag.name) => {
                if !tag.self_closing {
                    self.open = Some((tag.name.clone(), 1));
                }
                true
            }
            Token::Start(_) | Token::End(_) | Token::Text(_) => false,
        }
    }
}

/// `text` with every whitespace run turned into one space and the ends trimmed.
pub fn collapse_whitespace(text: &str) -> String {
    text.split(|character: char| character.is_whitespace())
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
