//! Markdown to styled, wrapped lines: headings, emphasis, inline and fenced code (through
//! [`crate::highlight`]), lists, quotes, rules and simple tables. Called on every frame
//! with the text streamed so far, so an unfinished reply renders as it grows.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

use crate::highlight::highlight;
use crate::theme::Theme;
use crate::wrap::wrap;

/// `markdown` as lines at most `width` columns wide.
pub fn render(markdown: &str, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut builder = Builder::default_for(theme, width);
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(markdown, options) {
        builder.event(event);
    }
    builder.flush();
    while builder.lines.last().is_some_and(|line| line.width() == 0) {
        builder.lines.pop();
    }
    builder.lines
}

/// A code block being read.
struct Code {
    language: String,
    text: String,
}

struct Builder<'a> {
    theme: &'a Theme,
    width: usize,
    lines: Vec<Line<'static>>,
    spans: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Quote bars and list indents in force.
    prefixes: Vec<Span<'static>>,
    /// The marker of the list item whose first line is still to come.
    marker: Option<String>,
    /// Open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    code: Option<Code>,
    /// Table rows being read, cells as plain text.
    table: Option<Vec<Vec<String>>>,
}

impl<'a> Builder<'a> {
    fn default_for(theme: &'a Theme, width: usize) -> Self {
        Builder {
            theme,
            width,
            lines: Vec::new(),
            spans: Vec::new(),
            styles: vec![theme.text],
            prefixes: Vec::new(),
            marker: None,
            lists: Vec::new(),
            code: None,
            table: None,
        }
    }

    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or(self.theme.text)
    }

    fn push_style(&mut self, change: impl FnOnce(Style) -> Style) {
        let style = change(self.style());
        self.styles.push(style);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    /// Ends the line being built, wrapped under the prefixes in force.
    fn flush(&mut self) {
        if self.spans.is_empty() && self.marker.is_none() {
            return;
        }
        let spans = std::mem::take(&mut self.spans);
        let rest = self.prefixes.clone();
        let mut first = rest.clone();
        if let Some(marker) = self.marker.take() {
            // The marker replaces the item's indent on its first line.
            first.pop();
            first.push(Span::styled(marker, self.theme.accent));
        }
        self.lines.extend(wrap(&first, &rest, spans, self.width));
    }

    fn blank(&mut self) {
        self.flush();
        if self.lines.last().is_some_and(|line| line.width() > 0) && self.lists.is_empty() {
            self.lines.push(Line::default());
        }
    }

    fn text(&mut self, text: &str) {
        if let Some(code) = &mut self.code {
            code.text.push_str(text);
        } else if let Some(row) = self.table.as_mut().and_then(|rows| rows.last_mut()) {
            if let Some(cell) = row.last_mut() {
                cell.push_str(text);
            }
        } else {
            let style = self.style();
            self.spans.push(Span::styled(text.to_owned(), style));
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                if self.table.is_some() {
                    self.text(&code);
                } else {
                    self.spans.push(Span::styled(code.into_string(), self.theme.code));
                }
            }
            Event::InlineMath(math) | Event::DisplayMath(math) => {
                self.spans.push(Span::styled(math.into_string(), self.theme.code));
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                self.spans.push(Span::styled(html.trim_end().to_owned(), self.theme.dim));
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.flush();
                let rule = "─".repeat(self.width.min(40));
                self.lines.push(Line::from(Span::styled(rule, self.theme.border)));
                self.blank();
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            Event::FootnoteReference(name) => self.text(&format!("[{name}]")),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Heading { level, .. } => {
                self.flush();
                let marks = match level {
                    HeadingLevel::H1 => "# ",
                    HeadingLevel::H2 => "## ",
                    _ => "### ",
                };
                let accent = self.theme.accent;
                self.push_style(|_| accent);
                self.text(marks);
            }
            Tag::Emphasis => self.push_style(|style| style.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|style| style.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|style| style.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { .. } => {
                let link = self.theme.link;
                self.push_style(|_| link);
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.prefixes.push(Span::styled("▎ ", self.theme.link));
                let dim = self.theme.dim;
                self.push_style(|style| style.patch(dim).add_modifier(Modifier::ITALIC));
            }
            Tag::CodeBlock(kind) => {
                self.flush();
                let language = match kind {
                    CodeBlockKind::Fenced(info) => info.split_whitespace().next().unwrap_or_default().to_lowercase(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some(Code { language, text: String::new() });
            }
            Tag::List(start) => {
                self.flush();
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        *number += 1;
                        format!("{}. ", *number - 1)
                    }
                    _ => "• ".to_owned(),
                };
                self.prefixes.push(Span::raw(" ".repeat(marker.width())));
                self.marker = Some(marker);
            }
            Tag::Table(_) => {
                self.flush();
                self.table = Some(Vec::new());
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(rows) = &mut self.table {
                    rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(row) = self.table.as_mut().and_then(|rows| rows.last_mut()) {
                    row.push(String::new());
                }
            }
            Tag::Paragraph
            | Tag::FootnoteDefinition(_)
            | Tag::HtmlBlock
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Image { .. }
            | Tag::MetadataBlock(_)
            | Tag::Superscript
            | Tag::Subscript => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) => {
                self.pop_style();
                self.blank();
            }
            TagEnd::Paragraph => self.blank(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link => self.pop_style(),
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.prefixes.pop();
                self.pop_style();
                self.blank();
            }
            TagEnd::CodeBlock => {
                if let Some(code) = self.code.take() {
                    self.code_block(&code);
                }
                self.blank();
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                self.blank();
            }
            TagEnd::Item => {
                self.flush();
                self.prefixes.pop();
            }
            TagEnd::Table => {
                if let Some(rows) = self.table.take() {
                    self.table_lines(&rows);
                }
                self.blank();
            }
            TagEnd::TableHead
            | TagEnd::TableRow
            | TagEnd::TableCell
            | TagEnd::FootnoteDefinition
            | TagEnd::HtmlBlock
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::Image
            | TagEnd::MetadataBlock(_)
            | TagEnd::Superscript
            | TagEnd::Subscript => {}
        }
    }

    fn code_block(&mut self, code: &Code) {
        let bar = Span::styled("│ ", self.theme.border);
        let mut prefix = self.prefixes.clone();
        prefix.push(bar);
        if !code.language.is_empty() {
            let mut label = self.prefixes.clone();
            label.push(Span::styled(format!("╭ {}", code.language), self.theme.border));
            self.lines.push(Line::from(label));
        }
        let text = code.text.strip_suffix('\n').unwrap_or(&code.text);
        for line in text.split('\n') {
            let spans = highlight(line, &code.language, self.theme);
            self.lines.extend(wrap(&prefix, &prefix, spans, self.width));
        }
    }

    fn table_lines(&mut self, rows: &[Vec<String>]) {
        let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|column| rows.iter().filter_map(|row| row.get(column)).map(|cell| cell.width()).max().unwrap_or(0))
            .collect();
        for (index, row) in rows.iter().enumerate() {
            let cells: Vec<String> = (0..columns)
                .map(|column| {
                    let cell = row.get(column).map(String::as_str).unwrap_or_default();
                    let pad = widths[column].saturating_sub(cell.width());
                    format!("{cell}{}", " ".repeat(pad))
                })
                .collect();
            let style = if index == 0 { self.theme.text.add_modifier(Modifier::BOLD) } else { self.theme.text };
            let line = cells.join(" │ ");
            self.lines.extend(wrap(&self.prefixes, &self.prefixes, vec![Span::styled(line, style)], self.width));
            if index == 0 {
                let rule: Vec<String> = widths.iter().map(|width| "─".repeat(*width)).collect();
                let rule = Span::styled(rule.join("─┼─"), self.theme.border);
                self.lines.extend(wrap(&self.prefixes, &self.prefixes, vec![rule], self.width));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::theme::ThemeName;

    fn plain(markdown: &str, width: usize) -> Vec<String> {
        let theme = Theme::named(ThemeName::Dark);
        render(markdown, width, &theme)
            .iter()
            .map(|line| line.spans.iter().map(|span| span.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn blocks_render_with_their_markers() {
        let lines = plain("# Title\n\nSome *text*.\n\n- one\n- two\n\n1. first\n2. second\n\n> quoted\n", 40);
        assert_eq!(
            lines,
            vec!["# Title", "", "Some text.", "", "• one", "• two", "", "1. first", "2. second", "", "▎ quoted"]
        );
    }

    #[test]
    fn an_unfinished_code_block_renders_while_it_streams() {
        let lines = plain("```rust\nfn main() {\n", 40);
        assert_eq!(lines, vec!["╭ rust", "│ fn main() {"]);
    }

    #[test]
    fn tables_align_their_columns() {
        let lines = plain("| a | bb |\n|---|---|\n| ccc | d |\n", 40);
        assert_eq!(lines, vec!["a   │ bb", "────┼───", "ccc │ d "]);
    }
}
