//! HTML character references, decoded the same way by every adapter that turns HTML
//! into plain text (Telegram's fallback, Matrix's plain body, email's HTML parts), from
//! core's one entity table.

use squidbot_core::html_entities;

/// The character an entity (`amp`, `#39`, `#x27`, without `&` and `;`) stands for;
/// `None` for unknown names and for numbers that are no character or a control
/// character other than tab and line breaks.
pub fn html_entity(reference: &str) -> Option<char> {
    if let Some(number) = reference.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        // NUL and other C0 controls besides tab and newlines never belong in text.
        return char::from_u32(code).filter(|character| !character.is_control() || "\t\n\r".contains(*character));
    }
    match reference {
        // Plain text has no non-breaking space worth keeping; chat clients show a space.
        "nbsp" => Some(' '),
        name => html_entities::named(name).and_then(|value| value.chars().next()),
    }
}

#[cfg(test)]
mod tests {
    use super::html_entity;

    #[test]
    fn named_and_numeric_references_decode_and_controls_do_not() {
        assert_eq!(html_entity("amp"), Some('&'));
        assert_eq!(html_entity("#39"), Some('\''));
        assert_eq!(html_entity("#x27"), Some('\''));
        assert_eq!(html_entity("#0"), None);
        assert_eq!(html_entity("#x110000"), None);
        assert_eq!(html_entity("bogus"), None);
    }

    #[test]
    fn names_come_from_cores_table_and_nbsp_is_a_plain_space() {
        assert_eq!(html_entity("eacute"), Some('é'));
        assert_eq!(html_entity("rarr"), Some('→'));
        assert_eq!(html_entity("nbsp"), Some(' '));
    }
}
