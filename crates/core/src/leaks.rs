//! Secret leak detection: finds API keys of the major providers, bot tokens, JWTs, bearer
//! tokens, AWS secret keys, PEM private keys and the configured secrets' own values (also
//! base64- and percent-encoded, and split by zero-width characters) in text, and redacts
//! them before the model or a channel sees the text. Hand-written matchers for the shapes
//! (no regex engine) and one Aho-Corasick pass for every form of every configured value.

mod encodings;
mod shapes;
mod stream;

use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};

pub use stream::StreamRedactor;

use encodings::Visible;
use shapes::{PATTERNS, PREFIX_STARTS, SHAPES, find_aws_secret_near, pattern_starts_at, token_char};

/// What replaces a found secret (with its kind).
pub const REDACTION: &str = "[REDACTED";

/// How a PEM block starts.
const PEM_BEGIN: &str = "-----BEGIN ";

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

/// Scans texts for secrets; holds the configured secrets' values in every form searched.
#[derive(Clone, Default)]
pub struct LeakScanner {
    needles: Arc<Needles>,
}

/// Every form of every configured value, ready to search.
struct Needles {
    /// Configured values kept.
    values: usize,
    /// All forms, sorted (the stream redactor looks up prefixes in it).
    sorted: Vec<Vec<u8>>,
    /// Bytes a form starts with.
    first_bytes: [bool; 256],
    /// The first two bytes of every form, a bit each (`first << 8 | second`): a streamed
    /// tail whose pair no form starts with needs no lookup in `sorted`.
    first_pairs: Box<[u64; 1024]>,
    /// Length of the longest form.
    longest: usize,
    /// One automaton over all forms; `None` without configured values.
    automaton: Option<AhoCorasick>,
}

impl Default for Needles {
    fn default() -> Self {
        Self {
            values: 0,
            sorted: Vec::new(),
            first_bytes: [false; 256],
            first_pairs: Box::new([0; 1024]),
            longest: 0,
            automaton: None,
        }
    }
}

impl std::fmt::Debug for LeakScanner {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("LeakScanner").field("secrets", &self.needles.values).finish()
    }
}

/// Shortest configured value that is matched literally (shorter ones would redact words).
const MIN_SECRET_LEN: usize = 8;

