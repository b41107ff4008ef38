//! Text transformations for mail bodies: HTML to plain text (inbound HTML-only mail),
//! plain text to HTML (the HTML half of replies), dropping quoted reply history, and
//! sizes for notes. HTML is read by core's one HTML reader.

#[cfg(test)]
use squidbot_core::html::entities::decode_strict as decode_entities;
use squidbot_core::html::{self, Layout, QuoteMarks};

/// Converts an HTML body to plain text: tags removed, entities decoded, block
/// elements as line breaks, list items as `- ` lines, `<blockquote>` content as `> `
/// lines (so quoted history is recognised like in plain text), links as `text (url)`
/// when the URL is not the text itself. Scripts, styles and comments are dropped.
/// Nothing is ever interpreted as markup in the result.
pub(crate) fn html_to_text(html: &str) -> String {
    html::to_plain(html, Layout::Blocks { quotes: QuoteMarks::Prefixed })
}

/// Drops the quoted history at the end of a reply: the trailing lines that start with
/// `>` (and blank lines among them), then an attribution line above them (`On <date>,
/// <someone> wrote:`, possibly wrapped over two lines). Quotes inside the text (inline
/// answers) stay. A message that is nothing but a quote is kept whole.
pub(crate) fn strip_quoted_reply(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut end = lines.len();
    let is_blank = |line: &str| line.trim().is_empty();
    while end > 0 && (is_blank(lines[end - 1]) || lines[end - 1].trim_start().starts_with('>')) {
        end -= 1;
    }
    let last = lines[..end].last().map(|line| line.trim());
    if let Some(last) = last
        && last.ends_with("wrote:")
    {
        if last.starts_with("On ") {
            end -= 1;
        } else if end >= 2 && lines[end - 2].trim_start().starts_with("On ") {
            end -= 2;
        }
    }
    let kept = lines[..end].join("\n");
    let kept = kept.trim();
    if kept.is_empty() { text.trim().to_owned() } else { kept.to_owned() }
}

/// The HTML half of a reply: the plain text escaped, blank lines as paragraphs, other
/// line breaks as `<br>`.
pub(crate) fn text_to_html(text: &str) -> String {
    let mut html = String::from("<!DOCTYPE html>\n<html><body>\n");
    let normalized = text.replace("\r\n", "\n");
    for paragraph in normalized.split("\n\n").map(|paragraph| paragraph.trim_matches('\n')) {
        if paragraph.trim().is_empty() {
            continue;
        }
        let lines: Vec<String> = paragraph.lines().map(escape_html).collect();
        html.push_str("<p>");
        html.push_str(&lines.join("<br>\n"));
        html.push_str("</p>\n");
    }
    html.push_str("</body></html>\n");
    html
}

fn escape_html(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}

/// A size for people: `512 bytes`, `20 KB`, `25.3 MB` (binary units).
pub(crate) fn format_size(bytes: u64) -> String {
    const KILOBYTE: u64 = 1024;
    const MEGABYTE: u64 = 1024 * 1024;
    let (unit, name) = match bytes {
        0..KILOBYTE => return format!("{bytes} bytes"),
        KILOBYTE..MEGABYTE => (KILOBYTE, "KB"),
        _ => (MEGABYTE, "MB"),
    };
    let tenths = (bytes * 10).div_ceil(unit);
    if tenths % 10 == 0 { format!("{} {name}", tenths / 10) } else { format!("{}.{} {name}", tenths / 10, tenths % 10) }
}

#[cfg(test)]
mod tests;
