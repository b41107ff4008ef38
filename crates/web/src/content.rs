//! What a fetched body is and how it becomes text: the declared content type decides,
//! the bytes get the last word (a "text" body full of NULs is binary whatever it claims).
//! The character set comes from a byte order mark, else the `Content-Type` header, else
//! a `<meta>` declaration near the start, else UTF-8, decoded with `encoding_rs`.

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE, WINDOWS_1252};

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

/// The character set a body is decoded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    /// UTF-8 (also the fallback when nothing usable is declared; ASCII is a subset).
    Utf8,
    /// Windows-1252, which is also what browsers read ISO-8859-1 and ASCII labels as.
    Windows1252,
    /// Any other encoding of the WHATWG Encoding Standard (Shift_JIS, ISO-8859-2,
    /// UTF-16 …).
    Other(&'static Encoding),
}

impl Charset {
    /// The charset that decodes as `encoding`.
    pub fn from_encoding(encoding: &'static Encoding) -> Self {
        if encoding == UTF_8 {
            Self::Utf8
        } else if encoding == WINDOWS_1252 {
            Self::Windows1252
        } else {
            Self::Other(encoding)
        }
    }

    /// The encoding that decodes this charset.
    pub fn encoding(self) -> &'static Encoding {
        match self {
            Self::Utf8 => UTF_8,
            Self::Windows1252 => WINDOWS_1252,
            Self::Other(encoding) => encoding,
        }
    }

    /// Whether it is UTF-16, whose ASCII text is full of NUL bytes.
    fn is_utf16(self) -> bool {
        let encoding = self.encoding();
        encoding == UTF_16LE || encoding == UTF_16BE
    }
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
    let charset = Charset::from_encoding(encoding_of(declared_charset.as_deref(), body));
    let sample = strip_bom(&body[..body.len().min(SNIFF_BYTES)]);
    if looks_binary(sample, charset, body.len() > SNIFF_BYTES) {
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

/// The encoding of `body`: its byte order mark wins (as in browsers: bytes don't lie,
/// a server's default header does), then the header's `declared` label, then a
/// `<meta>` declaration, then UTF-8. Labels the Encoding Standard doesn't know are
/// passed over.
fn encoding_of(declared: Option<&str>, body: &[u8]) -> &'static Encoding {
    if let Some((encoding, _)) = Encoding::for_bom(body) {
        return encoding;
    }
    if let Some(encoding) = declared.and_then(|label| Encoding::for_label(label.as_bytes())) {
        return encoding;
    }
    match sniff_meta_charset(body).and_then(|label| Encoding::for_label(label.as_bytes())) {
        // A page whose `<meta>` could be read as ASCII isn't UTF-16, whatever it says.
        Some(encoding) if encoding == UTF_16LE || encoding == UTF_16BE => UTF_8,
        Some(encoding) => encoding.output_encoding(),
        None => UTF_8,
    }
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

/// `bytes` without a byte order mark of any Unicode encoding.
fn strip_bom(bytes: &[u8]) -> &[u8] {
    match Encoding::for_bom(bytes) {
        Some((_, length)) => &bytes[length..],
        None => bytes,
    }
}

/// NUL bytes, many control characters, or many invalid sequences.
fn looks_binary(sample: &[u8], charset: Charset, cut_short: bool) -> bool {
    if charset.is_utf16() {
        // NUL bytes are how UTF-16 writes ASCII: judge the characters instead.
        let (text, _) = charset.encoding().decode_without_bom_handling(sample);
        let characters = text.chars().count();
        let controls = text
            .chars()
            .filter(|character| character.is_control() && !matches!(character, '\t' | '\n' | '\r' | '\u{c}' | '\u{1b}'))
            .count();
        let invalid = text.matches('\u{FFFD}').count();
        return text.contains('\0') || controls * 10 > characters || invalid * 20 > characters.max(1);
    }
    if sample.contains(&0) {
        return true;
    }
    let controls =
        sample.iter().filter(|byte| **byte < 0x20 && !matches!(byte, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b)).count();
    if controls * 10 > sample.len() {
        return true;
    }
    if charset != Charset::Utf8 {
        let (text, _) = charset.encoding().decode_without_bom_handling(sample);
        // A multi-byte character cut by the sniff window's end is one replacement.
        let invalid = text.matches('\u{FFFD}').count().saturating_sub(usize::from(cut_short));
        return invalid * 20 > sample.len();
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

/// `body` as a string in `charset` (without its byte order mark), malformed sequences
/// replaced by U+FFFD.
pub fn decode(body: &[u8], charset: &Charset) -> String {
    let (text, _) = charset.encoding().decode_without_bom_handling(strip_bom(body));
    text.into_owned()
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

    fn decoded(content_type: Option<&str>, body: &[u8]) -> String {
        let classified = classify(content_type, body).unwrap_or_else(|refusal| panic!("{refusal:?}"));
        decode(body, &classified.charset)
    }

    #[test]
    fn shift_jis_decodes_by_the_header_or_the_meta_tag() {
        // 日本語 in Shift_JIS.
        let text = b"\x93\xfa\x96\x7b\x8c\xea";
        assert_eq!(decoded(Some("text/plain; charset=Shift_JIS"), text), "日本語");
        let page = [
            b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=shift_jis\"></head><p>"
                .as_slice(),
            text,
        ]
        .concat();
        assert_eq!(
            decoded(Some("text/html"), &page),
            "<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=shift_jis\"></head><p>日本語"
        );
    }

    #[test]
    fn central_european_pages_decode() {
        // "Łódź, żółć" in ISO-8859-2 and in windows-1250.
        assert_eq!(decoded(Some("text/plain; charset=iso-8859-2"), b"\xa3\xf3d\xbc, \xbf\xf3\xb3\xe6"), "Łódź, żółć");
        let page = b"<meta charset='windows-1250'><p>\xa3\xf3d\x9f, \xbf\xf3\xb3\xe6";
        assert_eq!(decoded(None, page), "<meta charset='windows-1250'><p>Łódź, żółć");
    }

    #[test]
    fn utf16_with_a_byte_order_mark_is_text_not_binary() {
        let mut little_endian = vec![0xFF, 0xFE];
        little_endian.extend("<p>héllo 😀</p>".encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(kind(Some("text/html"), &little_endian), Ok(Kind::Html));
        assert_eq!(decoded(Some("text/html"), &little_endian), "<p>héllo 😀</p>");
        let mut big_endian = vec![0xFE, 0xFF];
        big_endian.extend("plain".encode_utf16().flat_map(u16::to_be_bytes));
        // The byte order mark outweighs a server's default header.
        assert_eq!(decoded(Some("text/plain; charset=utf-8"), &big_endian), "plain");
        assert_eq!(decoded(None, b"\xEF\xBB\xBFcaf\xc3\xa9"), "café");
    }

    #[test]
    fn a_bogus_label_falls_back_to_the_meta_tag_then_utf8() {
        let page = b"<meta charset=\"iso-8859-2\"><p>\xa3\xf3d\xbc";
        assert_eq!(decoded(Some("text/html; charset=x-no-such-charset"), page), "<meta charset=\"iso-8859-2\"><p>Łódź");
        assert_eq!(decoded(Some("text/plain; charset=bogus"), "żółć".as_bytes()), "żółć");
        assert_eq!(
            decoded(Some("text/plain; charset=bogus"), b"ok, mostly fine text \xff"),
            "ok, mostly fine text \u{FFFD}"
        );
        let classified = classify(Some("text/plain; charset=bogus"), b"x").map(|classified| classified.charset);
        assert_eq!(classified, Ok(Charset::Utf8));
    }

    #[test]
    fn a_character_cut_by_the_sniff_window_is_not_binary() {
        let mut body = "é".repeat(SNIFF_BYTES / 2 - 1).into_bytes();
        body.push(b'x');
        body.extend("é".repeat(10).bytes());
        assert_eq!(kind(Some("text/plain"), &body), Ok(Kind::Text));
    }
}
