//! Which mail is never answered: forged senders and automatic mail.
//!
//! Forged senders: the first `Authentication-Results` header (the topmost, added by the
//! server that received the mail; later ones may come from the sender) reports
//! `dmarc=fail`, or `spf=fail` without any `dkim=pass`. Mail without the header is
//! not judged here: a mailbox whose server doesn't check senders should be guarded by
//! the access policy (allow-lists), not by this filter.
//!
//! Automatic mail, answered by nobody to avoid mail loops: `Auto-Submitted` other than
//! `no` (RFC 3834), `Precedence: bulk`, `list`, `junk` or `auto_reply`, a `List-Id`
//! (mailing lists), `X-Autoreply`/`X-Autorespond` (autoresponders that predate RFC
//! 3834), and bounces (`Return-Path: <>`).

use std::fmt;

/// Why a mail is not delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SkipReason {
    /// The bot's own address sent it (a copy of its reply, a loop).
    OwnAddress,
    /// Not a mail at all (nothing could be parsed).
    Unreadable,
    /// No usable From address.
    NoSender,
    /// More than one From address: which one would be answered is ambiguous.
    SeveralSenders,
    /// The receiving server found the sender forged.
    Forged(String),
    /// An autoresponder, a list or a bounce sent it.
    Automatic(String),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::OwnAddress => formatter.write_str("it comes from the bot's own address"),
            SkipReason::Unreadable => formatter.write_str("it can't be read as a mail"),
            SkipReason::NoSender => formatter.write_str("it has no From address"),
            SkipReason::SeveralSenders => formatter.write_str("it has several From addresses"),
            SkipReason::Forged(result) => write!(formatter, "the receiving server found the sender forged ({result})"),
            SkipReason::Automatic(header) => write!(formatter, "it was sent automatically ({header})"),
        }
    }
}

/// Judges a mail by its raw headers (name, unfolded value), in the order they appear.
pub(crate) fn judge_headers<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<SkipReason> {
    let mut seen_authentication_results = false;
    for (name, value) in headers {
        let value = value.trim();
        let name = name.to_ascii_lowercase();
        match name.as_str() {
            "authentication-results" if !seen_authentication_results => {
                seen_authentication_results = true;
                if let Some(result) = forged_by_authentication_results(value) {
                    return Some(SkipReason::Forged(result));
                }
            }
            "auto-submitted" => {
                let kind = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
                if kind != "no" {
                    return Some(SkipReason::Automatic(format!("Auto-Submitted: {kind}")));
                }
            }
            "precedence" => {
                let precedence = value.to_ascii_lowercase();
                if matches!(precedence.as_str(), "bulk" | "list" | "junk" | "auto_reply") {
                    return Some(SkipReason::Automatic(format!("Precedence: {precedence}")));
                }
            }
            "list-id" => return Some(SkipReason::Automatic("List-Id".to_owned())),
            "x-autoreply" | "x-autorespond" => return Some(SkipReason::Automatic(name)),
            "return-path" if value.trim_matches(|character: char| character.is_whitespace()) == "<>" => {
                return Some(SkipReason::Automatic("Return-Path: <>".to_owned()));
            }
            _ => {}
        }
    }
    None
}

/// `Some("dmarc=fail")` or `Some("spf=fail")` when an `Authentication-Results` value
/// says the sender is forged.
fn forged_by_authentication_results(value: &str) -> Option<String> {
    let value = without_comments(value).to_ascii_lowercase();
    let mut spf_failed = false;
    let mut dkim_passed = false;
    // The first element is the id of the server that checked; results follow.
    for result in value.split(';').skip(1) {
        let Some((method, outcome)) = result.split_whitespace().next().and_then(|pair| pair.split_once('=')) else {
            continue;
        };
        let method = method.split('/').next().unwrap_or_default();
        match (method, outcome) {
            ("dmarc", "fail") => return Some("dmarc=fail".to_owned()),
            ("spf", "fail") => spf_failed = true,
            ("dkim", "pass") => dkim_passed = true,
            _ => {}
        }
    }
    (spf_failed && !dkim_passed).then(|| "spf=fail".to_owned())
}

/// The header value without RFC 5322 comments (`(...)`, nested), which may hold `;`.
fn without_comments(value: &str) -> String {
    let mut depth = 0usize;
    let mut kept = String::with_capacity(value.len());
    for character in value.chars() {
        match character {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            other if depth == 0 => kept.push(other),
            _ => {}
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(headers: &[(&str, &str)]) -> Option<SkipReason> {
        judge_headers(headers.iter().copied())
    }

    #[test]
    fn dmarc_failure_is_forged() {
        let verdict = judge(&[(
            "Authentication-Results",
            "mx.example.test; spf=pass smtp.mailfrom=example.org; dkim=none; dmarc=fail (p=reject) header.from=example.org",
        )]);
        assert_eq!(verdict, Some(SkipReason::Forged("dmarc=fail".to_owned())));
    }

    #[test]
    fn spf_failure_counts_only_without_a_dkim_pass() {
        let forged = judge(&[("Authentication-Results", "mx.example.test; spf=fail; dkim=fail")]);
        assert_eq!(forged, Some(SkipReason::Forged("spf=fail".to_owned())));
        let signed = judge(&[("Authentication-Results", "mx.example.test; spf=fail; dkim=pass header.d=example.org")]);
        assert_eq!(signed, None);
        assert_eq!(judge(&[("Authentication-Results", "mx.example.test; spf=softfail")]), None);
    }

    #[test]
    fn only_the_topmost_authentication_results_counts() {
        let verdict = judge(&[
            ("Authentication-Results", "mx.example.test; dmarc=pass; spf=pass; dkim=pass"),
            ("Authentication-Results", "attacker.example; dmarc=fail"),
        ]);
        assert_eq!(verdict, None);
        let verdict = judge(&[
            ("Authentication-Results", "mx.example.test; dmarc=fail"),
            ("Authentication-Results", "attacker.example; dmarc=pass"),
        ]);
        assert!(matches!(verdict, Some(SkipReason::Forged(_))));
    }

    #[test]
    fn comments_and_case_do_not_hide_a_failure() {
        let verdict = judge(&[("authentication-results", "mx.example.test (checked; twice); DMARC=FAIL (p=none)")]);
        assert_eq!(verdict, Some(SkipReason::Forged("dmarc=fail".to_owned())));
    }

    #[test]
    fn automatic_mail_is_recognised() {
        assert!(matches!(judge(&[("Auto-Submitted", "auto-replied")]), Some(SkipReason::Automatic(_))));
        assert!(matches!(
            judge(&[("Auto-Submitted", "auto-generated; owner-email=x")]),
            Some(SkipReason::Automatic(_))
        ));
        assert_eq!(judge(&[("Auto-Submitted", "No")]), None);
        assert!(matches!(judge(&[("Precedence", "Bulk")]), Some(SkipReason::Automatic(_))));
        assert_eq!(judge(&[("Precedence", "first-class")]), None);
        assert!(matches!(judge(&[("List-Id", "<team.example.org>")]), Some(SkipReason::Automatic(_))));
        assert!(matches!(judge(&[("X-Autoreply", "yes")]), Some(SkipReason::Automatic(_))));
        assert!(matches!(judge(&[("Return-Path", " <> ")]), Some(SkipReason::Automatic(_))));
        assert_eq!(judge(&[("Return-Path", "<ann@example.org>"), ("Subject", "hi")]), None);
    }
}
