//! Redacting text that arrives in pieces (a streamed reply): each piece yields the text
//! that is safe to emit now, holding back only a tail that could still turn into a
//! secret once more text arrives.

use super::encodings::Visible;
use super::shapes::{PATTERNS, PREFIX_STARTS, SHAPES, pattern_starts_at, token_char};
use super::{Finding, LeakScanner, PEM_BEGIN, write_redacted};

/// Characters emitted last kept as context: whether a key starts a word, or follows
/// `bot` as a Telegram token does, is settled by what came before it.
const CONTEXT_CHARS: usize = 3;

/// Longest PEM label [`LeakScanner::scan`] accepts; a header still open past it is no key.
const PEM_LABEL_MAX: usize = 40;

/// Redacts a stream of text deltas with a [`LeakScanner`].
///
/// [`StreamRedactor::push`] returns what may be emitted now: everything except a tail that
/// could still become a secret (a configured secret's value cut mid-way, a key whose
/// characters are still arriving, a PEM private key block until its END line). Ordinary
/// words pass at once, except that a word starting like a key prefix (`sk`, `AKIA`,
/// `Bearer`) waits for the character that tells it apart. [`StreamRedactor::finish`]
/// returns the rest. The concatenated output equals [`LeakScanner::redact`] of the whole
/// text.
#[derive(Debug)]
pub struct StreamRedactor<'a> {
    scanner: &'a LeakScanner,
    /// Text received and not emitted yet.
    pending: String,
    /// The last characters emitted (unredacted): a key prefix right after a word
    /// character is not a key, so the boundary must be known across pieces.
    previous: String,
    /// What was redacted so far.
    findings: Vec<&'static str>,
}

impl<'a> StreamRedactor<'a> {
    /// A redactor using `scanner`'s shapes and configured values.
    pub fn new(scanner: &'a LeakScanner) -> Self {
        Self { scanner, pending: String::new(), previous: String::new(), findings: Vec::new() }
    }

    /// Takes in `delta`; returns the text safe to emit now (possibly empty).
    pub fn push(&mut self, delta: &str) -> String {
        self.pending.push_str(delta);
        let (window, offset) = self.window();
        let findings = self.scan(&window, offset);
        let mut cut = self.hold_from(&window, offset, &findings);
        // A secret found whole but straddling the cut goes out whole, later.
        for finding in &findings {
            if finding.start < cut && cut < finding.end {
                cut = finding.start;
            }
        }
        if cut <= offset {
            return String::new();
        }
        let emitted: Vec<Finding> = findings.into_iter().filter(|finding| finding.end <= cut).collect();
        let output = self.emit(&window, offset, cut, &emitted);
        self.pending.drain(..cut - offset);
        output
    }

    /// Everything still held, redacted; the redactor is empty afterwards.
    pub fn finish(&mut self) -> String {
        let (window, offset) = self.window();
        let findings = self.scan(&window, offset);
        let output = self.emit(&window, offset, window.len(), &findings);
        self.pending.clear();
        output
    }

    /// Drops what is held (the text streamed so far is void: the provider starts over).
    pub fn reset(&mut self) {
        self.pending.clear();
        self.previous.clear();
    }

