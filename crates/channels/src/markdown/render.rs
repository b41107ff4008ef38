//! Writing the parsed Markdown tree in each platform's format, with the escaping each
//! one requires.

mod table;

use crate::markdown::MarkdownFlavor;
use crate::markdown::parse::{Block, Inline, Table};

/// Where in the document rendering is, for the rules that depend on it.
#[derive(Debug, Clone, Copy, Default)]
struct Context {
    /// Inside a block quote (Telegram quotes can't nest or hold `<pre>`).
    in_quote: bool,
    /// Inside link text (Telegram links can't hold `<code>`; Slack labels are plain).
    in_link: bool,
    /// How many lists enclose this one (picks the bullet).
    list_depth: usize,
}

/// Renders parsed blocks in `flavor`.
pub(crate) fn render_blocks(blocks: &[Block], flavor: MarkdownFlavor) -> String {
    let renderer = Renderer { flavor };
    let context = Context::default();
    // A one-paragraph Matrix message needs no `<p>`, as Matrix clients send it.
    if let (MarkdownFlavor::MatrixHtml, [Block::Paragraph(inlines)]) = (flavor, blocks) {
        return renderer.inlines(inlines, context);
    }
    renderer.blocks(blocks, context, renderer.block_separator())
}

struct Renderer {
    flavor: MarkdownFlavor,
}

