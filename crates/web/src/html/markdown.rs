//! Pages to Markdown and snippets to text through core's HTML reader; what is web-only
//! here is resolving a link against the page's address.

use reqwest::Url;

use squidbot_core::html::{self, Layout, QuoteMarks};

pub use squidbot_core::html::{Document, collapse_whitespace};

/// Converts `html`; relative links are resolved against `base`.
pub fn to_markdown(html: &str, base: Option<&Url>) -> Document {
    let resolve = |href: &str| {
        let url = match base {
            Some(base) => base.join(href).ok()?,
            None => Url::parse(href).ok()?,
        };
        Some(url.to_string())
    };
    html::to_markdown(html, &resolve)
}

/// Plain text of an HTML fragment (a search snippet): tags dropped, references decoded,
/// whitespace collapsed into one line.
pub fn to_text(fragment: &str) -> String {
    collapse_whitespace(&html::to_plain(fragment, Layout::Blocks { quotes: QuoteMarks::Dropped }))
}

#[cfg(test)]
mod tests;
