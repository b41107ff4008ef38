//! HTML reading for the web tools: a forgiving tokenizer and the conversion of pages to
//! Markdown and of snippets to plain text (character references decode through core's
//! [`squidbot_core::html_entities`]).
//!
//! Hand-written rather than a crate: the HTML-to-text crates sit on a full HTML5 parser
//! whose generated tables and build-time code generation cost more compile time on two
//! cores than this whole crate, and reading pages for a model needs none of its tree
//! fidelity.

pub mod markdown;
pub mod tokenizer;

pub use markdown::{Document, collapse_whitespace, to_markdown, to_text};
