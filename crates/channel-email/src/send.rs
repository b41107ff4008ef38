//! Sending replies over SMTP: the message (threading headers, plain and HTML
//! alternatives, attachments) and what the server's answer means.
//!
//! Replies carry `Auto-Submitted: auto-replied` (RFC 3834) so other robots and
//! vacation responders don't answer them, which keeps two bots from mailing each other
//! forever.

use std::time::Duration;

use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Attachment as MimeAttachment, Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::Tls;
use lettre::transport::smtp::extension::ClientId;
use lettre::{Address, AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use squidbot_channels::{Attachment, ChannelError, ReadAttachment};

use crate::settings::{EmailSettings, Security, domain_of};
use crate::text::text_to_html;
use crate::threads::ThreadEntry;
use crate::tls::{Trust, certificate_problem};

/// How long one SMTP exchange may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(60);

/// SMTP codes that mean the login was refused (RFC 4954): retrying won't help.
const AUTHENTICATION_CODES: [u16; 4] = [530, 534, 535, 538];

/// The configured SMTP server and the bot's identity on it.
pub(crate) struct Outbox {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    domain: String,
    server: String,
}

impl Outbox {
    /// The transport for `settings.smtp`, trusting `trust`.
    pub(crate) fn new(settings: &EmailSettings, trust: &Trust) -> Result<Self, ChannelError> {
        let smtp = &settings.smtp;
        let address: Address = settings.address.parse().map_err(|error| {
            ChannelError::fatal(format!("can't use {:?} as the bot's address: {error}", settings.address))
        })?;
        let domain = domain_of(&settings.address).unwrap_or_default().to_ascii_lowercase();
        let tls = match smtp.security {
            Security::Tls => Tls::Wrapper(trust.smtp_parameters(&smtp.host)?),
            Security::StartTls => Tls::Required(trust.smtp_parameters(&smtp.host)?),
            Security::Plain => Tls::None,
        };
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(smtp.host.as_str())
            .port(smtp.port)
            .tls(tls)
            .hello_name(ClientId::Domain(domain.clone()))
            .timeout(Some(SMTP_TIMEOUT));
        if !smtp.username.is_empty() {
            builder = builder.credentials(Credentials::new(smtp.username.clone(), smtp.password.expose().to_owned()));
        }
        Ok(Self {
            transport: builder.build(),
            from: Mailbox::new(settings.display_name.clone(), address),
            domain,
            server: format!("{}:{}", smtp.host, smtp.port),
        })
    }

    /// A new Message-ID in the bot's domain.
    pub(crate) fn new_message_id(&self) -> String {
        format!("<{}@{}>", uuid::Uuid::new_v4().simple(), self.domain)
    }

    /// Builds the mail: a reply to `target` when there is one, else a new mail to
    /// `new_recipient` whose subject is the text's first line.
    pub(crate) async fn compose(&self, draft: Draft<'_>) -> Result<Message, ChannelError> {
        let recipient_text = draft.recipient.to_owned();
        let recipient: Address = recipient_text
            .parse()
            .map_err(|error| ChannelError::rejected(format!("can't send mail to {recipient_text:?}: {error}")))?;
        let mut builder = Message::builder()
            .from(self.from.clone())
            .to(Mailbox::new(draft.recipient_name.map(str::to_owned), recipient))
            .subject(draft.subject)
            .message_id(Some(draft.message_id.to_owned()))
            .date_now()
            .raw_header(HeaderValue::new(HeaderName::new_from_ascii_str("Auto-Submitted"), "auto-replied".to_owned()));
        if let Some(in_reply_to) = draft.in_reply_to {
            builder = builder.in_reply_to(in_reply_to.to_owned());
        }
        if !draft.references.is_empty() {
            builder = builder.references(draft.references.join(" "));
        }
        let alternative = MultiPart::alternative_plain_html(draft.text.to_owned(), text_to_html(draft.text));
        let body = if draft.attachments.is_empty() {
            alternative
        } else {
            let mut mixed = MultiPart::mixed().multipart(alternative);
            for attachment in draft.attachments {
                mixed = mixed.singlepart(mime_attachment(attachment).await?);
            }
            mixed
        };
        builder.multipart(body).map_err(|error| ChannelError::rejected(format!("can't build the mail: {error}")))
    }

    /// Sends a built mail.
    pub(crate) async fn deliver(&self, mail: Message) -> Result<(), ChannelError> {
        match self.transport.send(mail).await {
            Ok(_response) => Ok(()),
            Err(error) => Err(classify(&self.server, &error)),
        }
    }
}

/// What goes into one mail.
#[derive(Debug)]
pub(crate) struct Draft<'a> {
    /// The address it goes to.
    pub recipient: &'a str,
    /// Their display name.
    pub recipient_name: Option<&'a str>,
    /// The subject.
    pub subject: String,
    /// Its Message-ID.
    pub message_id: &'a str,
    /// The Message-ID it answers.
    pub in_reply_to: Option<&'a str>,
    /// The thread's ids, oldest first.
    pub references: Vec<String>,
    /// The plain text.
    pub text: &'a str,
    /// Files to attach.
    pub attachments: &'a [Attachment],
}

