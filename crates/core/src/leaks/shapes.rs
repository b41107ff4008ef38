//! The key shapes the scanner knows: literal-prefix shapes (a prefix, then a run of key
//! characters) and structured ones without a literal prefix (Telegram and Discord bot
//! tokens, AWS secret access keys after their label), each with the test a streamed tail
//! must pass to be held back as a key still arriving.

/// Given a shape's whole run (prefix included), how much of it is the key, or `None`.
pub(super) type Accept = fn(&[u8]) -> Option<usize>;

/// One kind of secret recognised by a literal prefix.
pub(super) struct Shape {
    pub(super) kind: &'static str,
    pub(super) prefix: &'static str,
    /// Characters allowed after the prefix.
    pub(super) charset: fn(u8) -> bool,
    /// Shortest run after the prefix that counts.
    pub(super) min_len: usize,
    /// For shapes with inner structure: given the whole run (prefix included), how much of
    /// it is the key, or `None` when it isn't one.
    pub(super) accept: Option<Accept>,
}

pub(super) fn token_char(byte: u8) -> bool {
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

fn jwt_char(byte: u8) -> bool {
    token_char(byte) || byte == b'.'
}

/// Characters of standard base64 (AWS secret access keys use them, without padding).
pub(super) fn base64_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'+' || byte == b'/'
}

/// A JWT: `eyJ<header>.eyJ<payload>.<signature>`; a sentence's closing dot is not part of it.
fn accept_jwt(run: &[u8]) -> Option<usize> {
    let mut parts = run.splitn(3, |byte| *byte == b'.');
    let header = parts.next()?;
    let payload = parts.next()?;
    let signature = parts.next()?;
    if header.len() < 10 || payload.len() < 10 || !payload.starts_with(b"eyJ") {
        return None;
    }
    let signature_len = signature.iter().take_while(|byte| token_char(**byte)).count();
    Some(header.len() + payload.len() + 2 + signature_len)
}

/// Shapes, most specific first (an Anthropic key also starts with `sk-`).
pub(super) const SHAPES: &[Shape] = &[
    shape("anthropic_key", "sk-ant-", token_char, 20),
    shape("openai_key", "sk-proj-", token_char, 20),
    shape("openai_key", "sk-", token_char, 20),
    shape("openrouter_key", "sk-or-", token_char, 20),
    shape("google_key", "AIza", token_char, 30),
    shape("github_token", "ghp_", alnum, 30),
    shape("github_token", "gho_", alnum, 30),
    shape("github_token", "ghs_", alnum, 30),
    shape("github_token", "github_pat_", token_char, 30),
    shape("gitlab_token", "glpat-", token_char, 20),
    shape("slack_token", "xoxb-", token_char, 20),
    shape("slack_token", "xoxp-", token_char, 20),
    shape("slack_token", "xoxa-", token_char, 20),
    shape("slack_token", "xoxo-", token_char, 20),
    shape("slack_token", "xoxs-", token_char, 20),
    shape("slack_token", "xoxr-", token_char, 20),
    shape("slack_token", "xapp-", token_char, 20),
    shape("stripe_key", "sk_live_", alnum, 16),
    shape("stripe_key", "rk_live_", alnum, 16),
    shape("stripe_key", "sk_test_", alnum, 16),
    shape("aws_access_key", "AKIA", upper_alnum, 16),
    shape("groq_key", "gsk_", alnum, 30),
    shape("huggingface_token", "hf_", alnum, 30),
    shape("bearer_token", "Bearer ", bearer_char, 20),
    shape("bearer_token", "bearer ", bearer_char, 20),
    Shape { kind: "jwt", prefix: "eyJ", charset: jwt_char, min_len: 20, accept: Some(accept_jwt) },
];

const fn shape(kind: &'static str, prefix: &'static str, charset: fn(u8) -> bool, min_len: usize) -> Shape {
    Shape { kind, prefix, charset, min_len, accept: None }
}

/// The bytes a shape's prefix starts with (every prefix is ASCII, so a match always
/// starts on a character boundary).
pub(super) const PREFIX_STARTS: [bool; 256] = {
    let mut starts = [false; 256];
    let mut index = 0;
    while index < SHAPES.len() {
        starts[SHAPES[index].prefix.as_bytes()[0] as usize] = true;
        index += 1;
    }
    starts
};