impl Renderer {
    fn block_separator(&self) -> &'static str {
        match self.flavor {
            MarkdownFlavor::MatrixHtml => "\n",
            MarkdownFlavor::TelegramHtml
            | MarkdownFlavor::SlackMrkdwn
            | MarkdownFlavor::DiscordMarkdown
            | MarkdownFlavor::PlainText => "\n\n",
        }
    }

    fn blocks(&self, blocks: &[Block], context: Context, separator: &str) -> String {
        let rendered: Vec<String> =
            blocks.iter().map(|block| self.block(block, context)).filter(|block| !block.is_empty()).collect();
        rendered.join(separator)
    }

    fn block(&self, block: &Block, context: Context) -> String {
        match block {
            Block::Paragraph(inlines) => {
                let content = self.inlines(inlines, context);
                match self.flavor {
                    MarkdownFlavor::MatrixHtml => format!("<p>{content}</p>"),
                    MarkdownFlavor::DiscordMarkdown => escape_discord_line_starts(&content),
                    MarkdownFlavor::TelegramHtml | MarkdownFlavor::SlackMrkdwn | MarkdownFlavor::PlainText => content,
                }
            }
            Block::Heading { level, content } => {
                let content = self.inlines(content, context);
                match self.flavor {
                    MarkdownFlavor::TelegramHtml => format!("<b>{content}</b>"),
                    MarkdownFlavor::SlackMrkdwn => format!("*{content}*"),
                    MarkdownFlavor::DiscordMarkdown if *level <= 3 => {
                        format!("{} {content}", "#".repeat(usize::from(*level)))
                    }
                    MarkdownFlavor::DiscordMarkdown => format!("**{content}**"),
                    MarkdownFlavor::MatrixHtml => format!("<h{level}>{content}</h{level}>"),
                    MarkdownFlavor::PlainText => content,
                }
            }
            Block::Code { language, text } => self.code_block(language.as_deref(), text, context),
            Block::Quote(inner) => self.quote(inner, context),
            Block::List { start, items } => self.list(*start, items, context),
            Block::Table(table) => self.table(table, context),
            Block::Rule => match self.flavor {
                MarkdownFlavor::MatrixHtml => "<hr>".to_owned(),
                MarkdownFlavor::PlainText => "---".to_owned(),
                MarkdownFlavor::TelegramHtml | MarkdownFlavor::SlackMrkdwn | MarkdownFlavor::DiscordMarkdown => {
                    "———".to_owned()
                }
            },
        }
    }

    fn code_block(&self, language: Option<&str>, text: &str, context: Context) -> String {
        match (self.flavor, language) {
            (MarkdownFlavor::TelegramHtml, _) if context.in_quote => escape_html(text),
            (MarkdownFlavor::TelegramHtml | MarkdownFlavor::MatrixHtml, Some(language)) => {
                format!("<pre><code class=\"language-{language}\">{}</code></pre>", self.escape_code(text))
            }
            (MarkdownFlavor::TelegramHtml, None) => format!("<pre>{}</pre>", escape_html(text)),
            (MarkdownFlavor::MatrixHtml, None) => format!("<pre><code>{}</code></pre>", escape_html_full(text)),
            (MarkdownFlavor::SlackMrkdwn, _) => format!("```\n{}\n```", escape_slack(text)),
            (MarkdownFlavor::DiscordMarkdown, language) => {
                // A fence inside the code would end the block early; a zero-width space
                // keeps it visible as written.
                let text = text.replace("```", "`\u{200B}``");
                format!("```{}\n{text}\n```", language.unwrap_or_default())
            }
            (MarkdownFlavor::PlainText, _) => text.to_owned(),
        }
    }

    /// A table: real HTML for Matrix, aligned columns in a code block elsewhere (in
    /// plain text and inside Telegram quotes, which can't hold `<pre>`, without one).
    fn table(&self, table: &Table, context: Context) -> String {
        if self.flavor == MarkdownFlavor::MatrixHtml {
            return table::html(table, &|cell| self.inlines(cell, context));
        }
        let text = table::aligned_text(table);
        match self.flavor {
            MarkdownFlavor::TelegramHtml if context.in_quote => escape_html(&text),
            MarkdownFlavor::TelegramHtml => format!("<pre>{}</pre>", escape_html(&text)),
            MarkdownFlavor::SlackMrkdwn => format!("```\n{}\n```", escape_slack(&text)),
            MarkdownFlavor::DiscordMarkdown => format!("```\n{}\n```", text.replace("```", "`\u{200B}``")),
            MarkdownFlavor::PlainText | MarkdownFlavor::MatrixHtml => text,
        }
    }

    fn escape_code(&self, text: &str) -> String {
        match self.flavor {
            MarkdownFlavor::MatrixHtml => escape_html_full(text),
            MarkdownFlavor::TelegramHtml
            | MarkdownFlavor::SlackMrkdwn
            | MarkdownFlavor::DiscordMarkdown
            | MarkdownFlavor::PlainText => escape_html(text),
        }
    }

    fn quote(&self, inner: &[Block], context: Context) -> String {
        let inner_context = Context { in_quote: true, ..context };
        match self.flavor {
            // Telegram quotes can't nest: an inner quote is just its text.
            MarkdownFlavor::TelegramHtml if context.in_quote => self.blocks(inner, inner_context, "\n\n"),
            MarkdownFlavor::TelegramHtml => {
                format!("<blockquote>{}</blockquote>", self.blocks(inner, inner_context, "\n\n"))
            }
            MarkdownFlavor::MatrixHtml => {
                format!("<blockquote>\n{}\n</blockquote>", self.blocks(inner, inner_context, "\n"))
            }
            MarkdownFlavor::SlackMrkdwn | MarkdownFlavor::DiscordMarkdown | MarkdownFlavor::PlainText => {
                let text = self.blocks(inner, inner_context, "\n\n");
                text.split('\n')
                    .map(|line| if line.is_empty() { ">".to_owned() } else { format!("> {line}") })
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
    }

    fn list(&self, start: Option<u64>, items: &[Vec<Block>], context: Context) -> String {
        let item_context = Context { list_depth: context.list_depth + 1, ..context };
        if self.flavor == MarkdownFlavor::MatrixHtml {
            let items: Vec<String> =
                items.iter().map(|item| format!("<li>{}</li>", self.matrix_item(item, item_context))).collect();
            return match start {
                None => format!("<ul>\n{}\n</ul>", items.join("\n")),
                Some(1) => format!("<ol>\n{}\n</ol>", items.join("\n")),
                Some(start) => format!("<ol start=\"{start}\">\n{}\n</ol>", items.join("\n")),
            };
        }
        let bullet = match self.flavor {
            MarkdownFlavor::TelegramHtml | MarkdownFlavor::SlackMrkdwn => {
                ["•", "◦", "▪"].get(context.list_depth % 3).copied().unwrap_or("•")
            }
            MarkdownFlavor::DiscordMarkdown | MarkdownFlavor::PlainText | MarkdownFlavor::MatrixHtml => "-",
        };
        let mut lines = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let marker = match start {
                Some(start) => format!("{}.", start.saturating_add(u64::try_from(index).unwrap_or(u64::MAX))),
                None => bullet.to_owned(),
            };
            let indent = " ".repeat(marker.chars().count() + 1);
            let mut body_lines = Vec::new();
            for block in item {
                // Telegram and Slack would show a code block's indentation as code.
                let indented = !(matches!(block, Block::Code { .. } | Block::Table(_))
                    && matches!(self.flavor, MarkdownFlavor::TelegramHtml | MarkdownFlavor::SlackMrkdwn));
                let rendered = self.block(block, item_context);
                if !rendered.is_empty() {
                    body_lines.extend(rendered.split('\n').map(|line| (line.to_owned(), indented)));
                }
            }
            let mut body_lines = body_lines.into_iter();
            let first = body_lines.next().map(|(line, _)| line).unwrap_or_default();
            lines.push(format!("{marker} {first}").trim_end().to_owned());
            lines.extend(body_lines.map(
                |(line, indented)| {
                    if line.is_empty() || !indented { line } else { format!("{indent}{line}") }
                },
            ));
        }
        lines.join("\n")
    }

    /// A Matrix list item: a lone paragraph goes in without `<p>` (a tight item).
    fn matrix_item(&self, item: &[Block], context: Context) -> String {
        let paragraphs = item.iter().filter(|block| matches!(block, Block::Paragraph(_))).count();
        let parts: Vec<String> = item
            .iter()
            .map(|block| match block {
                Block::Paragraph(inlines) if paragraphs <= 1 => self.inlines(inlines, context),
                other => self.block(other, context),
            })
            .collect();
        parts.join("\n")
    }

    fn inlines(&self, inlines: &[Inline], context: Context) -> String {
        inlines.iter().map(|inline| self.inline(inline, context)).collect()
    }

    fn inline(&self, inline: &Inline, context: Context) -> String {
        match inline {
            Inline::Text(text) => self.escape_text(text, context),
            Inline::Code(code) => match self.flavor {
                MarkdownFlavor::TelegramHtml if context.in_link => escape_html(code),
                MarkdownFlavor::TelegramHtml => format!("<code>{}</code>", escape_html(code)),
                MarkdownFlavor::SlackMrkdwn if context.in_link => escape_slack(code),
                MarkdownFlavor::SlackMrkdwn => format!("`{}`", escape_slack(code)),
                MarkdownFlavor::DiscordMarkdown if code.contains('`') => format!("`` {code} ``"),
                MarkdownFlavor::DiscordMarkdown => format!("`{code}`"),
                MarkdownFlavor::MatrixHtml => format!("<code>{}</code>", escape_html_full(code)),
                MarkdownFlavor::PlainText => code.clone(),
            },
            Inline::Strong(children) => {
                let (open, close) = match self.flavor {
                    MarkdownFlavor::TelegramHtml => ("<b>", "</b>"),
                    MarkdownFlavor::SlackMrkdwn => ("*", "*"),
                    MarkdownFlavor::DiscordMarkdown => ("**", "**"),
                    MarkdownFlavor::MatrixHtml => ("<strong>", "</strong>"),
                    MarkdownFlavor::PlainText => ("", ""),
                };
                self.span(children, context, open, close)
            }
            Inline::Emphasis(children) => {
                let (open, close) = match self.flavor {
                    MarkdownFlavor::TelegramHtml => ("<i>", "</i>"),
                    MarkdownFlavor::SlackMrkdwn => ("_", "_"),
                    MarkdownFlavor::DiscordMarkdown => ("*", "*"),
                    MarkdownFlavor::MatrixHtml => ("<em>", "</em>"),
                    MarkdownFlavor::PlainText => ("", ""),
                };
                self.span(children, context, open, close)
            }
            Inline::Strike(children) => {
                let (open, close) = match self.flavor {
                    MarkdownFlavor::TelegramHtml => ("<s>", "</s>"),
                    MarkdownFlavor::SlackMrkdwn => ("~", "~"),
                    MarkdownFlavor::DiscordMarkdown => ("~~", "~~"),
                    MarkdownFlavor::MatrixHtml => ("<del>", "</del>"),
                    MarkdownFlavor::PlainText => ("", ""),
                };
                self.span(children, context, open, close)
            }
            Inline::Link { content, url } => self.link(content, url, context),
        }
    }

    fn span(&self, children: &[Inline], context: Context, open: &str, close: &str) -> String {
        let content = self.inlines(children, context);
        if self.flavor == MarkdownFlavor::SlackMrkdwn && context.in_link {
            return content;
        }
        format!("{open}{content}{close}")
    }

    fn link(&self, content: &[Inline], url: &str, context: Context) -> String {
        let url = url.replace(' ', "%20");
        let link_context = Context { in_link: true, ..context };
        if !is_linkable(&url) {
            return format!("{} ({})", self.inlines(content, context), self.escape_text(&url, context));
        }
        match self.flavor {
            MarkdownFlavor::TelegramHtml => {
                format!("<a href=\"{}\">{}</a>", escape_attribute(&url), self.inlines(content, link_context))
            }
            MarkdownFlavor::MatrixHtml => {
                format!("<a href=\"{}\">{}</a>", escape_html_full(&url), self.inlines(content, link_context))
            }
            MarkdownFlavor::SlackMrkdwn => {
                let target = slack_url(&url);
                let label = self.inlines(content, link_context);
                if label.is_empty() || label == escape_slack(&url) {
                    format!("<{target}>")
                } else {
                    format!("<{target}|{label}>")
                }
            }
            MarkdownFlavor::DiscordMarkdown => {
                format!("[{}]({})", self.inlines(content, link_context), discord_url(&url))
            }
            MarkdownFlavor::PlainText => {
                let label = self.inlines(content, link_context);
                if label.is_empty() || label == url { url } else { format!("{label} ({url})") }
            }
        }
    }

    fn escape_text(&self, text: &str, context: Context) -> String {
        match self.flavor {
            MarkdownFlavor::TelegramHtml => escape_html(text),
            MarkdownFlavor::SlackMrkdwn => escape_slack(text),
            MarkdownFlavor::DiscordMarkdown => escape_discord(text, context.in_link),
            MarkdownFlavor::MatrixHtml => escape_html_full(text).replace('\n', "<br>"),
            MarkdownFlavor::PlainText => text.to_owned(),
        }
    }
}

