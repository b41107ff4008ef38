//! HTML character references (`&amp;`, `&#233;`, `&#x1F600;`): numeric ones in full,
//! named ones for the characters real pages use most; an unknown name stays as written.
//! The one table behind web pages read for the model and the chat adapters' HTML to
//! plain text, decoded either as browsers do ([`decode`]) or strictly ([`decode_strict`]).

/// Named references decoded, sorted by name for binary search.
const NAMED: &[(&str, &str)] = &[
    ("AElig", "Æ"),
    ("Aacute", "Á"),
    ("Agrave", "À"),
    ("Aring", "Å"),
    ("Atilde", "Ã"),
    ("Auml", "Ä"),
    ("Ccedil", "Ç"),
    ("Eacute", "É"),
    ("Egrave", "È"),
    ("Ntilde", "Ñ"),
    ("Oacute", "Ó"),
    ("Oslash", "Ø"),
    ("Ouml", "Ö"),
    ("Uacute", "Ú"),
    ("Uuml", "Ü"),
    ("aacute", "á"),
    ("acirc", "â"),
    ("aelig", "æ"),
    ("agrave", "à"),
    ("amp", "&"),
    ("apos", "'"),
    ("aring", "å"),
    ("atilde", "ã"),
    ("auml", "ä"),
    ("bdquo", "„"),
    ("bull", "•"),
    ("ccedil", "ç"),
    ("cent", "¢"),
    ("copy", "©"),
    ("dagger", "†"),
    ("darr", "↓"),
    ("deg", "°"),
    ("divide", "÷"),
    ("eacute", "é"),
    ("ecirc", "ê"),
    ("egrave", "è"),
    ("emsp", "\u{2003}"),
    ("ensp", "\u{2002}"),
    ("euml", "ë"),
    ("euro", "€"),
    ("frac12", "½"),
    ("frac14", "¼"),
    ("frac34", "¾"),
    ("ge", "≥"),
    ("gt", ">"),
    ("harr", "↔"),
    ("hellip", "…"),
    ("iacute", "í"),
    ("icirc", "î"),
    ("iexcl", "¡"),
    ("igrave", "ì"),
    ("iquest", "¿"),
    ("iuml", "ï"),
    ("laquo", "«"),
    ("larr", "←"),
    ("ldquo", "“"),
    ("le", "≤"),
    ("lsaquo", "‹"),
    ("lsquo", "‘"),
    ("lt", "<"),
    ("mdash", "—"),
    ("micro", "µ"),
    ("middot", "·"),
    ("minus", "−"),
    ("nbsp", "\u{a0}"),
    ("ndash", "–"),
    ("ne", "≠"),
    ("not", "¬"),
    ("ntilde", "ñ"),
    ("oacute", "ó"),
    ("ocirc", "ô"),
    ("ograve", "ò"),
    ("oslash", "ø"),
    ("otilde", "õ"),
    ("ouml", "ö"),
    ("para", "¶"),
    ("plusmn", "±"),
    ("pound", "£"),
    ("quot", "\""),
    ("raquo", "»"),
    ("rarr", "→"),
    ("rdquo", "”"),
    ("reg", "®"),
    ("rsaquo", "›"),
    ("rsquo", "’"),
    ("sbquo", "‚"),
    ("sect", "§"),
    ("shy", "\u{ad}"),
    ("szlig", "ß"),
    ("thinsp", "\u{2009}"),
    ("times", "×"),
    ("trade", "™"),
    ("uacute", "ú"),
    ("uarr", "↑"),
    ("ucirc", "û"),
    ("ugrave", "ù"),
    ("uuml", "ü"),
    ("yacute", "ý"),
    ("yen", "¥"),
    ("yuml", "ÿ"),
    ("zwj", "\u{200d}"),
    ("zwnj", "\u{200c}"),
];

/// Names browsers also accept without the closing `;`.
const LEGACY_WITHOUT_SEMICOLON: [&str; 5] = ["amp", "lt", "gt", "quot", "nbsp"];

/// Longest name worth looking for.
const MAX_NAME_LEN: usize = 32;

/// What the named reference `name` (without `&` and `;`) stands for.
pub fn named(name: &str) -> Option<&'static str> {
    NAMED
        .binary_search_by(|(candidate, _)| candidate.cmp(&name))
        .ok()
        .and_then(|index| NAMED.get(index))
        .map(|(_, value)| *value)
}

/// `text` with its character references decoded as browsers read pages: `&amp` and a
/// few others without their `;`, numbers without theirs, an impossible number as
/// U+FFFD, `&nbsp;` as U+00A0.
pub fn decode(text: &str) -> String {
    decode_with(text, reference_at)
}

/// `text` with only well-formed references decoded, for text shown as plain text (mail,
/// chat fallbacks): a reference needs its `;`, a number must name a character that is
/// no control (tab and line breaks aside; 128 to 159 read as Windows-1252 punctuation,
/// as pages mean them), and `&nbsp;` becomes a plain space. Anything else stays as
/// written, so no NUL or terminal control sneaks in through a reference.
pub fn decode_strict(text: &str) -> String {
    decode_with(text, strict_reference_at)
}

