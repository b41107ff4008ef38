//! Secret leak detection: finds API keys of the major providers, bearer tokens, PEM
//! private keys and the configured secrets' own values in text, and redacts them before
//! the model or a channel sees the text. Hand-written matchers (no regex engine): each
//! pattern is a literal prefix followed by a run of allowed characters of a minimum length.

mod stream;

pub use stream::StreamRedactor;

/// What replaces a found secret (with its kind).
pub const REDACTION: &str = "[REDACTED";

/// How a PEM block starts.
const PEM_BEGIN: &str = "-----BEGIN ";

/// One kind of secret recognised by shape.
struct Shape {
    kind: &'static str,
    prefix: &'static str,
    /// Characters allowed after the prefix.
    charset: fn(u8) -> bool,
    /// Shortest run after the prefix that counts.
    min_len: usize,
}

fn token_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'
}

fn alnum(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
}

fn upper_alnum(byte: u8) -> bool {
    byte.is_ascii_uppercase() || byte.is_ascii_digit()
}

fn bearer_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

/// Shapes, most specific first (an Anthropic key also starts with `sk-`).
const SHAPES: &[Shape] = &[
    Shape { kind: "anthropic_key", prefix: "sk-ant-", charset: token_char, min_len: 20 },
    Shape { kind: "openai_key", prefix: "sk-proj-", charset: token_char, min_len: 20 },
    Shape { kind: "openai_key", prefix: "sk-", charset: token_char, min_len: 20 },
    Shape { kind: "openrouter_key", prefix: "sk-or-", charset: token_char, min_len: 20 },
    Shape { kind: "google_key", prefix: "AIza", charset: token_char, min_len: 30 },
    Shape { kind: "github_token", prefix: "ghp_", charset: alnum, min_len: 30 },
    Shape { kind: "github_token", prefix: "gho_", charset: alnum, min_len: 30 },
    Shape { kind: "github_token", prefix: "ghs_", charset: alnum, min_len: 30 },
    Shape { kind: "github_token", prefix: "github_pat_", charset: token_char, min_len: 30 },
    Shape { kind: "slack_token", prefix: "xoxb-", charset: token_char, min_len: 20 },
    Shape { kind: "slack_token", prefix: "xoxp-", charset: token_char, min_len: 20 },
    Shape { kind: "slack_token", prefix: "xapp-", charset: token_char, min_len: 20 },
    Shape { kind: "aws_access_key", prefix: "AKIA", charset: upper_alnum, min_len: 16 },
    Shape { kind: "groq_key", prefix: "gsk_", charset: alnum, min_len: 30 },
    Shape { kind: "huggingface_token", prefix: "hf_", charset: alnum, min_len: 30 },
    Shape { kind: "bearer_token", prefix: "Bearer ", charset: bearer_char, min_len: 20 },
    Shape { kind: "bearer_token", prefix: "bearer ", charset: bearer_char, min_len: 20 },
];

/// The bytes a shape's prefix starts with (every prefix is ASCII, so a match always
/// starts on a character boundary).
const PREFIX_STARTS: [bool; 256] = {
    let mut starts = [false; 256];
    let mut index = 0;
    while index < SHAPES.len() {
        starts[SHAPES[index].prefix.as_bytes()[0] as usize] = true;
        index += 1;
    }
    starts
};

/// A secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it looks like (`openai_key`, `pem_private_key`, `configured_secret`, ...).
    pub kind: &'static str,
    /// Byte range in the scanned text.
    pub start: usize,
    /// End of the byte range.
    pub end: usize,
}

/// Scans texts for secrets; holds the configured secrets' values.
#[derive(Clone, Default)]
pub struct LeakScanner {
    secrets: Vec<String>,
}

impl std::fmt::Debug for LeakScanner {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("LeakScanner").field("secrets", &self.secrets.len()).finish()
    }
}

/// Shortest configured value that is matched literally (shorter ones would redact words).
const MIN_SECRET_LEN: usize = 8;

