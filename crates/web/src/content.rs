//! What a fetched body is and how it becomes text: the declared content type decides,
//! the bytes get the last word (a "text" body full of NULs is binary whatever it claims).

use squidbot_core::html_entities::windows_1252_c1;

/// Bytes looked at to judge whether a body is binary.
const SNIFF_BYTES: usize = 8192;

/// How a textual body is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Converted to Markdown.
    Html,
    /// Passed through.
    Json,
    /// Passed through.
    Text,
}

/// A body's type, from its `Content-Type` header and its first bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// How to render it.
    pub kind: Kind,
    /// The media type shown to the model (`text/html`), or `unknown`.
    pub media_type: String,
    /// The character set to decode with.
    pub charset: Charset,
}

/// Character sets decoded without an encoding library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Charset {
    /// UTF-8 (also the fallback when nothing is declared; ASCII is a subset).
    Utf8,
    /// ISO-8859-1, which browsers read as Windows-1252.
    Windows1252,
    /// Anything else, decoded as UTF-8 with a warning.
    Unsupported(String),
}

/// Why a body is not shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotText {
    /// The server says it is binary (`image/png`, `application/pdf` …).
    DeclaredBinary(String),
    /// It claims to be text (or says nothing) but its bytes are binary.
    LooksBinary(String),
}

/// Sorts a body by `content_type` (the header's value, if any) and its bytes.
pub fn classify(content_type: Option<&str>, body: &[u8]) -> Result<Classified, NotText> {
    let (media_type, declared_charset) = parse_content_type(content_type.unwrap_or(""));
    let kind = match media_type.as_str() {
        "text/html" | "application/xhtml+xml" => Some(Kind::Html),
        "application/json" | "text/json" => Some(Kind::Json),
        other if other.ends_with("+json") => Some(Kind::Json),
        other if other.starts_with("text/") || other.ends_with("+xml") => Some(Kind::Text),
        "application/xml"
        | "application/javascript"
        | "application/x-javascript"
        | "application/ecmascript"
        | "application/x-sh"
        | "application/toml"
        | "application/yaml"
        | "application/x-yaml"
        | "application/sql"
        | "application/graphql"
        | "application/x-ndjson"
        | "application/csv" => Some(Kind::Text),
        // Nothing useful declared: the bytes decide.
        "" | "application/octet-stream" | "binary/octet-stream" | "application/unknown" => None,
        other => return Err(NotText::DeclaredBinary(other.to_owned())),
    };
    let shown_type = if media_type.is_empty() { "unknown".to_owned() } else { media_type.clone() };
    let charset = match declared_charset.or_else(|| sniff_meta_charset(body)) {
        Some(label) => charset_from_label(&label),
        None => Charset::Utf8,
    };
    let sample = strip_bom(&body[..body.len().min(SNIFF_BYTES)]);
    if looks_binary(sample, &charset, body.len() > SNIFF_BYTES) {
        return Err(NotText::LooksBinary(shown_type));
    }
    let kind = kind.unwrap_or_else(|| sniff_kind(sample));
    Ok(Classified { kind, media_type: shown_type, charset })
}

/// `text/html; charset="UTF-8"` → (`text/html`, `Some("utf-8")`).
fn parse_content_type(value: &str) -> (String, Option<String>) {
    let mut parts = value.split(';');
    let media_type = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let charset = parts.find_map(|parameter| {
        let (key, value) = parameter.split_once('=')?;
        key.trim().eq_ignore_ascii_case("charset").then(|| value.trim().trim_matches(['"', '\'']).to_ascii_lowercase())
    });
    (media_type, charset.filter(|label| !label.is_empty()))
}

/// The `charset` an HTML page declares in its first kilobytes (`<meta charset=…>` or the
/// `http-equiv` form).
fn sniff_meta_charset(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(2048)]).to_ascii_lowercase();
    let start = head.find("charset=")? + "charset=".len();
    let label: String = head[start..]
        .trim_start_matches(['"', '\''])
        .chars()
        .take_while(|character| character.is_ascii_alphanumeric() || matches!(character, '-' | '_' | ':' | '.'))
        .collect();
    (!label.is_empty()).then_some(label)
}

fn charset_from_label(label: &str) -> Charset {
    match label {
        "utf-8" | "utf8" | "unicode-1-1-utf-8" | "us-ascii" | "ascii" => Charset::Utf8,
        "iso-8859-1" | "iso8859-1" | "latin1" | "l1" | "windows-1252" | "cp1252" | "x-cp1252" => Charset::Windows1252,
        other => Charset::Unsupported(other.to_owned()),
    }
}

fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// NUL bytes, many control characters, or (for UTF-8) many invalid sequences.
fn looks_binary(sample: &[u8], charset: &Charset, cut_short: bool) -> bool {
    if sample.contains(&0) {
        return true;
    }
    let controls =
        sample.iter().filter(|byte| **byte < 0x20 && !matches!(byte, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b)).count();
    if controls * 10 > sample.len() {
        return true;
    }
    if *charset != Charset::Utf8 {
        return false;
    }
    let mut invalid = 0;
    let mut chunks = sample.utf8_chunks().peekable();
    while let Some(chunk) = chunks.next() {
        let is_last = chunks.peek().is_none();
        // A character split by the sniff window's end is not an error.
        if !(is_last && cut_short) {
            invalid += chunk.invalid().len();
        }
    }
    invalid * 20 > sample.len()
}

