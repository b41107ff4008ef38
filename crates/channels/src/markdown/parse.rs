//! The model's Markdown as a tree the renderers walk: CommonMark with GFM tables and
//! strikethrough, parsed by `pulldown-cmark`. Raw HTML is text here (chat platforms get
//! no markup from the model except Markdown), nesting is capped so hostile input can't
//! exhaust the stack, and links only keep what a chat message can show.

mod nesting;

use std::ops::Range;

use pulldown_cmark::{Alignment, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

use nesting::prepare;

/// Deepest nesting of quotes and list items that is kept; deeper ones are flattened into
/// their parent, so hostile input can't exhaust the stack.
const MAX_BLOCK_DEPTH: usize = 16;
/// Deepest nesting of emphasis spans and links; deeper markers are dropped, their text
/// kept.
const MAX_SPAN_DEPTH: usize = 32;

/// A block of the document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    /// Lines of text; line breaks are kept as `\n` inside the text.
    Paragraph(Vec<Inline>),
    /// A heading (`#` to `######`, or underlined).
    Heading { level: u8, content: Vec<Inline> },
    /// A fenced or indented code block, its text verbatim.
    Code { language: Option<String>, text: String },
    /// A block quote.
    Quote(Vec<Block>),
    /// A bullet list (`start` is `None`) or a numbered list starting at `start`.
    List { start: Option<u64>, items: Vec<Vec<Block>> },
    /// A thematic break (`---`).
    Rule,
    /// A table: its header cells, its rows of cells, and each column's alignment.
    Table(Table),
}

/// A GFM table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    /// How each column is aligned.
    pub alignments: Vec<Alignment>,
    /// The header row's cells.
    pub head: Vec<Vec<Inline>>,
    /// The body rows' cells.
    pub rows: Vec<Vec<Vec<Inline>>>,
}

/// An inline span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inline {
    /// Plain text, unescaped.
    Text(String),
    /// An inline code span, verbatim.
    Code(String),
    /// `**strong**`.
    Strong(Vec<Inline>),
    /// `*emphasis*`.
    Emphasis(Vec<Inline>),
    /// `~~strikethrough~~`.
    Strike(Vec<Inline>),
    /// `[text](url)`, `![alt](url)` and `<https://autolink>`.
    Link { content: Vec<Inline>, url: String },
}

/// Parses a whole document.
pub(crate) fn parse(text: &str) -> Vec<Block> {
    let source = prepare(text);
    // Subscript is on only so that `~one~` is not strikethrough: it becomes text again.
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_SUBSCRIPT;
    let mut builder = Builder::new(&source);
    for (event, range) in Parser::new_ext(&source, options).into_offset_iter() {
        builder.event(event, range);
    }
    builder.finish()
}

/// The text of an inline without its markup.
pub(crate) fn plain_text(inline: &Inline) -> String {
    match inline {
        Inline::Text(text) | Inline::Code(text) => text.clone(),
        Inline::Strong(children) | Inline::Emphasis(children) | Inline::Strike(children) => {
            children.iter().map(plain_text).collect()
        }
        Inline::Link { content, .. } => content.iter().map(plain_text).collect(),
    }
}

/// Keeps only characters that are safe in a class name and on every platform's fence.
fn language_of(info: &str) -> Option<String> {
    let word = info.split_whitespace().next()?;
    let language: String = word
        .chars()
        .filter(|character| character.is_ascii_alphanumeric() || matches!(character, '_' | '+' | '#' | '.' | '-'))
        .take(32)
        .collect();
    (!language.is_empty()).then_some(language)
}

/// Whether a link to `url` may be shown as one (others stay as written).
fn is_web_or_mail(url: &str) -> bool {
    let lowercase = url.to_ascii_lowercase();
    ["http://", "https://", "mailto:"].iter().any(|scheme| lowercase.starts_with(scheme))
}

/// What holds blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockHolder {
    Document,
    Quote,
    Item,
}

