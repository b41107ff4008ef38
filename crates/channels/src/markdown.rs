//! Rendering the model's Markdown to each chat platform's text format.
//!
//! The model writes Markdown, read as CommonMark with GFM tables and strikethrough
//! (`pulldown-cmark`; raw HTML stays text); platforms each speak their own dialect:
//!
//! - **Telegram** (`parse_mode` HTML): `<b>`, `<i>`, `<s>`, `<code>`, `<pre>` (with
//!   `<code class="language-…">`), `<a href>`, `<blockquote>`; newlines are line breaks;
//!   `<`, `>` and `&` outside tags must be entities. No headings or lists: headings
//!   become bold lines, list items `•`/`1.` lines. Block quotes can't nest and, to stay
//!   within the entity nesting rules, hold no `<pre>`; links hold no `<code>`.
//! - **Slack** (mrkdwn): `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ```` ``` ````
//!   blocks (no language), `<url|text>` links, `>` quotes; `&`, `<`, `>` must be
//!   entities. No headings or lists (bold lines, `•` lines). mrkdwn has no escape for
//!   `*`, `_` and `~`; they only format at word boundaries, so literal ones mostly show
//!   as written.
//! - **Discord** (its Markdown): `**bold**`, `*italic*`, `~~strike~~`, code spans and
//!   fenced blocks with a language, `[text](url)`, `#`–`###` headings, lists, `>`
//!   quotes; literal markup characters are backslash-escaped. Mentions are the adapter's
//!   business (`allowed_mentions`), not the renderer's.
//! - **Matrix** (`org.matrix.custom.html`): tags from the spec's recommended set
//!   (`strong`, `em`, `del`, `code`, `pre`, `a`, `h1`–`h6`, `ul`/`ol`/`li`,
//!   `blockquote`, `p`, `br`, `hr`, `table`), `<pre><code class="language-…">` for
//!   code, every text character that HTML treats specially escaped.
//! - **Plain text**: the text without markup (links as `text (url)`), for email and
//!   for Matrix's `body` fallback.
//!
//! Tables are real `<table>`s in Matrix; elsewhere their cells become aligned columns of
//! plain text, in a code block where the platform has one (Telegram `<pre>`, Slack and
//! Discord fences) so a monospaced font keeps them aligned.
//!
//! Text inside code spans and blocks is never interpreted, only escaped as the format
//! requires. Links go out only for `http`, `https` and `mailto` URLs; others become
//! `text (url)` so no `javascript:` link is ever made clickable.

mod parse;
mod render;

/// A platform's text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MarkdownFlavor {
    /// Telegram Bot API with `parse_mode` `HTML`.
    TelegramHtml,
    /// Slack's mrkdwn.
    SlackMrkdwn,
    /// Discord's Markdown.
    DiscordMarkdown,
    /// Matrix `formatted_body` with `format` `org.matrix.custom.html`.
    MatrixHtml,
    /// Plain text without markup.
    PlainText,
}

/// Renders the model's Markdown `text` in `flavor`.
///
/// Unbalanced or unknown markup stays literal (escaped as the format requires), so the
/// result is always accepted by the platform's parser.
pub fn render(text: &str, flavor: MarkdownFlavor) -> String {
    render::render_blocks(&parse::parse(text), flavor)
}

#[cfg(test)]
mod tests;
