//! Text transformations for mail bodies: HTML to plain text (inbound HTML-only mail),
//! plain text to HTML (the HTML half of replies), dropping quoted reply history, and
//! sizes for notes.

/// Elements whose content is never text (scripts, styles, the document head).
const SKIPPED_ELEMENTS: [&str; 5] = ["script", "style", "head", "template", "noscript"];

/// Converts an HTML body to plain text: tags removed, entities decoded, block
/// elements as line breaks, list items as `- ` lines, `<blockquote>` content as `> `
/// lines (so quoted history is recognised like in plain text), links as `text (url)`
/// when the URL is not the text itself. Scripts, styles and comments are dropped.
/// Nothing is ever interpreted as markup in the result.
pub(crate) fn html_to_text(html: &str) -> String {
    let mut output = TextOutput::default();
    let mut rest = html;
    let mut link: Option<String> = None;
    let mut link_text_start = 0;
    let mut preformatted = 0usize;
    while let Some(position) = rest.find('<') {
        let (text, tag_and_after) = rest.split_at(position);
        output.push_text(&decode_entities(text), preformatted > 0);
        if let Some(comment) = tag_and_after.strip_prefix("<!--") {
            rest = comment.find("-->").map_or("", |end| &comment[end + 3..]);
            continue;
        }
        let Some(tag_end) = find_tag_end(tag_and_after) else {
            // A lone `<` that opens no tag is text.
            output.push_text("<", preformatted > 0);
            rest = &tag_and_after[1..];
            continue;
        };
        let tag = Tag::parse(&tag_and_after[1..tag_end]);
        rest = &tag_and_after[tag_end + 1..];
        if !tag.closing && SKIPPED_ELEMENTS.contains(&tag.name.as_str()) {
            rest = skip_element(rest, &tag.name);
            continue;
        }
        match (tag.name.as_str(), tag.closing) {
            ("br", _) => output.line_break(),
            ("p" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "table" | "ul" | "ol", _) => {
                output.paragraph_break();
            }
            ("div" | "tr" | "hr" | "section" | "article" | "header" | "footer", _) => output.end_line(),
            ("li", false) => {
                output.end_line();
                output.push_text("- ", true);
            }
            ("li", true) => output.end_line(),
            ("td" | "th", true) => output.push_text(" ", false),
            ("blockquote", false) => {
                output.paragraph_break();
                output.quote_depth += 1;
            }
            ("blockquote", true) => {
                output.quote_depth = output.quote_depth.saturating_sub(1);
                output.paragraph_break();
            }
            ("pre", false) => {
                output.paragraph_break();
                preformatted += 1;
            }
            ("pre", true) => {
                preformatted = preformatted.saturating_sub(1);
                output.paragraph_break();
            }
            ("a", false) => {
                link = tag.href.filter(|href| is_shown_link(href));
                link_text_start = output.text.len();
            }
            ("a", true) => {
                if let Some(href) = link.take() {
                    let link_text = output.text.get(link_text_start..).unwrap_or_default().trim();
                    let bare = href.strip_prefix("mailto:").unwrap_or(&href);
                    if link_text != href && link_text != bare {
                        output.push_text(&format!(" ({href})"), true);
                    }
                }
            }
            _ => {}
        }
    }
    output.push_text(&decode_entities(rest), preformatted > 0);
    output.finish()
}

/// Where the `>` closing the tag at the start of `tag` is, skipping quoted attribute
/// values (which may hold `>`). `None` when `tag` does not start a tag.
fn find_tag_end(tag: &str) -> Option<usize> {
    let after = tag.as_bytes().get(1)?;
    if !(after.is_ascii_alphabetic() || *after == b'/' || *after == b'!' || *after == b'?') {
        return None;
    }
    let mut quote = None;
    for (index, character) in tag.char_indices().skip(1) {
        match (quote, character) {
            (None, '"' | '\'') => quote = Some(character),
            (Some(open), _) if open == character => quote = None,
            (None, '>') => return Some(index),
            _ => {}
        }
    }
    None
}

/// Skips past the end of an element whose content is dropped (`</script>`).
fn skip_element<'a>(html: &'a str, name: &str) -> &'a str {
    let closing = format!("</{name}");
    let lowered = html.to_ascii_lowercase();
    match lowered.find(&closing) {
        Some(start) => html[start..].find('>').map_or("", |end| &html[start + end + 1..]),
        None => "",
    }
}

