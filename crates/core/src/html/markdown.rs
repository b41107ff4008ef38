//! HTML to readable Markdown: headings, paragraphs, lists, quotes, code blocks, tables as
//! `|`-separated rows and links as `[text](absolute URL)`; scripts, styles, forms' option
//! lists and embedded graphics dropped.

use crate::html::entities;
use crate::html::tokenizer::{Tag, Token, Tokenizer};
use crate::html::{Flow, SKIPPED, Skipping, after_pre_start, collapse_whitespace, is_dead_link};

/// A converted page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Text of the first `<title>`, whitespace collapsed.
    pub title: Option<String>,
    /// The body as Markdown.
    pub markdown: String,
}

/// Converts `html`. `resolve` turns a link's `href` into the absolute address written in
/// the Markdown (relative ones against the page's address), or `None` to leave the link
/// text plain; links to the same page or to script never reach it.
pub fn to_markdown(html: &str, resolve: &dyn Fn(&str) -> Option<String>) -> Document {
    let mut writer = Writer::new(resolve);
    let mut skipping = Skipping::default();
    for token in Tokenizer::new(html) {
        if skipping.takes(&token, &|name| SKIPPED.contains(&name)) {
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

/// An open `<a href>`: where its text starts in the output.
#[derive(Debug)]
struct OpenLink {
    href: Option<String>,
    start: usize,
}

/// Builds the Markdown while walking the tokens.
struct Writer<'a> {
    resolve: &'a dyn Fn(&str) -> Option<String>,
    out: String,
    /// Line breaks owed before the next text (1: new line, 2: blank line).
    newlines_wanted: usize,
    /// A space owed before the next text.
    space_wanted: bool,
    /// Written at the start of the next text line (`## `, `- `).
    prefix: String,
    title: Option<String>,
    in_title: bool,
    preformatted: usize,
    /// Just inside `<pre>`, where a first line break is not part of the text.
    pre_started: bool,
    quote_depth: usize,
    /// One entry per open list: `Some(next number)` for `<ol>`.
    lists: Vec<Option<u64>>,
    link: Option<OpenLink>,
    cell_in_row: usize,
}

impl<'a> Writer<'a> {
    fn new(resolve: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Writer {
            resolve,
            out: String::new(),
            newlines_wanted: 0,
            space_wanted: false,
            prefix: String::new(),
            title: None,
            in_title: false,
            preformatted: 0,
            pre_started: false,
            quote_depth: 0,
            lists: Vec::new(),
            link: None,
            cell_in_row: 0,
        }
    }

    fn want_newlines(&mut self, count: usize) {
        self.newlines_wanted = self.newlines_wanted.max(count);
    }

    /// Writes what is owed before text: line breaks, quote markers, the prefix, a space.
    fn flush(&mut self) {
        if self.newlines_wanted > 0 {
            // Nothing written yet: no leading blank lines, but quote markers still apply.
            if !self.out.is_empty() {
                let kept = self.out.trim_end_matches([' ', '\t']).len();
                self.truncate(kept);
                let existing = self.out.len() - self.out.trim_end_matches('\n').len();
                for _ in existing..self.newlines_wanted {
                    self.out.push('\n');
                }
            }
            self.newlines_wanted = 0;
            self.space_wanted = false;
            self.push_line_start();
        }
        if !self.prefix.is_empty() {
            let prefix = std::mem::take(&mut self.prefix);
            self.out.push_str(&prefix);
            self.space_wanted = false;
        }
        if self.space_wanted {
            if !self.out.ends_with([' ', '\n']) && !self.out.is_empty() {
                self.out.push(' ');
            }
            self.space_wanted = false;
        }
    }

    /// Shortens the output, keeping an open link's start inside it.
    fn truncate(&mut self, length: usize) {
        self.out.truncate(length);
        if let Some(link) = &mut self.link {
            link.start = link.start.min(self.out.len());
        }
    }

    fn push_line_start(&mut self) {
        for _ in 0..self.quote_depth {
            self.out.push_str("> ");
        }
    }

    fn text(&mut self, raw: &str) {
        let decoded = entities::decode(raw);
        if self.in_title {
            self.title.get_or_insert_with(String::new).push_str(&decoded);
            return;
        }
        if self.preformatted > 0 {
            let decoded = after_pre_start(&mut self.pre_started, decoded);
            self.write_as_is(&decoded);
            return;
        }
        self.write_flowing(&decoded);
    }

    fn open(&mut self, tag: &Tag) {
        let name = tag.name.as_str();
        match name {
            "title" => self.in_title = self.title.is_none(),
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.want_newlines(2);
                let level = usize::from(name.as_bytes()[1] - b'0');
                self.prefix = format!("{} ", "#".repeat(level));
            }
            "br" => {
                self.flush_lines();
                if !self.out.is_empty() {
                    self.out.push('\n');
                    self.push_line_start();
                }
                self.space_wanted = false;
            }
            "hr" => {
                self.want_newlines(2);
                self.flush();
                self.out.push_str("---");
                self.want_newlines(2);
            }
            "ul" | "ol" => {
                self.want_newlines(if self.lists.is_empty() { 2 } else { 1 });
                let start = tag.attribute("start").and_then(|value| value.trim().parse().ok()).unwrap_or(1);
                self.lists.push((name == "ol").then_some(start));
            }
            "li" => {
                self.want_newlines(1);
                self.prefix = super::list_item_prefix(&mut self.lists);
            }
            "blockquote" => {
                self.want_newlines(2);
                self.quote_depth += 1;
            }
            "pre" => {
                self.want_newlines(2);
                self.flush();
                self.out.push_str("```\n");
                self.push_line_start();
                self.preformatted += 1;
                self.pre_started = true;
            }
            "code" | "kbd" | "samp" if self.preformatted == 0 => {
                self.flush();
                self.out.push('`');
            }
            "a" => {
                self.close_link();
                self.flush_lines();
                let href = tag.attribute("href").and_then(|href| self.resolve(href));
                self.link = Some(OpenLink { href, start: self.out.len() });
            }
            "img" if self.link.is_some() => {
                if let Some(alt) = tag.attribute("alt").map(collapse_whitespace).filter(|alt| !alt.is_empty()) {
                    self.text(&alt.replace('&', "&amp;"));
                }
            }
            "tr" => {
                self.want_newlines(1);
                self.cell_in_row = 0;
            }
            "td" | "th" => {
                if self.cell_in_row > 0 {
                    self.flush();
                    self.out.push_str(" | ");
                    self.space_wanted = false;
                }
                self.cell_in_row += 1;
            }
            _ => self.block_edge(name),
        }
    }

    fn close(&mut self, name: &str) {
        match name {
            "title" => self.in_title = false,
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.prefix.clear();
                self.want_newlines(2);
            }
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
            "pre" if self.preformatted > 0 => {
                self.preformatted -= 1;
                if !self.out.ends_with('\n') {
                    self.out.push('\n');
                    self.push_line_start();
                }
                self.out.push_str("```");
                self.want_newlines(2);
            }
            "code" | "kbd" | "samp" if self.preformatted == 0 => {
                let pending = std::mem::take(&mut self.space_wanted);
                if self.out.ends_with('`') {
                    self.truncate(self.out.len() - 1);
                } else {
                    self.out.push('`');
                }
                self.space_wanted = pending;
            }
            "a" => self.close_link(),
            _ => self.block_edge(name),
        }
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

    /// Turns the text written since the open `<a>` into `[text](url)`.
    fn close_link(&mut self) {
        let Some(link) = self.link.take() else {
            return;
        };
        let Some(href) = link.href else {
            return;
        };
        let segment = &self.out[link.start..];
        let Some(offset) = segment.find(|character: char| !character.is_whitespace()) else {
            return;
        };
        let text_start = link.start + offset;
        let pending = std::mem::take(&mut self.space_wanted);
        if self.out[text_start..].contains('\n') {
            self.out.push_str(&format!(" ({href})"));
        } else {
            self.out.insert(text_start, '[');
            self.out.push_str(&format!("]({href})"));
        }
        self.space_wanted = pending;
    }

    /// An absolute link target, or `None` for script and same-page links; spaces and
    /// `)` escaped so the target can't end the Markdown link early.
    fn resolve(&self, href: &str) -> Option<String> {
        if is_dead_link(href) {
            return None;
        }
        let url = (self.resolve)(href.trim())?;
        Some(url.replace(' ', "%20").replace(')', "%29"))
    }

    fn finish(mut self) -> Document {
        self.close_link();
        let mut markdown = String::with_capacity(self.out.len());
        let mut blank_lines = 0;
        for line in self.out.lines() {
            let line = line.trim_end();
            if line.is_empty() || line.chars().all(|character| character == '>' || character == ' ') {
                blank_lines += 1;
                continue;
            }
            if !markdown.is_empty() {
                markdown.push_str(if blank_lines > 0 { "\n\n" } else { "\n" });
            }
            blank_lines = 0;
            markdown.push_str(line);
        }
        let title = self.title.map(|title| collapse_whitespace(&title)).filter(|title| !title.is_empty());
        Document { title, markdown }
    }
}

impl Flow for Writer<'_> {
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