impl LeakScanner {
    /// A scanner that also finds these exact values (shorter than 8 bytes are ignored).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|secret| secret.len() >= MIN_SECRET_LEN).collect();
        // Longest first, so a secret containing another is redacted whole.
        secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// Every secret in `text`, in order, without overlaps.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        let mut findings = Vec::new();
        for secret in &self.secrets {
            for (start, _) in text.match_indices(secret.as_str()) {
                findings.push(Finding { kind: "configured_secret", start, end: start + secret.len() });
            }
        }
        find_pem_keys(text, &mut findings);
        // One pass over the text: every reply and tool result goes through here, so a
        // search per shape (seventeen passes) would cost more than the rest of the scan.
        let bytes = text.as_bytes();
        for start in 0..bytes.len() {
            if !PREFIX_STARTS[usize::from(bytes[start])] {
                continue;
            }
            // A prefix inside a longer word is not a key (`task-...` is not `sk-...`).
            if start > 0 && token_char(bytes[start - 1]) {
                continue;
            }
            let rest = &bytes[start..];
            for shape in SHAPES {
                if !rest.starts_with(shape.prefix.as_bytes()) {
                    continue;
                }
                let body_start = start + shape.prefix.len();
                let length = bytes[body_start..].iter().take_while(|byte| (shape.charset)(**byte)).count();
                if length >= shape.min_len {
                    findings.push(Finding { kind: shape.kind, start, end: body_start + length });
                }
            }
        }
        findings.sort_by_key(|finding| (finding.start, std::cmp::Reverse(finding.end)));
        let mut merged: Vec<Finding> = Vec::with_capacity(findings.len());
        for finding in findings {
            match merged.last_mut() {
                Some(last) if finding.start < last.end => last.end = last.end.max(finding.end),
                _ => merged.push(finding),
            }
        }
        merged
    }

    /// `text` with every secret replaced by `[REDACTED:<kind>]`, and what was found.
    pub fn redact(&self, text: &str) -> (String, Vec<Finding>) {
        let findings = self.scan(text);
        if findings.is_empty() {
            return (text.to_owned(), findings);
        }
        let mut output = String::with_capacity(text.len());
        let mut position = 0;
        for finding in &findings {
            output.push_str(&text[position..finding.start]);
            write_redacted(&mut output, finding.kind);
            position = finding.end;
        }
        output.push_str(&text[position..]);
        (output, findings)
    }
}

/// Appends the marker that stands for a secret of `kind`: `[REDACTED:<kind>]`.
fn write_redacted(output: &mut String, kind: &str) {
    output.push_str(REDACTION);
    output.push(':');
    output.push_str(kind);
    output.push(']');
}

/// PEM private key blocks, from `-----BEGIN ... PRIVATE KEY-----` to the matching end line
/// (or the end of the text when it was cut off).
fn find_pem_keys(text: &str, findings: &mut Vec<Finding>) {
    const BEGIN: &str = PEM_BEGIN;
    let mut from = 0;
    while let Some(offset) = text[from..].find(BEGIN) {
        let start = from + offset;
        let header_end = text[start + BEGIN.len()..].find("-----").map(|at| start + BEGIN.len() + at);
        let Some(header_end) = header_end else { break };
        let label = &text[start + BEGIN.len()..header_end];
        from = header_end + 5;
        if !label.ends_with("PRIVATE KEY") || label.len() > 40 {
            continue;
        }
        let end_marker = format!("-----END {label}-----");
        let end = text[from..].find(&end_marker).map_or(text.len(), |at| from + at + end_marker.len());
        findings.push(Finding { kind: "pem_private_key", start, end });
        from = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_key_shapes_are_redacted_with_their_kind() {
        let scanner = LeakScanner::default();
        let text = "openai sk-proj-abcdefghijklmnopqrstuvwx1234 and anthropic sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUV \
                    google AIzaSyA1234567890abcdefghijklmnopqrstu github ghp_abcdefghijklmnopqrstuvwxyz0123456789 \
                    aws AKIAABCDEFGHIJKLMNOP slack xoxb-1234567890-abcdefghijkl";
        let (redacted, findings) = scanner.redact(text);
        let kinds: Vec<&str> = findings.iter().map(|finding| finding.kind).collect();
        assert_eq!(
            kinds,
            ["openai_key", "anthropic_key", "google_key", "github_token", "aws_access_key", "slack_token"]
        );
        assert!(!redacted.contains("abcdefghijklmnopqrstuvwx1234"), "{redacted}");
        assert!(redacted.contains("openai [REDACTED:openai_key] and"), "{redacted}");
    }

    #[test]
    fn bearer_tokens_pem_keys_and_configured_values_are_found() {
        let scanner = LeakScanner::new(["my-very-own-token-value".to_owned(), "short".to_owned()]);
        let text = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig123\n\
                    -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----\n\
                    the token is my-very-own-token-value; short words stay";
        let (redacted, findings) = scanner.redact(text);
        let kinds: Vec<&str> = findings.iter().map(|finding| finding.kind).collect();
        assert_eq!(kinds, ["bearer_token", "pem_private_key", "configured_secret"]);
        assert!(!redacted.contains("b3BlbnNzaC1rZXk"), "{redacted}");
        assert!(!redacted.contains("my-very-own-token-value"), "{redacted}");
        assert!(redacted.contains("short words stay"));
        let cut = "-----BEGIN RSA PRIVATE KEY-----\nMIIE...";
        assert_eq!(scanner.scan(cut), [Finding { kind: "pem_private_key", start: 0, end: cut.len() }]);
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let scanner = LeakScanner::default();
        for text in [
            "task-sk-abcdefghijklmnopqrstuvwxyz is a branch name",
            "sk-short",
            "-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----",
            "Bearer of bad news",
            "ünïcödé sk-",
        ] {
            assert_eq!(scanner.redact(text), (text.to_owned(), Vec::new()), "{text}");
        }
    }
}