impl<'a> Draft<'a> {
    /// A reply to `target`.
    pub(crate) fn reply(
        target: &'a ThreadEntry,
        message_id: &'a str,
        text: &'a str,
        attachments: &'a [Attachment],
    ) -> Self {
        Self {
            recipient: &target.recipient,
            recipient_name: target.recipient_name.as_deref(),
            subject: target.reply_subject(),
            message_id,
            in_reply_to: Some(&target.message_id),
            references: target.reply_references(),
            text,
            attachments,
        }
    }

    /// A new mail starting a thread, its subject the text's first line.
    pub(crate) fn new_thread(
        recipient: &'a str,
        message_id: &'a str,
        text: &'a str,
        attachments: &'a [Attachment],
    ) -> Self {
        Self {
            recipient,
            recipient_name: None,
            subject: first_line_subject(text),
            message_id,
            in_reply_to: None,
            references: Vec::new(),
            text,
            attachments,
        }
    }
}

/// The first non-empty line, cut to 78 characters.
fn first_line_subject(text: &str) -> String {
    const LONGEST: usize = 78;
    let line = text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or_default();
    if line.chars().count() <= LONGEST {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(LONGEST - 1).collect();
    cut.push('…');
    cut
}

async fn mime_attachment(attachment: &Attachment) -> Result<lettre::message::SinglePart, ChannelError> {
    let bytes = attachment.bytes().await?;
    // The name is the sender's or the model's: keep only a file name, never a path.
    let name = attachment.name.rsplit(['/', '\\']).next().unwrap_or_default().trim();
    let name = if name.is_empty() { "attachment" } else { name };
    let content_type = ContentType::parse(&attachment.mime)
        .or_else(|_invalid| ContentType::parse("application/octet-stream"))
        .map_err(|error| ChannelError::rejected(format!("can't attach {name}: {error}")))?;
    Ok(MimeAttachment::new(name.to_owned()).body(bytes, content_type))
}

/// What an SMTP failure means: a refused login or an untrusted certificate is fatal,
/// 4xx transient, other 5xx a rejection of this mail, anything on the wire transient.
fn classify(server: &str, error: &lettre::transport::smtp::Error) -> ChannelError {
    if let Some(problem) = certificate_problem(error) {
        return ChannelError::fatal(format!(
            "can't send mail through {server}: its TLS certificate is not trusted ({problem}); add its CA to \
             extra_root_certificates if it is yours"
        ));
    }
    if let Some(code) = error.status() {
        let number = u16::from(code);
        if AUTHENTICATION_CODES.contains(&number) {
            return ChannelError::fatal(format!("can't log in to SMTP server {server}: {error}"));
        }
        if error.is_transient() {
            return ChannelError::transient(format!("can't send mail through {server}: {error}"));
        }
        return ChannelError::rejected(format!("can't send mail through {server}: {error}"));
    }
    if error.is_client() || error.is_tls() {
        // The server lacks something the settings require (STARTTLS, a login
        // mechanism), or TLS can't be set up as configured.
        return ChannelError::fatal(format!("can't send mail through {server}: {error}"));
    }
    ChannelError::transient(format!("can't send mail through {server}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_threads_take_their_subject_from_the_first_line() {
        assert_eq!(first_line_subject("\n  Daily summary  \nmore"), "Daily summary");
        let long = "x".repeat(100);
        let subject = first_line_subject(&long);
        assert_eq!(subject.chars().count(), 78);
        assert!(subject.ends_with('…'));
    }
}