impl Shape {
    /// Length of the key starting at `rest` (which starts with the prefix), if it is one.
    pub(super) fn length_at(&self, rest: &[u8]) -> Option<usize> {
        let body = rest[self.prefix.len()..].iter().take_while(|byte| (self.charset)(**byte)).count();
        if body < self.min_len {
            return None;
        }
        let run = &rest[..self.prefix.len() + body];
        match self.accept {
            Some(accept) => accept(run),
            None => Some(run.len()),
        }
    }
}

/// A secret recognised by structure rather than a literal prefix.
pub(super) struct Pattern {
    pub(super) kind: &'static str,
    /// Bytes a match can start with.
    pub(super) starts: fn(u8) -> bool,
    /// Word endings that may sit right before a match (`bot` in Telegram's API URLs).
    pub(super) after: &'static [&'static str],
    /// At a candidate start: the secret's range relative to it (a label before the value
    /// is not redacted), or `None`.
    pub(super) find: fn(&[u8]) -> Option<(usize, usize)>,
    /// Whether a tail running to the end of the text so far could still become a match.
    pub(super) viable: fn(&[u8]) -> bool,
}

pub(super) const PATTERNS: &[Pattern] = &[
    Pattern {
        kind: "telegram_bot_token",
        starts: |byte| matches!(byte, b'1'..=b'9'),
        after: &["bot"],
        find: find_telegram,
        viable: telegram_viable,
    },
    Pattern {
        kind: "discord_bot_token",
        starts: |byte| matches!(byte, b'M' | b'N' | b'O'),
        after: &[],
        find: find_discord,
        viable: discord_viable,
    },
    Pattern {
        kind: "aws_secret_key",
        starts: |byte| matches!(byte, b'a' | b'A'),
        after: &[],
        find: find_aws_labelled,
        viable: aws_labelled_viable,
    },
];

/// Whether a pattern may start at `start` (a word start, or right after an allowed ending).
pub(super) fn pattern_starts_at(pattern: &Pattern, bytes: &[u8], start: usize) -> bool {
    if !(pattern.starts)(bytes[start]) {
        return false;
    }
    start == 0
        || !token_char(bytes[start - 1])
        || pattern.after.iter().any(|ending| {
            let before = &bytes[..start];
            before.ends_with(ending.as_bytes())
                && (before.len() == ending.len() || !token_char(before[before.len() - ending.len() - 1]))
        })
}

fn run(bytes: &[u8], allowed: fn(u8) -> bool) -> usize {
    bytes.iter().take_while(|byte| allowed(**byte)).count()
}

/// Telegram bot token length of its secret part.
const TELEGRAM_SECRET_LEN: usize = 35;

/// `<6 to 10 digits>:<35 key characters>`.
fn find_telegram(bytes: &[u8]) -> Option<(usize, usize)> {
    let digits = run(bytes, |byte| byte.is_ascii_digit());
    if !(6..=10).contains(&digits) || bytes.get(digits) != Some(&b':') {
        return None;
    }
    let secret = run(&bytes[digits + 1..], token_char);
    (secret == TELEGRAM_SECRET_LEN).then_some((0, digits + 1 + secret))
}

fn telegram_viable(tail: &[u8]) -> bool {
    let digits = run(tail, |byte| byte.is_ascii_digit());
    if digits == tail.len() {
        return digits <= 10;
    }
    if !(6..=10).contains(&digits) || tail[digits] != b':' {
        return false;
    }
    let rest = &tail[digits + 1..];
    run(rest, token_char) == rest.len() && rest.len() <= TELEGRAM_SECRET_LEN
}