/// `text` with each reference `reference_at` recognises replaced.
fn decode_with(text: &str, reference_at: fn(&str) -> Option<(String, usize)>) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut output = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(position) = rest.find('&') {
        output.push_str(&rest[..position]);
        rest = &rest[position..];
        match reference_at(rest) {
            Some((decoded, consumed)) => {
                output.push_str(&decoded);
                rest = &rest[consumed..];
            }
            None => {
                output.push('&');
                rest = &rest[1..];
            }
        }
    }
    output.push_str(rest);
    output
}

/// The well-formed reference at the start of `text` (which begins with `&`) and its
/// length in bytes, by the rules of [`decode_strict`].
fn strict_reference_at(text: &str) -> Option<(String, usize)> {
    let body = &text[1..];
    let length =
        body.bytes().take(MAX_NAME_LEN).take_while(|byte| byte.is_ascii_alphanumeric() || *byte == b'#').count();
    if !body[length..].starts_with(';') {
        return None;
    }
    let name = &body[..length];
    let character = match name.strip_prefix('#') {
        Some(number) => {
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            match code {
                0x80..=0x9F => windows_1252_c1(code as u8),
                _ => char::from_u32(code)?,
            }
        }
        // Plain text has no non-breaking space worth keeping; chat clients show a space.
        None if name == "nbsp" => ' ',
        None => named(name)?.chars().next()?,
    };
    // NUL and other controls besides tab and line breaks never belong in text.
    if character.is_control() && !matches!(character, '\t' | '\n' | '\r') {
        return None;
    }
    Some((character.to_string(), 1 + length + 1))
}

/// The reference at the start of `text` (which begins with `&`) and its length in bytes.
fn reference_at(text: &str) -> Option<(String, usize)> {
    let body = &text[1..];
    if let Some(numeric) = body.strip_prefix('#') {
        let (digits, radix, prefix) = match numeric.strip_prefix(['x', 'X']) {
            Some(hex) => (hex, 16, 2),
            None => (numeric, 10, 1),
        };
        let length = digits.bytes().take_while(|byte| (*byte as char).is_digit(radix)).count();
        if length == 0 {
            return None;
        }
        let value = u32::from_str_radix(&digits[..length.min(8)], radix).unwrap_or(0xFFFD);
        let character = match value {
            0 => '\u{FFFD}',
            // Windows-1252 punctuation that pages write as numeric references.
            0x80..=0x9F => windows_1252_c1(value as u8),
            _ => char::from_u32(value).unwrap_or('\u{FFFD}'),
        };
        let semicolon = usize::from(digits[length..].starts_with(';'));
        return Some((character.to_string(), 1 + prefix + length + semicolon));
    }
    let length = body.bytes().take(MAX_NAME_LEN).take_while(u8::is_ascii_alphanumeric).count();
    let name = &body[..length];
    let terminated = body[length..].starts_with(';');
    if !terminated && !LEGACY_WITHOUT_SEMICOLON.contains(&name) {
        return None;
    }
    Some((named(name)?.to_owned(), 1 + length + usize::from(terminated)))
}

/// The character Windows-1252 puts at `byte` in `0x80..=0x9F`.
pub fn windows_1252_c1(byte: u8) -> char {
    const TABLE: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž', '\u{8f}', '\u{90}', '‘',
        '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}', 'ž', 'Ÿ',
    ];
    TABLE.get(usize::from(byte.wrapping_sub(0x80))).copied().unwrap_or('\u{FFFD}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted() {
        assert!(NAMED.windows(2).all(|pair| pair[0].0 < pair[1].0), "NAMED must stay sorted");
    }

    #[test]
    fn references_decode() {
        assert_eq!(decode("Fish &amp; Chips &lt;3 &quot;q&quot; caf&eacute;"), "Fish & Chips <3 \"q\" café");
        assert_eq!(decode("&#65;&#x42;&#X43;&#x1F600;"), "ABC😀");
        assert_eq!(decode("&#150; &#0; &#xD800;"), "– \u{FFFD} \u{FFFD}");
        assert_eq!(decode("a &amp b &nbsp;c"), "a & b \u{a0}c");
    }

    #[test]
    fn strict_decoding_needs_semicolons_and_printable_characters() {
        assert_eq!(decode_strict("&amp; &#39;&#x27; &eacute;&rarr; &nbsp;|"), "& '' é→  |");
        assert_eq!(decode_strict("&#150;"), "–");
        assert_eq!(
            decode_strict("&#0;&#xD800;&#1;&#x110000;&#99999999999;"),
            "&#0;&#xD800;&#1;&#x110000;&#99999999999;"
        );
        assert_eq!(decode_strict("&amp b &bogus; &#; & AT&T &#9;"), "&amp b &bogus; &#; & AT&T \t");
    }

    #[test]
    fn unknown_or_broken_references_stay_as_written() {
        assert_eq!(decode("AT&T &bogus; &#; & &#xZZ; &copy"), "AT&T &bogus; &#; & &#xZZ; &copy");
        assert_eq!(decode("?a=1&b=2"), "?a=1&b=2");
        assert_eq!(decode("&#99999999999;"), "\u{FFFD}");
    }
}
