//! HTML to plain text for people and chat fallbacks: tags dropped, references decoded
//! strictly, links as `text (address)`, and (unless the text is laid out as written)
//! blocks as lines, list items as `- ` or `1. ` lines and tables as `|`-separated rows.
//! Nothing in the result is ever markup.

use crate::html::entities;
use crate::html::tokenizer::{Tag, Token, Tokenizer};
use crate::html::{Flow, SKIPPED, Skipping, after_pre_start, is_dead_link};

/// Where the lines of the plain text come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// As a browser lays HTML out: whitespace runs are one space, blocks, `<br>`, list
    /// items and table rows make the lines, `<pre>` keeps its own. For mail and for
    /// HTML written for browsers (Matrix's `formatted_body`).
    Blocks {
        /// What becomes of `<blockquote>`.
        quotes: QuoteMarks,
    },
    /// The text's own whitespace and line breaks are the layout and tags add none, as
    /// in Telegram's HTML; the result is not trimmed either.
    AsWritten,
}

/// How quoted text shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuoteMarks {
    /// Each quoted line starts with `> `, as mail quotes are written (so quoted history
    /// is recognised as in plain-text mail).
    Prefixed,
    /// Quoted text is set off by blank lines only (where a leading `>` means something
    /// else to the receiving client, such as Matrix's reply fallbacks).
    Dropped,
}

/// The plain text of `html`, laid out by `layout`.
pub fn to_plain(html: &str, layout: Layout) -> String {
    let mut writer = Writer::new(layout);
    let mut skipping = Skipping::default();
    let skipped = |name: &str| SKIPPED.contains(&name) || matches!(name, "head" | "title");
    for token in Tokenizer::new(html) {
        if skipping.takes(&token, &skipped) {
            continue;
        }
        match token {
            Token::Start(tag) => writer.open(&tag),
            Token::End(name) => writer.close(&name),
            Token::Text(text) => writer.text(text),
        }
    }
    writer.finish()
}

/// An open `<a href>`: its address, if one worth showing, and where its text starts.
#[derive(Debug)]
struct OpenLink {
    address: Option<String>,
    start: usize,
}

/// Builds the text while walking the tokens.
#[derive(Debug)]
struct Writer {
    layout: Layout,
    out: String,
    /// Line breaks owed before the next text (1: new line, 2: blank line).
    newlines_wanted: usize,
    /// A space owed before the next text.
    space_wanted: bool,
    /// Written at the start of the next text (a list item's marker).
    prefix: String,
    preformatted: usize,
    /// Just inside `<pre>`, where a first line break is not part of the text.
    pre_started: bool,
    quote_depth: usize,
    /// One entry per open list: `Some(next number)` for `<ol>`.
    lists: Vec<Option<u64>>,
    link: Option<OpenLink>,
    /// A ` | ` owed before the next text, between two table cells with text.
    cell_separator_wanted: bool,
    /// Whether the current table row has text yet.
    row_has_text: bool,
}

impl Writer {
    fn new(layout: Layout) -> Self {
        Self {
            layout,
            out: String::new(),
            newlines_wanted: 0,
            space_wanted: false,
            prefix: String::new(),
            preformatted: 0,
            pre_started: false,
            quote_depth: 0,
            lists: Vec::new(),
            link: None,
            cell_separator_wanted: false,
            row_has_text: false,
        }
    }

    fn lays_out_blocks(&self) -> bool {
        match self.layout {
            Layout::Blocks { .. } => true,
            Layout::AsWritten => false,
        }
    }

    fn want_newlines(&mut self, count: usize) {
        if self.lays_out_blocks() {
            self.newlines_wanted = self.newlines_wanted.max(count);
        }
    }

    /// Quote markers at the start of a line.
    fn push_line_start(&mut self) {
        if self.layout == (Layout::Blocks { quotes: QuoteMarks::Prefixed }) {
            for _ in 0..self.quote_depth {
                self.out.push_str("> ");
            }
        }
    }

    /// Writes what is owed before text: line breaks, quote markers, a list marker, a
    /// cell separator, a space.
    fn flush(&mut self) {
        if self.newlines_wanted > 0 {
            if !self.out.is_empty() {
                let kept = self.out.trim_end_matches([' ', '\t']).len();
                self.out.truncate(kept);
                let existing = self.out.len() - self.out.trim_end_matches('\n').len();
                for _ in existing..self.newlines_wanted {
                    self.out.push('\n');
                }
            }
            self.newlines_wanted = 0;
            self.space_wanted = false;
            self.cell_separator_wanted = false;
            self.push_line_start();
        }
        if !self.prefix.is_empty() {
            let prefix = std::mem::take(&mut self.prefix);
            self.out.push_str(&prefix);
            self.space_wanted = false;
        }
        if self.cell_separator_wanted {
            self.out.push_str(" | ");
            self.cell_separator_wanted = false;
            self.space_wanted = false;
        }
        if self.space_wanted {
            if !self.out.is_empty() && !self.out.ends_with([' ', '\n']) {
                self.out.push(' ');
            }
            self.space_wanted = false;
        }
        self.row_has_text = true;
    }

