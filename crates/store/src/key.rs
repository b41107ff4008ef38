//! Session key ↔ file name mapping: readable, reversible and unable to escape the
//! sessions directory.

use squidbot_core::store::StoreError;

/// Longest session key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 200;

/// Longest encoded file stem: most filesystems cap a name at 255 bytes and `.jsonl`
/// takes six of them.
const MAX_FILE_STEM_BYTES: usize = 255 - ".jsonl".len();

const HEX_DIGITS: &[u8; 16] = b"0123456789ABCDEF";

/// Bytes written as themselves; every other byte is percent-encoded.
fn is_kept(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b':' | b'.' | b'_' | b'@' | b'+' | b'-')
}

fn invalid(key: &str, reason: String) -> StoreError {
    StoreError::InvalidKey { key: key.to_owned(), reason }
}

/// The file stem (name without `.jsonl`) that stores the session `key`.
///
/// Keeps `[A-Za-z0-9:._@+-]` and writes every other byte as `%XX`, so `/`, `%`, NUL and
/// non-ASCII text can't form a path and the mapping can be reversed with
/// [`decode_key`]. A leading `.` is encoded too, so no key names a hidden file, `.` or
/// `..`.
pub fn encode_key(key: &str) -> Result<String, StoreError> {
    if key.is_empty() {
        return Err(invalid(key, "it is empty".to_owned()));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(invalid(key, format!("it is {} bytes long and the limit is {MAX_KEY_BYTES}", key.len())));
    }
    let mut encoded = String::with_capacity(key.len());
    for (index, byte) in key.bytes().enumerate() {
        let leading_dot = index == 0 && byte == b'.';
        if is_kept(byte) && !leading_dot {
            encoded.push(char::from(byte));
        } else {
            encoded.push('%');
            encoded.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
            encoded.push(char::from(HEX_DIGITS[usize::from(byte & 0x0F)]));
        }
    }
    if encoded.len() > MAX_FILE_STEM_BYTES {
        return Err(invalid(
            key,
            format!("its file name would be {} bytes long and the limit is {MAX_FILE_STEM_BYTES}", encoded.len()),
        ));
    }
    Ok(encoded)
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// The session key stored in the file with this stem, `None` when the stem is not
/// exactly what [`encode_key`] produces for some key (so stray files are never
/// mistaken for sessions and every session has exactly one file name).
pub fn decode_key(file_stem: &str) -> Option<String> {
    let mut decoded = Vec::with_capacity(file_stem.len());
    let mut bytes = file_stem.bytes();
    while let Some(byte) = bytes.next() {
        if byte == b'%' {
            let high = hex_value(bytes.next()?)?;
            let low = hex_value(bytes.next()?)?;
            decoded.push(high << 4 | low);
        } else if is_kept(byte) {
            decoded.push(byte);
        } else {
            return None;
        }
    }
    let key = String::from_utf8(decoded).ok()?;
    let canonical = encode_key(&key).ok()?;
    (canonical == file_stem).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_keys_stay_readable() {
        for key in
            ["cli:local", "telegram:12345", "matrix:@user:example.org", "email:a@b.c", "discord:guild-1_channel+2"]
        {
            assert_eq!(encode_key(key).unwrap(), key);
        }
    }

    #[test]
    fn tricky_keys_round_trip() {
        for key in [
            "cli:local",
            "a/b",
            "100%",
            "%41",
            ".hidden",
            ".",
            "..",
            "a.",
            "with space",
            "tab\there",
            "nul\0byte",
            "back\\slash",
            "ünïcødé:日本",
            "emoji:🦑",
            "../../etc/passwd",
            "x".repeat(MAX_KEY_BYTES).as_str(),
        ] {
            let encoded = encode_key(key).unwrap();
            assert_eq!(decode_key(&encoded).as_deref(), Some(key), "{encoded}");
        }
    }

    #[test]
    fn path_injection_is_encoded() {
        let encoded = encode_key("../../etc/passwd").unwrap();
        assert_eq!(encoded, "%2E.%2F..%2Fetc%2Fpasswd");
        assert!(!encoded.contains('/'));
        assert!(!encoded.starts_with('.'));
    }

    #[test]
    fn leading_dot_is_encoded_but_later_dots_are_kept() {
        assert_eq!(encode_key(".hidden").unwrap(), "%2Ehidden");
        assert_eq!(encode_key("..").unwrap(), "%2E.");
        assert_eq!(encode_key("a.b").unwrap(), "a.b");
    }

    #[test]
    fn percent_and_slash_are_encoded() {
        assert_eq!(encode_key("a/b%c").unwrap(), "a%2Fb%25c");
    }

    #[test]
    fn empty_and_long_keys_are_refused() {
        assert!(matches!(encode_key(""), Err(StoreError::InvalidKey { .. })));
        let long = "x".repeat(MAX_KEY_BYTES + 1);
        assert!(matches!(encode_key(&long), Err(StoreError::InvalidKey { .. })));
    }

    #[test]
    fn keys_whose_file_name_would_be_too_long_are_refused() {
        // 100 two-byte characters: 200 bytes, but 600 once percent-encoded.
        let key = "é".repeat(100);
        assert_eq!(key.len(), MAX_KEY_BYTES);
        let error = encode_key(&key).unwrap_err();
        assert!(error.to_string().contains("file name"), "{error}");
    }

    #[test]
    fn non_canonical_stems_are_not_keys() {
        for stem in ["", ".hidden", "a/b", "a b", "%2e", "%41", "%", "%4", "%ZZ", "%FF", "%C3"] {
            assert_eq!(decode_key(stem), None, "{stem:?}");
        }
    }
}