/// Whether a URL may become a clickable link.
fn is_linkable(url: &str) -> bool {
    let lowercase = url.to_ascii_lowercase();
    ["http://", "https://", "mailto:"].iter().any(|scheme| lowercase.starts_with(scheme))
        && !url.chars().any(char::is_control)
}

fn escape_with(text: &str, replace: impl Fn(char) -> Option<&'static str>) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match replace(character) {
            Some(entity) => escaped.push_str(entity),
            None => escaped.push(character),
        }
    }
    escaped
}

/// Telegram's rule: `<`, `>` and `&` outside tags are entities.
fn escape_html(text: &str) -> String {
    escape_with(text, |character| match character {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        _ => None,
    })
}

/// An attribute value in double quotes (Telegram knows `&quot;`).
fn escape_attribute(text: &str) -> String {
    escape_with(text, |character| match character {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '"' => Some("&quot;"),
        _ => None,
    })
}

/// Matrix HTML: everything HTML treats specially, in text and attributes alike.
fn escape_html_full(text: &str) -> String {
    escape_with(text, |character| match character {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '"' => Some("&quot;"),
        '\'' => Some("&#39;"),
        _ => None,
    })
}

/// Slack's control characters `&`, `<` and `>` become entities (and nothing else).
fn escape_slack(text: &str) -> String {
    escape_html(text)
}