/// What holds inlines.
#[derive(Debug, Clone, PartialEq, Eq)]
enum InlineHolder {
    Paragraph,
    /// The text of a tight list item, which comes without a paragraph around it.
    ImplicitParagraph,
    Heading(u8),
    Strong,
    Emphasis,
    Strike,
    /// `~text~`, shown as written.
    Tilde,
    Link(String),
    Cell,
}

/// Something being built.
#[derive(Debug)]
enum Frame {
    Blocks(BlockHolder, Vec<Block>),
    List(Option<u64>, Vec<Vec<Block>>),
    Inlines(InlineHolder, Vec<Inline>),
    Code(Option<String>, String),
    /// An HTML block, kept as the text it is.
    Html(String),
    Table(Table, Vec<Vec<Inline>>),
}

/// Which row of a table ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowKind {
    Head,
    Body,
}

/// What the end of an element does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    /// Its frame is finished.
    Frame,
    /// It made no frame (too deep, or an image inside a link).
    Nothing,
}

/// Turns the parser's events into the tree.
struct Builder<'a> {
    source: &'a str,
    frames: Vec<Frame>,
    closings: Vec<Closing>,
    /// Inside a link shown as written: how many of its elements are open.
    literal_depth: usize,
}

impl<'a> Builder<'a> {
    fn new(source: &'a str) -> Self {
        Self {
            source,
            frames: vec![Frame::Blocks(BlockHolder::Document, Vec::new())],
            closings: Vec::new(),
            literal_depth: 0,
        }
    }

    fn block_depth(&self) -> usize {
        self.frames
            .iter()
            .filter(|frame| matches!(frame, Frame::Blocks(BlockHolder::Quote | BlockHolder::Item, _)))
            .count()
    }

    fn span_depth(&self) -> usize {
        self.frames
            .iter()
            .filter(|frame| {
                matches!(
                    frame,
                    Frame::Inlines(
                        InlineHolder::Strong | InlineHolder::Emphasis | InlineHolder::Strike | InlineHolder::Link(_),
                        _
                    )
                )
            })
            .count()
    }

    fn in_link(&self) -> bool {
        self.frames.iter().any(|frame| matches!(frame, Frame::Inlines(InlineHolder::Link(_), _)))
    }

    fn open(&mut self, frame: Frame) {
        self.frames.push(frame);
        self.closings.push(Closing::Frame);
    }

    fn open_nothing(&mut self) {
        self.closings.push(Closing::Nothing);
    }