fn is_shown_link(href: &str) -> bool {
    let lowered = href.to_ascii_lowercase();
    lowered.starts_with("http://") || lowered.starts_with("https://") || lowered.starts_with("mailto:")
}

/// The parts of a tag that matter for text: its name, whether it closes, its `href`.
struct Tag {
    name: String,
    closing: bool,
    href: Option<String>,
}

impl Tag {
    fn parse(inside: &str) -> Self {
        let closing = inside.starts_with('/');
        let inside = inside.trim_start_matches('/');
        let name_end =
            inside.find(|character: char| character.is_whitespace() || character == '/').unwrap_or(inside.len());
        let name = inside[..name_end].to_ascii_lowercase();
        let href = if name == "a" {
            attribute(&inside[name_end..], "href").map(|value| decode_entities(&value))
        } else {
            None
        };
        Self { name, closing, href }
    }
}

/// The value of attribute `name` in a tag's attribute text.
fn attribute(attributes: &str, name: &str) -> Option<String> {
    let lowered = attributes.to_ascii_lowercase();
    let mut search_from = 0;
    while let Some(found) = lowered[search_from..].find(name) {
        let start = search_from + found;
        search_from = start + name.len();
        let preceded_by_space = start == 0 || lowered[..start].ends_with(|character: char| character.is_whitespace());
        let after = lowered[search_from..].trim_start();
        if !preceded_by_space || !after.starts_with('=') {
            continue;
        }
        let value_start = attributes.len() - after.len() + 1;
        let value = attributes[value_start..].trim_start();
        return Some(match value.chars().next() {
            Some(quote @ ('"' | '\'')) => value[1..].split(quote).next().unwrap_or_default().to_owned(),
            _ => value.split(|character: char| character.is_whitespace()).next().unwrap_or_default().to_owned(),
        });
    }
    None
}

/// Decodes HTML character references; unknown or malformed ones stay as written.
pub(crate) fn decode_entities(text: &str) -> String {
    let mut decoded = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(position) = rest.find('&') {
        decoded.push_str(&rest[..position]);
        rest = &rest[position..];
        let reference = rest[1..].find(';').filter(|end| *end <= 10).map(|end| &rest[1..=end]);
        match reference.and_then(squidbot_channels::html_entity) {
            Some(character) => {
                decoded.push(character);
                rest = &rest[reference.map_or(1, |reference| reference.len() + 2)..];
            }
            None => {
                decoded.push('&');
                rest = &rest[1..];
            }
        }
    }
    decoded.push_str(rest);
    decoded
}

/// Builds the text of [`html_to_text`]: collapses whitespace, prefixes quoted lines.
#[derive(Default)]
struct TextOutput {
    text: String,
    quote_depth: usize,
    pending_space: bool,
    at_line_start: bool,
}

impl TextOutput {
    fn push_text(&mut self, text: &str, preformatted: bool) {
        for character in text.chars() {
            if preformatted && character == '\n' {
                self.line_break();
            } else if !preformatted && character.is_whitespace() {
                self.pending_space = !self.text.is_empty() && !self.at_line_start;
            } else {
                self.push_character(character);
            }
        }
    }

    fn push_character(&mut self, character: char) {
        if self.at_line_start || self.text.is_empty() {
            for _ in 0..self.quote_depth {
                self.text.push_str("> ");
            }
            self.at_line_start = false;
        } else if self.pending_space {
            self.text.push(' ');
        }
        self.pending_space = false;
        self.text.push(character);
    }

    fn line_break(&mut self) {
        self.text.push('\n');
        self.at_line_start = true;
        self.pending_space = false;
    }

    /// Ends the current line unless nothing is on it yet (block boundaries; `<br>`
    /// always breaks).
    fn end_line(&mut self) {
        if !self.text.is_empty() && !self.at_line_start {
            self.line_break();
        }
    }

    fn paragraph_break(&mut self) {
        if self.text.is_empty() {
            return;
        }
        while !self.text.ends_with("\n\n") {
            self.text.push('\n');
        }
        self.at_line_start = true;
        self.pending_space = false;
    }

    fn finish(self) -> String {
        let mut lines: Vec<&str> = Vec::new();
        for line in self.text.lines().map(str::trim_end) {
            let blank = line.trim().is_empty();
            if blank && lines.last().is_none_or(|last| last.is_empty()) {
                continue;
            }
            lines.push(if blank { "" } else { line });
        }
        lines.join("\n").trim().to_owned()
    }
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