    fn text(&mut self, raw: &str) {
        let decoded = entities::decode_strict(raw);
        if !self.lays_out_blocks() {
            self.out.push_str(&decoded);
            return;
        }
        if self.preformatted > 0 {
            let decoded = after_pre_start(&mut self.pre_started, decoded);
            if !decoded.is_empty() {
                self.write_as_is(&decoded);
            }
            return;
        }
        self.write_flowing(&decoded);
    }

    /// Writes owed line breaks and the prefix, but not an owed space (it belongs to the
    /// text that follows, which may be a link's).
    fn flush_lines(&mut self) {
        if self.newlines_wanted > 0 || !self.prefix.is_empty() {
            let space = std::mem::take(&mut self.space_wanted);
            self.flush();
            self.space_wanted = space;
        }
    }

    fn open(&mut self, tag: &Tag) {
        let name = tag.name.as_str();
        match name {
            "br" => {
                if !self.lays_out_blocks() {
                    self.out.push('\n');
                    return;
                }
                self.flush_lines();
                self.out.push('\n');
                self.push_line_start();
                self.space_wanted = false;
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "ul" | "ol" | "pre" | "hr" => {
                let nested_list = matches!(name, "ul" | "ol") && !self.lists.is_empty();
                self.want_newlines(if nested_list { 1 } else { 2 });
                match name {
                    "ul" | "ol" => {
                        let start = tag.attribute("start").and_then(|value| value.trim().parse().ok()).unwrap_or(1);
                        self.lists.push((name == "ol").then_some(start));
                    }
                    "pre" => {
                        self.preformatted += 1;
                        self.pre_started = true;
                    }
                    _ => {}
                }
            }
            "li" => {
                self.want_newlines(1);
                if !self.lays_out_blocks() {
                    return;
                }
                self.prefix = super::list_item_prefix(&mut self.lists);
            }
            "blockquote" => {
                self.want_newlines(2);
                self.quote_depth += 1;
            }
            "a" => {
                self.close_link();
                self.flush_lines();
                let address = tag.attribute("href").map(str::trim).filter(|href| is_shown(href)).map(str::to_owned);
                self.link = Some(OpenLink { address, start: self.out.len() });
            }
            "tr" => {
                self.want_newlines(1);
                self.row_has_text = false;
                self.cell_separator_wanted = false;
            }
            "td" | "th" => {
                if self.row_has_text && self.lays_out_blocks() {
                    self.cell_separator_wanted = true;
                }
            }
            _ => self.block_edge(name),
        }
    }

    fn close(&mut self, name: &str) {
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => self.want_newlines(2),
            "ul" | "ol" => {
                self.lists.pop();
                self.prefix.clear();
                self.want_newlines(if self.lists.is_empty() { 2 } else { 1 });
            }
            "li" => {
                self.prefix.clear();
                self.want_newlines(1);
            }
            "blockquote" => {
                self.quote_depth = self.quote_depth.saturating_sub(1);
                self.want_newlines(2);
            }
            "pre" => {
                self.preformatted = self.preformatted.saturating_sub(1);
                self.pre_started = false;
                self.want_newlines(2);
            }
            "a" => self.close_link(),
            "td" | "th" => {}
            _ => self.block_edge(name),
        }
    }

    /// Adds the address after a link's text, unless the text already says it.
    fn close_link(&mut self) {
        let Some(link) = self.link.take() else {
            return;
        };
        let Some(address) = link.address else {
            return;
        };
        let text = self.out.get(link.start..).unwrap_or_default().trim();
        let bare =
            address.get(7..).filter(|_| address.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("mailto:")));
        if text == address || Some(text) == bare {
            return;
        }
        if text.is_empty() {
            if self.lays_out_blocks() {
                self.flush();
            }
            self.out.push_str(&address);
        } else {
            self.out.push_str(&format!(" ({address})"));
        }
    }

    fn finish(mut self) -> String {
        self.close_link();
        if !self.lays_out_blocks() {
            return self.out;
        }
        let mut lines: Vec<&str> = Vec::new();
        for line in self.out.lines().map(str::trim_end) {
            // A line of nothing but quote markers is blank.
            let blank = line.chars().all(|character| character == '>' || character.is_whitespace());
            if blank && lines.last().is_none_or(|last| last.is_empty()) {
                continue;
            }
            lines.push(if blank { "" } else { line });
        }
        lines.join("\n").trim().to_owned()
    }
}

/// Whether a link's address is shown beside its text: one a reader can follow from
/// plain text (web and mail addresses, not relative or script ones).
fn is_shown(href: &str) -> bool {
    if is_dead_link(href) {
        return false;
    }
    let scheme = href.split_once(':').map(|(scheme, _)| scheme.to_ascii_lowercase());
    matches!(scheme.as_deref(), Some("http" | "https" | "mailto"))
}

impl Flow for Writer {
    fn out(&mut self) -> &mut String {
        &mut self.out
    }

    fn flush(&mut self) {
        Writer::flush(self);
    }

    fn push_line_start(&mut self) {
        Writer::push_line_start(self);
    }

    fn want_space(&mut self) {
        self.space_wanted = true;
    }

    fn want_newlines(&mut self, count: usize) {
        Writer::want_newlines(self, count);
    }
}
