//! The forms a configured secret is searched in besides itself: base64 (standard and
//! URL-safe, at each of the three alignments it can take inside a longer encoded text)
//! and percent-encoding; and the view of a text with zero-width characters removed, so a
//! value split by them is still found.

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 of `data` without padding.
fn encode_base64(data: &[u8]) -> Vec<u8> {
    let mut output = Vec::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let mut group = [0u8; 3];
        group[..chunk.len()].copy_from_slice(chunk);
        let value = (u32::from(group[0]) << 16) | (u32::from(group[1]) << 8) | u32::from(group[2]);
        for index in 0..=chunk.len() {
            output.push(STANDARD[((value >> (18 - 6 * index)) & 0x3f) as usize]);
        }
    }
    output
}

/// The characters that encode `value` wherever it sits in a longer base64 text: for each
/// alignment (0, 1 or 2 bytes before it in its group of three), the characters whose six
/// bits all come from `value`, in the standard and the URL-safe alphabet.
fn base64_forms(value: &[u8]) -> Vec<Vec<u8>> {
    let mut forms = Vec::with_capacity(6);
    for alignment in 0..3usize {
        let mut padded = vec![0u8; alignment];
        padded.extend_from_slice(value);
        let encoded = encode_base64(&padded);
        let first = (8 * alignment).div_ceil(6);
        let last = (8 * (alignment + value.len())) / 6;
        if last <= first {
            continue;
        }
        let standard = encoded[first..last].to_vec();
        let url_safe: Vec<u8> = standard
            .iter()
            .map(|byte| match byte {
                b'+' => b'-',
                b'/' => b'_',
                other => *other,
            })
            .collect();
        if url_safe != standard {
            forms.push(url_safe);
        }
        forms.push(standard);
    }
    forms
}

/// `value` percent-encoded (every byte but the unreserved ones), with upper- and
/// lower-case hex digits; none when nothing needs encoding.
fn percent_forms(value: &[u8]) -> Vec<Vec<u8>> {
    let unreserved = |byte: u8| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~');
    if value.iter().all(|byte| unreserved(*byte)) {
        return Vec::new();
    }
    let encode = |digits: &[u8; 16]| {
        let mut output = Vec::with_capacity(value.len() * 3);
        for byte in value {
            if unreserved(*byte) {
                output.push(*byte);
            } else {
                output.extend_from_slice(&[b'%', digits[usize::from(byte >> 4)], digits[usize::from(byte & 0xf)]]);
            }
        }
        output
    };
    let upper = encode(b"0123456789ABCDEF");
    let lower = encode(b"0123456789abcdef");
    if upper == lower { vec![upper] } else { vec![upper, lower] }
}

/// Every form `value` is searched in: itself, base64 and percent-encoded.
pub(super) fn forms(value: &str) -> Vec<Vec<u8>> {
    let bytes = value.as_bytes();
    let mut forms = vec![bytes.to_vec()];
    forms.extend(base64_forms(bytes));
    forms.extend(percent_forms(bytes));
    forms
}

/// Zero-width characters that render as nothing (ZWSP, ZWNJ, ZWJ, word joiner, BOM).
pub(super) fn is_invisible(character: char) -> bool {
    matches!(character, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}')
}

/// A text with its zero-width characters removed, and where each byte came from.
pub(super) struct Visible {
    /// The text without zero-width characters.
    pub(super) text: String,
    /// For each byte of `text`, its position in the original; one more entry for the end.
    origin: Vec<usize>,
}

impl Visible {
    /// The view of `text`, or `None` when it has no zero-width characters.
    pub(super) fn of(text: &str) -> Option<Self> {
        if !text.chars().any(is_invisible) {
            return None;
        }
        let mut visible = String::with_capacity(text.len());
        let mut origin = Vec::with_capacity(text.len() + 1);
        for (position, character) in text.char_indices() {
            if is_invisible(character) {
                continue;
            }
            visible.push(character);
            origin.extend((0..character.len_utf8()).map(|offset| position + offset));
        }
        origin.push(text.len());
        Some(Self { text: visible, origin })
    }

    /// The original range of `start..end` in the view (both on character boundaries).
    pub(super) fn original(&self, start: usize, end: usize) -> (usize, usize) {
        let original_end = if end == 0 { 0 } else { self.origin[end - 1] + 1 };
        (self.origin[start], original_end.max(self.origin[start]))
    }

    /// The original position of view position `position`.
    pub(super) fn original_position(&self, position: usize) -> usize {
        self.origin[position]
    }

    /// The view position of original position `position` (the first byte at or after it).
    pub(super) fn view_position(&self, position: usize) -> usize {
        self.origin.partition_point(|origin| *origin < position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_forms_are_found_at_every_alignment() {
        let value = b"correct-horse-battery";
        let forms = base64_forms(value);
        for before in ["", "x", "xy", "xyz", "wxyz"] {
            for after in ["", "!", "!?"] {
                let mut text = before.as_bytes().to_vec();
                text.extend_from_slice(value);
                text.extend_from_slice(after.as_bytes());
                let encoded = encode_base64(&text);
                assert!(
                    forms.iter().any(|form| encoded.windows(form.len()).any(|window| window == form.as_slice())),
                    "{before:?} + value + {after:?}"
                );
            }
        }
    }

    #[test]
    fn percent_forms_encode_reserved_bytes_only() {
        assert!(percent_forms(b"plain-value_1.2~").is_empty());
        assert_eq!(percent_forms(b"a/b+c"), [b"a%2Fb%2Bc".to_vec(), b"a%2fb%2bc".to_vec()]);
    }

    #[test]
    fn the_visible_view_maps_back_to_the_original() {
        let text = "ab\u{200B}cd\u{FEFF}e";
        let visible = Visible::of(text).unwrap_or_else(|| unreachable!());
        assert_eq!(visible.text, "abcde");
        assert_eq!(visible.original(1, 4), (1, 7));
        assert_eq!(&text[1..7], "b\u{200B}cd");
        assert!(Visible::of("plain").is_none());
    }
}