/// Decodes unpadded base64url (or standard base64) text; `None` on a character outside both.
pub(super) fn decode_base64(text: &[u8]) -> Option<Vec<u8>> {
    let value = |byte: u8| -> Option<u32> {
        Some(match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut output = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.chunks(4) {
        let mut group = 0u32;
        for (index, byte) in chunk.iter().enumerate() {
            group |= value(*byte)? << (18 - 6 * index);
        }
        let bytes = group.to_be_bytes();
        output.extend_from_slice(&bytes[1..1 + (chunk.len() * 6 / 8)]);
    }
    Some(output)
}

/// The user id part of a Discord token: base64 of 17 to 20 digits.
fn discord_id(part: &[u8]) -> bool {
    (20..=28).contains(&part.len())
        && decode_base64(part).is_some_and(|id| id.len() >= 15 && id.iter().all(u8::is_ascii_digit))
}

fn base64url_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'
}

/// `<base64 of a numeric user id>.<6 or 7 characters>.<27 or more characters>`.
fn find_discord(bytes: &[u8]) -> Option<(usize, usize)> {
    let id = run(bytes, base64url_char);
    if !discord_id(&bytes[..id]) || bytes.get(id) != Some(&b'.') {
        return None;
    }
    let timestamp = run(&bytes[id + 1..], base64url_char);
    let signature_start = id + 1 + timestamp + 1;
    if !(6..=7).contains(&timestamp) || bytes.get(signature_start - 1) != Some(&b'.') {
        return None;
    }
    let signature = run(&bytes[signature_start..], base64url_char);
    (signature >= 27).then_some((0, signature_start + signature))
}

fn discord_viable(tail: &[u8]) -> bool {
    let id = run(tail, base64url_char);
    if id == tail.len() {
        let whole_groups = id / 4 * 4;
        return id <= 28
            && decode_base64(&tail[..whole_groups]).is_some_and(|digits| digits.iter().all(u8::is_ascii_digit));
    }
    if !discord_id(&tail[..id]) || tail[id] != b'.' {
        return false;
    }
    let rest = &tail[id + 1..];
    let timestamp = run(rest, base64url_char);
    if timestamp == rest.len() {
        return timestamp <= 7;
    }
    if !(6..=7).contains(&timestamp) || rest[timestamp] != b'.' {
        return false;
    }
    let signature = &rest[timestamp + 1..];
    run(signature, base64url_char) == signature.len()
}

/// The label an AWS secret access key is written after (any case, `-` or `_`).
const AWS_LABEL: &[u8] = b"aws_secret_access_key";
/// Length of an AWS secret access key.
pub(super) const AWS_SECRET_LEN: usize = 40;

fn label_byte_matches(label: u8, byte: u8) -> bool {
    label.eq_ignore_ascii_case(&byte) || (label == b'_' && byte == b'-')
}

/// Where the value starts after the label: separators (`=`, `:`, quotes, spaces) with at
/// least one `=` or `:`; `None` when the text so far can't be a labelled value.
fn value_start(bytes: &[u8]) -> Option<usize> {
    let separators = run(bytes, |byte| matches!(byte, b' ' | b'\t' | b'"' | b'\'' | b':' | b'='));
    let has_assignment = bytes[..separators].iter().any(|byte| matches!(byte, b':' | b'='));
    (has_assignment && separators <= 6).then_some(separators)
}

/// `aws_secret_access_key = <40 base64 characters>`; the range is the value's.
fn find_aws_labelled(bytes: &[u8]) -> Option<(usize, usize)> {
    if bytes.len() < AWS_LABEL.len()
        || !AWS_LABEL.iter().zip(bytes).all(|(label, byte)| label_byte_matches(*label, *byte))
    {
        return None;
    }
    let start = AWS_LABEL.len() + value_start(&bytes[AWS_LABEL.len()..])?;
    let value = run(&bytes[start..], base64_char);
    (value == AWS_SECRET_LEN).then_some((start, start + value))
}

fn aws_labelled_viable(tail: &[u8]) -> bool {
    let compared = tail.len().min(AWS_LABEL.len());
    if !AWS_LABEL.iter().zip(&tail[..compared]).all(|(label, byte)| label_byte_matches(*label, *byte)) {
        return false;
    }
    let rest = &tail[compared..];
    let separators = run(rest, |byte| matches!(byte, b' ' | b'\t' | b'"' | b'\'' | b':' | b'='));
    if separators == rest.len() {
        return separators <= 6;
    }
    let Some(start) = value_start(rest) else { return false };
    let value = &rest[start..];
    run(value, base64_char) == value.len() && value.len() <= AWS_SECRET_LEN
}

/// An AWS secret access key written near an access key id: 40 base64 characters with
/// both cases (a git hash has one), standing alone, within `WINDOW` bytes of the id.
pub(super) fn find_aws_secret_near(bytes: &[u8], id_start: usize, id_end: usize) -> Option<(usize, usize)> {
    const WINDOW: usize = 200;
    let from = id_start.saturating_sub(WINDOW);
    let to = (id_end + WINDOW).min(bytes.len());
    let mut position = from;
    while position < to {
        let length = run(&bytes[position..], base64_char);
        if length == 0 {
            position += 1;
            continue;
        }
        let standalone = (position == 0 || !base64_char(bytes[position - 1]))
            && bytes.get(position + length).is_none_or(|byte| *byte != b'=');
        let candidate = &bytes[position..position + length];
        if standalone
            && length == AWS_SECRET_LEN
            && (position + length <= id_start || position >= id_end)
            && candidate.iter().any(u8::is_ascii_uppercase)
            && candidate.iter().any(u8::is_ascii_lowercase)
        {
            return Some((position, position + length));
        }
        position += length;
    }
    None
}