    /// Kinds of the secrets redacted since the last call.
    pub fn take_findings(&mut self) -> Vec<&'static str> {
        std::mem::take(&mut self.findings)
    }

    /// The held text with the last emitted characters in front, and their length.
    fn window(&self) -> (String, usize) {
        let mut window = String::with_capacity(self.pending.len() + self.previous.len());
        window.push_str(&self.previous);
        let offset = window.len();
        window.push_str(&self.pending);
        (window, offset)
    }

    /// Secrets in the held text; the characters in front only tell whether a key prefix
    /// starts a word (what starts in it was settled when it went out).
    fn scan(&self, window: &str, offset: usize) -> Vec<Finding> {
        let mut findings = self.scanner.scan(window);
        findings.retain(|finding| finding.start >= offset);
        findings
    }

    /// Emits `window[offset..cut]` with `findings` (all inside it) redacted.
    fn emit(&mut self, window: &str, offset: usize, cut: usize, findings: &[Finding]) -> String {
        let mut output = String::with_capacity(cut - offset);
        let mut position = offset;
        for finding in findings {
            output.push_str(&window[position..finding.start]);
            write_redacted(&mut output, finding.kind);
            self.findings.push(finding.kind);
            position = finding.end;
        }
        if position < cut {
            output.push_str(&window[position..cut]);
        }
        let context_start =
            window[..cut].char_indices().rev().nth(CONTEXT_CHARS - 1).map_or(0, |(position, _)| position);
        self.previous = window[context_start..cut].to_owned();
        output
    }

    /// The earliest position in `window` (at or after `offset`) from which the text could
    /// still become a secret; `window.len()` when none. Zero-width characters could be
    /// splitting a value, so the view without them is checked too.
    fn hold_from(&self, window: &str, offset: usize, findings: &[Finding]) -> usize {
        let hold = self.hold_in(window, offset, findings);
        let Some(visible) = Visible::of(window) else { return hold };
        let view_offset = visible.view_position(offset);
        let mut view_findings = self.scanner.scan(&visible.text);
        view_findings.retain(|finding| finding.start >= view_offset);
        let view_hold = self.hold_in(&visible.text, view_offset, &view_findings);
        if view_hold >= visible.text.len() {
            return hold;
        }
        hold.min(visible.original_position(view_hold).max(offset))
    }

    /// [`StreamRedactor::hold_from`] of one text as it is.
    fn hold_in(&self, window: &str, offset: usize, findings: &[Finding]) -> usize {
        let bytes = window.as_bytes();
        let end = bytes.len();
        let mut hold = end;
        // A secret found at the very end may go on (a longer key, a cut-off PEM block).
        for finding in findings {
            if finding.end == end {
                hold = hold.min(finding.start);
            }
        }
        hold = hold.min(self.configured_hold(bytes, offset));
        let boundary = |start: usize| start == 0 || !token_char(bytes[start - 1]);
        // Only where a key prefix could start (one table lookup a byte, as in the scan);
        // the first such place that holds is the earliest, so the walk stops there.
        for start in offset..hold {
            if !PREFIX_STARTS[usize::from(bytes[start])] || !boundary(start) {
                continue;
            }
            let rest = &bytes[start..];
            let holds = SHAPES.iter().any(|shape| {
                let prefix = shape.prefix.as_bytes();
                if rest.len() < prefix.len() {
                    // The tail is the beginning of a key prefix.
                    prefix.starts_with(rest)
                } else {
                    // A whole prefix whose key characters run to the end: the key may go on.
                    rest.starts_with(prefix) && rest[prefix.len()..].iter().all(|byte| (shape.charset)(*byte))
                }
            });
            if holds {
                hold = start;
                break;
            }
        }
        // A structured secret (a bot token, a labelled AWS key) still arriving.
        for start in offset..hold {
            if PATTERNS
                .iter()
                .any(|pattern| pattern_starts_at(pattern, bytes, start) && (pattern.viable)(&bytes[start..]))
            {
                hold = start;
                break;
            }
        }
        self.pem_hold(window, offset, hold)
    }

    /// Where the tail starts being the beginning of a configured value (in any of its
    /// forms); `bytes.len()` when it isn't. The forms are sorted, so each candidate start
    /// is one binary search.
    fn configured_hold(&self, bytes: &[u8], offset: usize) -> usize {
        let needles = &self.scanner.needles;
        let end = bytes.len();
        let earliest = end.saturating_sub(needles.longest.saturating_sub(1)).max(offset);
        for start in earliest..end {
            if !needles.first_bytes[usize::from(bytes[start])] {
                continue;
            }
            if let Some(second) = bytes.get(start + 1) {
                let pair = usize::from(bytes[start]) << 8 | usize::from(*second);
                if needles.first_pairs[pair / 64] & (1 << (pair % 64)) == 0 {
                    continue;
                }
            }
            let tail = &bytes[start..];
            let index = needles.sorted.partition_point(|form| form.as_slice() < tail);
            if needles.sorted.get(index).is_some_and(|form| form.len() > tail.len() && form.starts_with(tail)) {
                return start;
            }
        }
        end
    }

    /// [`StreamRedactor::hold_from`] for PEM blocks: a tail starting like `-----BEGIN `,
    /// or a header still open.
    fn pem_hold(&self, window: &str, offset: usize, mut hold: usize) -> usize {
        let bytes = window.as_bytes();
        let end = bytes.len();
        // Both cases start with the `-` of `-----BEGIN `.
        if !bytes[offset.min(end)..].contains(&b'-') {
            return hold;
        }
        let begin = PEM_BEGIN.as_bytes();
        for length in (1..begin.len()).rev() {
            if length > end - offset {
                continue;
            }
            let start = end - length;
            if start < hold && bytes[start..] == begin[..length] {
                hold = start;
                break;
            }
        }
        for (start, _) in window.match_indices(PEM_BEGIN) {
            if start < offset {
                continue;
            }
            if start >= hold {
                break;
            }
            let label = &window[start + PEM_BEGIN.len()..];
            if !label.contains("-----") && label.len() <= PEM_LABEL_MAX + 4 {
                hold = start;
                break;
            }
        }
        hold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIGURED: &str = "correct-horse-battery-staple-42";
    const OPENAI: &str = "sk-proj-abcdefghijklmnopqrstuvwx1234";
    const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----";

    fn scanner() -> LeakScanner {
        LeakScanner::new([CONFIGURED.to_owned(), "zzzzzzzz".to_owned()])
    }

    /// Streams `pieces` and returns the concatenated output and each push's output.
    fn stream(scanner: &LeakScanner, pieces: &[&str]) -> (String, Vec<String>) {
        let mut redactor = StreamRedactor::new(scanner);
        let mut outputs: Vec<String> = pieces.iter().map(|piece| redactor.push(piece)).collect();
        outputs.push(redactor.finish());
        (outputs.concat(), outputs)
    }

    /// Splits `text` at the given byte positions (skipping those inside a character).
    fn split_at<'t>(text: &'t str, cuts: &[usize]) -> Vec<&'t str> {
        let mut pieces = Vec::new();
        let mut from = 0;
        for &cut in cuts {
            if cut > from && cut < text.len() && text.is_char_boundary(cut) {
                pieces.push(&text[from..cut]);
                from = cut;
            }
        }
        pieces.push(&text[from..]);
        pieces
    }

    #[test]
    fn secrets_split_at_every_byte_never_come_out() {
        let scanner = scanner();
        for secret in [
            CONFIGURED,
            OPENAI,
            PEM,
            "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig123",
            "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq",
            "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            // CONFIGURED in base64, and split by zero-width characters.
            "Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZS00Mg",
            "correct-horse\u{200B}-battery-\u{FEFF}staple-42",
        ] {
            let text = format!("Here it is: {secret} — keep it safe, ünïcödé.");
            let expected = scanner.redact(&text).0;
            assert!(!expected.contains(secret) && expected.contains(REDACTION_MARK), "{expected}");
            let visible: String = secret.chars().filter(|c| !super::super::encodings::is_invisible(*c)).collect();
            for first in 0..=text.len() {
                for second in [first + 1, first + 3, first + 7] {
                    let pieces = split_at(&text, &[first, second]);
                    let (output, _) = stream(&scanner, &pieces);
                    assert_eq!(output, expected, "split at {first} and {second}: {pieces:?}");
                    assert!(!output.replace(['\u{200B}', '\u{FEFF}'], "").contains(&visible[visible.len() / 2..]));
                }
            }
        }
    }

    const REDACTION_MARK: &str = "[REDACTED:";

    #[test]
    fn one_byte_at_a_time_matches_whole_text_redaction() {
        let scanner = scanner();
        let text = format!(
            "a{CONFIGURED}b task-sk-abcdefghijklmnopqrstuvwxyz sk-short {OPENAI}\n{PEM}\nAKIAABCDEFGHIJKLMNOP end zzzzzzzzz"
        );
        let pieces: Vec<String> = text.chars().map(String::from).collect();
        let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let (output, _) = stream(&scanner, &pieces);
        assert_eq!(output, scanner.redact(&text).0);
        for secret in [CONFIGURED, OPENAI, "MIIEowIBAAKCAQEA7", "AKIAABCDEFGHIJKLMNOP"] {
            assert!(!output.contains(secret), "{output}");
        }
        assert!(output.contains("task-sk-abcdefghijklmnopqrstuvwxyz"), "{output}");
    }

    #[test]
    fn ordinary_words_are_not_held_back() {
        let scanner = scanner();
        let mut redactor = StreamRedactor::new(&scanner);
        assert_eq!(redactor.push("Hello "), "Hello ");
        assert_eq!(redactor.push("world, "), "world, ");
        assert_eq!(redactor.push("how are you?"), "how are you?");
        // A word starting like a key waits only for the character that settles it.
        assert_eq!(redactor.push(" s"), " ");
        // (A word's last letter may wait for the next character too when a configured
        // value's base64 form starts with it.)
        assert_eq!(redactor.push("ure "), "sure ");
        assert_eq!(redactor.push(" -----"), " ");
        assert_eq!(redactor.push(" dashes"), "----- dashes");
        assert_eq!(redactor.finish(), "");
        assert!(redactor.take_findings().is_empty());
    }

    #[test]
    fn a_pem_block_is_held_until_its_end_line() {
        let scanner = scanner();
        let mut redactor = StreamRedactor::new(&scanner);
        assert_eq!(redactor.push("key:\n-----BEGIN RSA PRIVATE KEY-----\n"), "key:\n");
        assert_eq!(redactor.push("MIIEowIBAAKCAQEA7\n"), "");
        assert_eq!(redactor.push("-----END RSA PRIVATE KEY-----\nthanks"), "[REDACTED:pem_private_key]\nthanks");
        assert_eq!(redactor.take_findings(), ["pem_private_key"]);
        // Cut off before its end line, it is redacted to the end.
        assert_eq!(redactor.push("-----BEGIN EC PRIVATE KEY-----\nabc"), "");
        assert_eq!(redactor.finish(), "[REDACTED:pem_private_key]");
    }

    #[test]
    fn a_reset_drops_what_is_held() {
        let scanner = scanner();
        let mut redactor = StreamRedactor::new(&scanner);
        assert_eq!(redactor.push("the value is correct-horse"), "the value is ");
        redactor.reset();
        assert_eq!(redactor.push("fresh start"), "fresh start");
        assert_eq!(redactor.finish(), "");
    }

    /// A small deterministic generator, so the random splits are reproducible.
    struct Xorshift(u64);

    impl Xorshift {
        fn next(&mut self, below: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % below as u64) as usize
        }
    }

    #[test]
    fn random_splits_lose_nothing_and_leak_nothing() {
        let scanner = scanner();
        let parts = [
            "plain words ",
            "ünïcödé ✓ 🦑 ",
            CONFIGURED,
            OPENAI,
            " Bearer of news ",
            PEM,
            "\n",
            "-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----",
            "sk-",
            "AKIAABCDEFGHIJKLMNOP",
            "zzzzzzz",
            "task-",
            "s",
        ];
        let mut random = Xorshift(0x5eed_cafe_f00d);
        for _ in 0..400 {
            // Parts glued to a word character or dash are words, not keys (`task-sk-…`),
            // for the whole-text scanner too; a space keeps each part its own word.
            let text: String =
                (0..random.next(12) + 1).map(|_| format!(" {}", parts[random.next(parts.len())])).collect();
            let mut cuts: Vec<usize> = (0..random.next(text.len() + 1)).map(|_| random.next(text.len() + 1)).collect();
            cuts.sort_unstable();
            let pieces = split_at(&text, &cuts);
            let (output, _) = stream(&scanner, &pieces);
            assert_eq!(output, scanner.redact(&text).0, "{pieces:?}");
            for secret in [CONFIGURED, OPENAI, "MIIEowIBAAKCAQEA7"] {
                assert!(!output.contains(secret), "{pieces:?} gave {output}");
            }
        }
    }
}
