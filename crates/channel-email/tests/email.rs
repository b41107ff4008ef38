//! Integration tests of the email adapter against real servers: Dovecot for IMAP and
//! aiosmtpd for SMTP, both started per test by `squidbot_testkit::mail` (scripts/install-mail-servers
//! installs them; scripts/test sets SQUIDBOT_TEST_DOVECOT and
//! SQUIDBOT_TEST_MAIL_PYTHON).

// The whole crate is test code; clippy's test allowance only reaches `#[test]`
// functions, not the shared harness.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The modules live in tests/email/.
mod email {
    mod connect;
    mod harness;
    mod receive;
    mod reply;
}
