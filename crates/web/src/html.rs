//! HTML reading for the web tools, on core's one HTML reader ([`squidbot_core::html`]):
//! pages to Markdown with links resolved against the page's address, snippets to one
//! line of plain text.

pub mod markdown;

pub use markdown::{Document, collapse_whitespace, to_markdown, to_text};