impl LeakScanner {
    /// A scanner that also finds these exact values, base64- or percent-encoded too
    /// (values shorter than 8 bytes are ignored).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<String> = secrets.into_iter().filter(|secret| secret.len() >= MIN_SECRET_LEN).collect();
        values.sort();
        values.dedup();
        let mut sorted: Vec<Vec<u8>> = values
            .iter()
            .flat_map(|value| encodings::forms(value))
            .filter(|form| form.len() >= MIN_SECRET_LEN)
            .collect();
        sorted.sort();
        sorted.dedup();
        let mut first_bytes = [false; 256];
        let mut first_pairs = Box::new([0_u64; 1024]);
        for form in &sorted {
            first_bytes[usize::from(form[0])] = true;
            let pair = usize::from(form[0]) << 8 | usize::from(form[1]);
            first_pairs[pair / 64] |= 1 << (pair % 64);
        }
        let longest = sorted.iter().map(Vec::len).max().unwrap_or(0);
        // Standard semantics for overlapping search: every occurrence of every form is
        // reported, and overlaps are merged afterwards.
        let automaton = (!sorted.is_empty())
            .then(|| AhoCorasick::builder().match_kind(MatchKind::Standard).build(&sorted))
            .and_then(|built| match built {
                Ok(automaton) => Some(automaton),
                Err(error) => {
                    tracing::error!(%error, "can't build the secret scanner's automaton; configured values are matched one by one");
                    None
                }
            });
        Self {
            needles: Arc::new(Needles { values: values.len(), sorted, first_bytes, first_pairs, longest, automaton }),
        }
    }

    /// True when no configured value is searched (key shapes still are).
    pub fn has_configured_values(&self) -> bool {
        self.needles.values > 0
    }

    /// Every secret in `text`, in order, without overlaps.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        let mut findings = Vec::new();
        self.scan_into(text, &mut findings);
        // A value split by zero-width characters is found in the text without them.
        if let Some(visible) = Visible::of(text) {
            let mut hidden = Vec::new();
            self.scan_into(&visible.text, &mut hidden);
            findings.extend(hidden.into_iter().map(|finding| {
                let (start, end) = visible.original(finding.start, finding.end);
                Finding { kind: finding.kind, start, end }
            }));
        }
        merge(findings)
    }

    /// [`LeakScanner::scan`] of one text as it is, unmerged.
    fn scan_into(&self, text: &str, findings: &mut Vec<Finding>) {
        let bytes = text.as_bytes();
        self.find_configured(bytes, findings);
        find_pem_keys(text, findings);
        // One pass over the text: every reply and tool result goes through here, so a
        // search per shape (thirty passes) would cost more than the rest of the scan.
        let mut access_keys = Vec::new();
        for start in 0..bytes.len() {
            let byte = bytes[start];
            if PREFIX_STARTS[usize::from(byte)] && (start == 0 || !token_char(bytes[start - 1])) {
                // A prefix inside a longer word is not a key (`task-...` is not `sk-...`).
                let rest = &bytes[start..];
                for shape in SHAPES {
                    if !rest.starts_with(shape.prefix.as_bytes()) {
                        continue;
                    }
                    if let Some(length) = shape.length_at(rest) {
                        findings.push(Finding { kind: shape.kind, start, end: start + length });
                        if shape.kind == "aws_access_key" {
                            access_keys.push((start, start + length));
                        }
                    }
                }
            }
            for pattern in PATTERNS {
                if !pattern_starts_at(pattern, bytes, start) {
                    continue;
                }
                if let Some((from, to)) = (pattern.find)(&bytes[start..]) {
                    findings.push(Finding { kind: pattern.kind, start: start + from, end: start + to });
                }
            }
        }
        for (id_start, id_end) in access_keys {
            if let Some((start, end)) = find_aws_secret_near(bytes, id_start, id_end) {
                findings.push(Finding { kind: "aws_secret_key", start, end });
            }
        }
    }

    /// Every form of every configured value in `bytes`.
    fn find_configured(&self, bytes: &[u8], findings: &mut Vec<Finding>) {
        let needles = &self.needles;
        match &needles.automaton {
            Some(automaton) => {
                for found in automaton.find_overlapping_iter(bytes) {
                    findings.push(Finding { kind: "configured_secret", start: found.start(), end: found.end() });
                }
            }
            None => {
                for form in &needles.sorted {
                    let mut from = 0;
                    while let Some(at) = bytes[from..].windows(form.len()).position(|window| window == form.as_slice())
                    {
                        findings.push(Finding {
                            kind: "configured_secret",
                            start: from + at,
                            end: from + at + form.len(),
                        });
                        from += at + 1;
                    }
                }
            }
        }
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

/// Findings in order, overlapping ones joined (the earliest's kind names the union).
fn merge(mut findings: Vec<Finding>) -> Vec<Finding> {
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
    /// Kinds found in `text` by a scanner without configured values.
    fn kinds(text: &str) -> Vec<&'static str> {
        LeakScanner::default().scan(text).iter().map(|finding| finding.kind).collect()
    }

    const TELEGRAM: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq";
    const DISCORD: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456";
    const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    #[test]
    fn new_key_shapes_are_found_with_their_kind() {
        for (sample, kind) in [
            (TELEGRAM, "telegram_bot_token"),
            (DISCORD, "discord_bot_token"),
            ("xoxa-2-1234567890-abcdefghijkl", "slack_token"),
            ("xoxr-1234567890-abcdefghijklmn", "slack_token"),
            ("xapp-1-A0123456789-0123456789-abcdef", "slack_token"),
            ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe_key"),
            ("rk_live_51HqLyjWDarjtT1zdp7dcAbC", "stripe_key"),
            ("sk_test_4eC39HqLyjWDarjtT1zdp7dc", "stripe_key"),
            ("glpat-xYz12AbCdEfGhIjKlMnO", "gitlab_token"),
            (JWT, "jwt"),
        ] {
            let text = format!("token: {sample} (keep it)");
            let findings = LeakScanner::default().scan(&text);
            assert_eq!(findings.len(), 1, "{sample}: {findings:?}");
            assert_eq!(findings[0].kind, kind, "{sample}");
            assert_eq!(&text[findings[0].start..findings[0].end], sample);
        }
        // Telegram's API URLs put the token right after `bot`.
        let url = format!("https://api.telegram.org/bot{TELEGRAM}/getMe");
        assert_eq!(kinds(&url), ["telegram_bot_token"]);
        // A JWT at the end of a sentence keeps the sentence's dot.
        let (redacted, _) = LeakScanner::default().redact(&format!("It is {JWT}."));
        assert_eq!(redacted, "It is [REDACTED:jwt].");
    }

    #[test]
    fn near_misses_of_the_new_shapes_are_left_alone() {
        for text in [
            // 34 characters after the colon; a five-digit id; a time of day.
            "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
            "12345:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq",
            "meet at 10:30 today",
            // The first part decodes to letters, not a numeric id.
            "SGVsbG8gd29ybGQgaGVsbG8.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456",
            "Mary.Nancy.Oscar went home",
            "xoxz-1234567890-abcdefghijkl",
            "sk_live_short",
            "pk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "glpat-short",
            // The second part is not a JSON object.
            "eyJhbGciOiJIUzI1NiJ9.payloadpayload.signature",
            // 40 hex characters: a git commit, not an AWS key.
            "AKIAABCDEFGHIJKLMNOP commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        ] {
            let found = kinds(text);
            assert!(found.is_empty() || found == ["aws_access_key"], "{text}: {found:?}");
        }
    }

    #[test]
    fn aws_secret_keys_are_found_beside_their_id_or_after_their_label() {
        let text = format!("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\n");
        let (redacted, findings) = LeakScanner::default().redact(&text);
        let kinds: Vec<&str> = findings.iter().map(|finding| finding.kind).collect();
        assert_eq!(kinds, ["aws_access_key", "aws_secret_key"]);
        assert!(!redacted.contains(AWS_SECRET), "{redacted}");
        assert!(redacted.contains("AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]"), "{redacted}");
        let labelled = format!("[default]\naws_secret_access_key = {AWS_SECRET}\n");
        assert_eq!(kinds_of(&labelled), ["aws_secret_key"]);
        // Without an id or a label, 40 base64 characters are just text.
        assert!(kinds_of(&format!("value {AWS_SECRET} here")).is_empty());
        assert!(kinds_of(&format!("aws_secret_access_key = {AWS_SECRET}X")).is_empty());
    }

    fn kinds_of(text: &str) -> Vec<&'static str> {
        kinds(text)
    }

    const CONFIGURED: &str = "correct/horse+battery staple";

    #[test]
    fn configured_values_are_found_encoded_and_split_by_zero_width_characters() {
        let scanner = LeakScanner::new([CONFIGURED.to_owned()]);
        let encoded = |data: &[u8]| encodings_for_test::base64(data);
        let mut texts = vec![
            format!("plain {CONFIGURED} end"),
            format!("url https://x.test/?q=correct%2Fhorse%2Bbattery%20staple&r=1"),
            format!("url https://x.test/?q=correct%2fhorse%2bbattery%20staple"),
        ];
        for before in ["", "a", "ab"] {
            let standard = encoded(format!("{before}{CONFIGURED}!").as_bytes());
            let url_safe = standard.replace('+', "-").replace('/', "_");
            texts.push(format!("path /{standard}/x"));
            texts.push(format!("path /{url_safe}/x"));
        }
        for invisible in ['\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}'] {
            let split: String = CONFIGURED
                .chars()
                .enumerate()
                .flat_map(|(index, c)| [c].into_iter().chain((index % 3 == 1).then_some(invisible)))
                .collect();
            texts.push(format!("split {split} end"));
        }
        for text in &texts {
            let (redacted, findings) = scanner.redact(text);
            assert_eq!(findings.len(), 1, "{text}: {findings:?}");
            assert_eq!(findings[0].kind, "configured_secret");
            assert!(!redacted.contains("horse"), "{text} gave {redacted}");
        }
        let split = texts.last().map(String::as_str).unwrap_or_default();
        assert_eq!(scanner.redact(split).0, "split [REDACTED:configured_secret] end");
        // A different value's encoding is not this one's.
        let other = encoded(b"a completely different value");
        assert!(scanner.scan(&other).is_empty());
    }

    #[test]
    fn a_hundred_configured_values_scan_in_one_pass() {
        let values: Vec<String> = (0..100).map(|index| format!("configured-secret-value-{index:03}-xyzzy")).collect();
        let scanner = LeakScanner::new(values.clone());
        let text =
            format!("{} {} {}", "ordinary words and numbers 12345 ".repeat(2000), values[57], "tail ".repeat(100));
        let started = std::time::Instant::now();
        let mut found = 0;
        for _ in 0..10 {
            found += scanner.scan(&text).len();
        }
        let elapsed = started.elapsed();
        assert_eq!(found, 10);
        println!("10 scans of {} bytes with 100 values: {elapsed:?}", text.len());
    }

    /// Base64 for building test inputs.
    mod encodings_for_test {
        pub(super) fn base64(data: &[u8]) -> String {
            const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut output = String::new();
            for chunk in data.chunks(3) {
                let mut group = [0u8; 3];
                group[..chunk.len()].copy_from_slice(chunk);
                let value = (u32::from(group[0]) << 16) | (u32::from(group[1]) << 8) | u32::from(group[2]);
                for index in 0..4 {
                    if index <= chunk.len() {
                        output.push(char::from(ALPHABET[((value >> (18 - 6 * index)) & 0x3f) as usize]));
                    } else {
                        output.push('=');
                    }
                }
            }
            output
        }
    }
}
