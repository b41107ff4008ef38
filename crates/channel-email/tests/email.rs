//! Integration tests of the email adapter against real servers: Dovecot for IMAP and
//! aiosmtpd for SMTP, both started per test by the harness (scripts/install-mail-servers
//! installs them; scripts/test sets SQUIDBOT_TEST_DOVECOT and
//! SQUIDBOT_TEST_MAIL_PYTHON).

mod connect;
mod harness;
mod receive;
mod reply;