    fn event(&mut self, event: Event<'_>, range: Range<usize>) {
        if self.literal_depth > 0 {
            match event {
                Event::Start(_) => self.literal_depth += 1,
                Event::End(_) => self.literal_depth -= 1,
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag, range),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => self.inline(Inline::Code(code.into_string())),
            Event::Html(html) => match self.frames.last_mut() {
                Some(Frame::Html(text)) => text.push_str(&html),
                _ => self.text(&html),
            },
            Event::InlineHtml(html) | Event::InlineMath(html) | Event::DisplayMath(html) => self.text(&html),
            Event::FootnoteReference(_) | Event::TaskListMarker(_) => {
                self.text(self.source.get(range).unwrap_or_default())
            }
            Event::SoftBreak | Event::HardBreak => self.text("\n"),
            Event::Rule => {
                self.close_implicit_paragraph();
                self.block(Block::Rule);
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>, range: Range<usize>) {
        let is_inline = matches!(
            tag,
            Tag::Emphasis
                | Tag::Strong
                | Tag::Strikethrough
                | Tag::Subscript
                | Tag::Superscript
                | Tag::Link { .. }
                | Tag::Image { .. }
        );
        if is_inline {
            self.ensure_inline_holder();
        } else {
            self.close_implicit_paragraph();
        }
        let too_deep = self.span_depth() >= MAX_SPAN_DEPTH;
        match tag {
            Tag::Paragraph => self.open(Frame::Inlines(InlineHolder::Paragraph, Vec::new())),
            Tag::Heading { level, .. } => {
                self.open(Frame::Inlines(InlineHolder::Heading(level as u8), Vec::new()));
            }
            Tag::BlockQuote(_) if self.block_depth() < MAX_BLOCK_DEPTH => {
                self.open(Frame::Blocks(BlockHolder::Quote, Vec::new()));
            }
            Tag::List(start) if self.block_depth() < MAX_BLOCK_DEPTH => self.open(Frame::List(start, Vec::new())),
            Tag::Item if matches!(self.frames.last(), Some(Frame::List(..))) => {
                self.open(Frame::Blocks(BlockHolder::Item, Vec::new()));
            }
            Tag::BlockQuote(_) | Tag::List(_) | Tag::Item => self.open_nothing(),
            Tag::CodeBlock(kind) => {
                let language = match kind {
                    CodeBlockKind::Fenced(info) => language_of(&info),
                    CodeBlockKind::Indented => None,
                };
                self.open(Frame::Code(language, String::new()));
            }
            Tag::HtmlBlock => self.open(Frame::Html(String::new())),
            Tag::Table(alignments) => {
                self.open(Frame::Table(Table { alignments, head: Vec::new(), rows: Vec::new() }, Vec::new()));
            }
            Tag::TableHead | Tag::TableRow => self.open_nothing(),
            Tag::TableCell => self.open(Frame::Inlines(InlineHolder::Cell, Vec::new())),
            Tag::Emphasis | Tag::Strong | Tag::Strikethrough if too_deep => self.open_nothing(),
            Tag::Emphasis => self.open(Frame::Inlines(InlineHolder::Emphasis, Vec::new())),
            Tag::Strong => self.open(Frame::Inlines(InlineHolder::Strong, Vec::new())),
            Tag::Strikethrough => self.open(Frame::Inlines(InlineHolder::Strike, Vec::new())),
            Tag::Subscript => self.open(Frame::Inlines(InlineHolder::Tilde, Vec::new())),
            // An image in a link is its alt text: a link can't hold another.
            Tag::Image { .. } if self.in_link() || too_deep => self.open_nothing(),
            Tag::Link { link_type, dest_url, .. } | Tag::Image { link_type, dest_url, .. } => {
                let url = match link_type {
                    LinkType::Email => format!("mailto:{dest_url}"),
                    _ => dest_url.into_string(),
                };
                let shown_as_written = url.is_empty() || (link_type == LinkType::Autolink && !is_web_or_mail(&url));
                if shown_as_written || too_deep {
                    self.text(self.source.get(range).unwrap_or_default());
                    self.literal_depth = 1;
                } else {
                    self.open(Frame::Inlines(InlineHolder::Link(url), Vec::new()));
                }
            }
            // Not enabled; kept as plain content if they ever come.
            Tag::Superscript
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.open_nothing(),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        let is_inline = matches!(
            tag,
            TagEnd::Emphasis
                | TagEnd::Strong
                | TagEnd::Strikethrough
                | TagEnd::Subscript
                | TagEnd::Superscript
                | TagEnd::Link
                | TagEnd::Image
        );
        if !is_inline {
            self.close_implicit_paragraph();
        }
        if self.closings.pop() == Some(Closing::Frame)
            && let Some(frame) = self.frames.pop()
        {
            self.finish_frame(frame);
        }
        match tag {
            TagEnd::TableHead => self.end_row(RowKind::Head),
            TagEnd::TableRow => self.end_row(RowKind::Body),
            _ => {}
        }
    }

    /// Adds a finished frame to the one it belongs to.
    fn finish_frame(&mut self, frame: Frame) {
        match frame {
            Frame::Blocks(BlockHolder::Document, blocks) => {
                self.frames.push(Frame::Blocks(BlockHolder::Document, blocks))
            }
            Frame::Blocks(BlockHolder::Quote, blocks) => self.block(Block::Quote(blocks)),
            Frame::Blocks(BlockHolder::Item, blocks) => {
                if let Some(Frame::List(_, items)) = self.frames.last_mut() {
                    items.push(blocks);
                }
            }
            Frame::List(start, items) => self.block(Block::List { start, items }),
            Frame::Inlines(holder, inlines) => {
                let inlines = merge_text(inlines);
                match holder {
                    InlineHolder::Paragraph | InlineHolder::ImplicitParagraph => {
                        if !inlines.is_empty() {
                            self.block(Block::Paragraph(inlines));
                        }
                    }
                    InlineHolder::Heading(level) => self.block(Block::Heading { level, content: inlines }),
                    InlineHolder::Strong => self.inline(Inline::Strong(inlines)),
                    InlineHolder::Emphasis => self.inline(Inline::Emphasis(inlines)),
                    InlineHolder::Strike => self.inline(Inline::Strike(inlines)),
                    InlineHolder::Tilde => {
                        self.inline(Inline::Text("~".to_owned()));
                        for inline in inlines {
                            self.inline(inline);
                        }
                        self.inline(Inline::Text("~".to_owned()));
                    }
                    InlineHolder::Link(url) => self.inline(Inline::Link { content: inlines, url }),
                    InlineHolder::Cell => {
                        if let Some(Frame::Table(_, row)) = self.frames.last_mut() {
                            row.push(inlines);
                        }
                    }
                }
            }
            Frame::Code(language, mut text) => {
                if text.ends_with('\n') {
                    text.pop();
                }
                self.block(Block::Code { language, text });
            }
            Frame::Html(text) => {
                let text = text.trim_end_matches('\n');
                if !text.is_empty() {
                    self.block(Block::Paragraph(vec![Inline::Text(text.to_owned())]));
                }
            }
            Frame::Table(table, _) => self.block(Block::Table(table)),
        }
    }

    /// Ends a table row (the header's or a body row): its cells were collected in the
    /// table's frame.
    fn end_row(&mut self, kind: RowKind) {
        if let Some(Frame::Table(table, row)) = self.frames.last_mut() {
            let cells = std::mem::take(row);
            match kind {
                RowKind::Head => table.head = cells,
                RowKind::Body => table.rows.push(cells),
            }
        }
    }

    fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        match self.frames.last_mut() {
            Some(Frame::Code(_, code)) => code.push_str(text),
            Some(Frame::Html(html)) => html.push_str(text),
            _ => self.inline(Inline::Text(text.to_owned())),
        }
    }

    /// Makes sure the innermost frame takes inlines: a tight list item's text comes
    /// without a paragraph.
    fn ensure_inline_holder(&mut self) {
        if !matches!(self.frames.last(), Some(Frame::Inlines(..))) {
            self.frames.push(Frame::Inlines(InlineHolder::ImplicitParagraph, Vec::new()));
        }
    }

    fn close_implicit_paragraph(&mut self) {
        if matches!(self.frames.last(), Some(Frame::Inlines(InlineHolder::ImplicitParagraph, _)))
            && let Some(frame) = self.frames.pop()
        {
            self.finish_frame(frame);
        }
    }

    fn inline(&mut self, inline: Inline) {
        self.ensure_inline_holder();
        if let Some(Frame::Inlines(_, inlines)) = self.frames.last_mut() {
            inlines.push(inline);
        }
    }

    fn block(&mut self, block: Block) {
        match self.frames.last_mut() {
            Some(Frame::Blocks(_, blocks)) => blocks.push(block),
            // Blocks only end up in lists and tables through their items and cells.
            Some(Frame::List(..) | Frame::Table(..) | Frame::Inlines(..) | Frame::Code(..) | Frame::Html(_)) | None => {
            }
        }
    }

    fn finish(mut self) -> Vec<Block> {
        self.close_implicit_paragraph();
        while self.frames.len() > 1 {
            if let Some(frame) = self.frames.pop() {
                self.finish_frame(frame);
            }
        }
        match self.frames.pop() {
            Some(Frame::Blocks(_, blocks)) => blocks,
            _ => Vec::new(),
        }
    }
}

/// Joins neighbouring text nodes and drops empty ones.
fn merge_text(inlines: Vec<Inline>) -> Vec<Inline> {
    let mut merged: Vec<Inline> = Vec::new();
    for inline in inlines {
        match (merged.last_mut(), inline) {
            (_, Inline::Text(text)) if text.is_empty() => {}
            (Some(Inline::Text(previous)), Inline::Text(text)) => previous.push_str(&text),
            (_, inline) => merged.push(inline),
        }
    }
    merged
}

#[cfg(test)]
mod tests;