/// A URL inside `<…|…>`: `|` and `>` would end it early.
fn slack_url(url: &str) -> String {
    escape_with(url, |character| match character {
        '&' => Some("&amp;"),
        '<' => Some("%3C"),
        '>' => Some("%3E"),
        '|' => Some("%7C"),
        _ => None,
    })
}

/// A URL inside `(…)`: parentheses and angle brackets would confuse the parser.
fn discord_url(url: &str) -> String {
    escape_with(url, |character| match character {
        '(' => Some("%28"),
        ')' => Some("%29"),
        '<' => Some("%3C"),
        '>' => Some("%3E"),
        _ => None,
    })
}

/// Discord markup characters in text get a backslash so they show as written.
fn escape_discord(text: &str, in_link: bool) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        if matches!(character, '\\' | '*' | '_' | '~' | '`' | '|') || (in_link && matches!(character, '[' | ']')) {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

/// A paragraph line that would read as a heading, quote or list item in Discord gets
/// its first character escaped.
fn escape_discord_line_starts(paragraph: &str) -> String {
    let lines: Vec<String> = paragraph
        .split('\n')
        .map(|line| {
            let digits = line.chars().take_while(char::is_ascii_digit).count();
            if line.starts_with(['#', '>']) || line.starts_with("- ") || line.starts_with("+ ") {
                format!("\\{line}")
            } else if digits > 0 && line.get(digits..).is_some_and(|rest| rest.starts_with(". ")) {
                format!("{}\\{}", line.get(..digits).unwrap_or_default(), line.get(digits..).unwrap_or_default())
            } else {
                line.to_owned()
            }
        })
        .collect();
    lines.join("\n")
}