/// HTML, JSON or text, judged from the first bytes when the server didn't say.
fn sniff_kind(sample: &[u8]) -> Kind {
    let text = String::from_utf8_lossy(&sample[..sample.len().min(512)]);
    let start = text.trim_start().to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") || start.starts_with("<head") {
        Kind::Html
    } else if (start.starts_with('{') || start.starts_with('['))
        && serde_json::from_slice::<serde_json::Value>(sample).is_ok()
    {
        Kind::Json
    } else {
        Kind::Text
    }
}

/// `body` as a string in `charset`.
pub fn decode(body: &[u8], charset: &Charset) -> String {
    let body = strip_bom(body);
    match charset {
        Charset::Utf8 | Charset::Unsupported(_) => String::from_utf8_lossy(body).into_owned(),
        Charset::Windows1252 => body
            .iter()
            .map(|byte| match byte {
                0x80..=0x9f => windows_1252_c1(*byte),
                _ => char::from(*byte),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(content_type: Option<&str>, body: &[u8]) -> Result<Kind, NotText> {
        classify(content_type, body).map(|classified| classified.kind)
    }

    #[test]
    fn declared_types_decide_the_rendering() {
        assert_eq!(kind(Some("text/html; charset=utf-8"), b"<p>hi"), Ok(Kind::Html));
        assert_eq!(kind(Some("application/xhtml+xml"), b"<p>hi"), Ok(Kind::Html));
        assert_eq!(kind(Some("application/json"), b"{}"), Ok(Kind::Json));
        assert_eq!(kind(Some("application/problem+json"), b"{}"), Ok(Kind::Json));
        assert_eq!(kind(Some("text/plain"), b"hi"), Ok(Kind::Text));
        assert_eq!(kind(Some("text/markdown"), b"# hi"), Ok(Kind::Text));
        assert_eq!(kind(Some("application/rss+xml"), b"<rss/>"), Ok(Kind::Text));
        assert_eq!(kind(Some("TEXT/PLAIN"), b"hi"), Ok(Kind::Text));
    }

    #[test]
    fn binary_types_are_refused_without_looking() {
        assert_eq!(kind(Some("image/png"), b"hi"), Err(NotText::DeclaredBinary("image/png".to_owned())));
        assert_eq!(kind(Some("application/pdf"), b"%PDF"), Err(NotText::DeclaredBinary("application/pdf".to_owned())));
        assert!(kind(Some("video/mp4"), b"").is_err());
        assert!(kind(Some("application/zip"), b"PK").is_err());
    }

    #[test]
    fn bodies_that_lie_are_refused() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10";
        assert_eq!(kind(Some("text/html"), png), Err(NotText::LooksBinary("text/html".to_owned())));
        let random: Vec<u8> =
            (0..4096u32).map(|index| (index.wrapping_mul(2_654_435_761) >> 24) as u8 | 0x80).collect();
        assert_eq!(kind(Some("text/plain"), &random), Err(NotText::LooksBinary("text/plain".to_owned())));
        let controls = vec![0x01u8; 100];
        assert!(kind(Some("application/json"), &controls).is_err());
    }

    #[test]
    fn undeclared_types_are_sniffed() {
        assert_eq!(kind(None, b"  <!DOCTYPE html><p>x"), Ok(Kind::Html));
        assert_eq!(kind(Some("application/octet-stream"), br#"{"a": 1}"#), Ok(Kind::Json));
        assert_eq!(kind(None, b"just words"), Ok(Kind::Text));
        assert!(kind(None, b"\x7fELF\x02\x01\x01\0\0\0").is_err());
    }

    #[test]
    fn latin1_pages_decode_and_are_not_mistaken_for_binary() {
        let body = b"caf\xe9 \x93quoted\x94";
        let classified = classify(Some("text/plain; charset=ISO-8859-1"), body);
        let charset = classified.map(|classified| classified.charset);
        assert_eq!(charset, Ok(Charset::Windows1252));
        assert_eq!(decode(body, &Charset::Windows1252), "café “quoted”");
        let meta = b"<html><head><meta charset=\"windows-1252\"></head><body>caf\xe9</body></html>";
        assert_eq!(classify(Some("text/html"), meta).map(|classified| classified.charset), Ok(Charset::Windows1252));
    }

    #[test]
    fn a_character_cut_by_the_sniff_window_is_not_binary() {
        let mut body = "é".repeat(SNIFF_BYTES / 2 - 1).into_bytes();
        body.push(b'x');
        body.extend("é".repeat(10).bytes());
        assert_eq!(kind(Some("text/plain"), &body), Ok(Kind::Text));
    }
}
