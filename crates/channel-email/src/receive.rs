//! The receive loop: log in, select the mailbox, hand every new mail to the manager,
//! then wait for more with IDLE (or by polling when the server can't IDLE);
//! reconnect with a backoff when the connection fails.
//!
//! Which mail is new: with a saved position for the mailbox's UIDVALIDITY, every mail
//! whose UID is above the last handled one (read or not, so a mail someone opened in a
//! mail client is still answered once); without one (first start, or the mailbox was
//! rebuilt), the unseen mail. A delivered mail is flagged `\Seen`; a skipped one
//! (forged, automatic) stays unseen for a person to look at. The position is saved
//! after every mail, so a restart answers nothing twice and misses nothing.

use std::collections::HashMap;
use std::time::Duration;

use async_imap::extensions::idle::IdleResponse;
use async_imap::types::{Fetch, UnsolicitedResponse};
use futures_util::TryStreamExt;
use jiff::Timestamp;
use squidbot_channels::{
    Backoff, ChannelError, ChannelErrorKind, Conversation, ConversationKind, InboundMessage, InboundSink, Sender,
};
use tokio_util::sync::CancellationToken;

use crate::EmailChannel;
use crate::imap::{self, ImapSession, imap_error, timed};
use crate::parse::{MailContext, ParsedMail, Verdict, read_mail, read_oversized};
use crate::state::{Position, PositionStore};
use crate::threads::ThreadEntry;

/// IDLE is ended and started again this often (RFC 2177 asks for less than 29 min).
const IDLE_RENEW: Duration = Duration::from_secs(25 * 60);

/// Without any word from the server for this long during IDLE, the connection is
/// checked by ending IDLE (servers that keep IDLE alive send something every few
/// minutes).
const IDLE_SILENCE: Duration = Duration::from_secs(5 * 60);

/// Connection attempts in a row that may fail before the loop gives up.
const MAX_FAILED_ATTEMPTS: u32 = 6;

/// First wait after a failed connection; doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How many mails are fetched per batch of sizes.
const BATCH: usize = 50;

/// A failed FETCH: the server refused (NO) or the connection failed.
enum FetchError {
    Refused(String),
    Failed(ChannelError),
}

/// Why a session ended without failing.
enum Stop {
    /// Shutdown was requested.
    Shutdown,
    /// The manager stopped reading.
    SinkClosed,
}

/// The receive loop of one channel.
pub(crate) struct Receiver<'a> {
    channel: &'a EmailChannel,
    inbound: InboundSink,
    shutdown: CancellationToken,
    store: PositionStore,
    bot_address: String,
}

impl<'a> Receiver<'a> {
    pub(crate) fn new(channel: &'a EmailChannel, inbound: InboundSink, shutdown: CancellationToken) -> Self {
        let settings = &channel.settings;
        Self {
            store: PositionStore::new(&settings.state_dir, &settings.imap.mailbox),
            bot_address: settings.address.to_lowercase(),
            channel,
            inbound,
            shutdown,
        }
    }

    fn server(&self) -> String {
        format!("{}:{}", self.channel.settings.imap.host, self.channel.settings.imap.port)
    }

    /// Runs sessions until shutdown, a fatal error, or too many failures in a row.
    pub(crate) async fn run(&self) -> Result<(), ChannelError> {
        let mut failed_attempts = 0u32;
        loop {
            let mut caught_up = false;
            let error = match self.session(&mut caught_up).await {
                Ok(Stop::Shutdown) => return Ok(()),
                Ok(Stop::SinkClosed) => {
                    tracing::info!(channel = %self.channel.settings.name, "the channel manager stopped; email receive loop ends");
                    return Ok(());
                }
                Err(error) => error,
            };
            match error.kind {
                ChannelErrorKind::Fatal | ChannelErrorKind::Rejected => return Err(error),
                ChannelErrorKind::Transient | ChannelErrorKind::RateLimited { .. } => {}
            }
            // A session that got through the mailbox worked; one that failed before
            // (connecting, logging in, or on some mail) counts towards giving up.
            failed_attempts = if caught_up { 1 } else { failed_attempts + 1 };
            if failed_attempts >= MAX_FAILED_ATTEMPTS {
                return Err(ChannelError::transient(format!(
                    "{error} (gave up after {failed_attempts} failed attempts in a row)"
                )));
            }
            let delay = backoff(failed_attempts);
            tracing::warn!(
                channel = %self.channel.settings.name,
                %error,
                retry_in_ms = delay.as_millis(),
                "email connection failed; reconnecting"
            );
            tokio::select! {
                () = self.shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One connection: log in, then take new mail and wait, until something fails.
    /// `caught_up` is set once all mail present at login was handled.
    async fn session(&self, caught_up: &mut bool) -> Result<Stop, ChannelError> {
        let settings = &self.channel.settings;
        let server = self.server();
        let connecting = imap::connect(&settings.imap, &self.channel.trust);
        let mut session = tokio::select! {
            () = self.shutdown.cancelled() => return Ok(Stop::Shutdown),
            session = connecting => session?,
        };
        let mailbox =
            timed(&server, "select the mailbox", session.select(&settings.imap.mailbox)).await?.map_err(|error| {
                match error {
                    async_imap::error::Error::No(reason) => ChannelError::fatal(format!(
                        "can't select mailbox {} on IMAP server {server}: {}",
                        settings.imap.mailbox,
                        reason.trim()
                    )),
                    other => imap_error(&server, "select the mailbox", other),
                }
            })?;
        let uid_validity = mailbox.uid_validity.ok_or_else(|| {
            ChannelError::transient(format!(
                "can't select mailbox {} on IMAP server {server}: no UIDVALIDITY",
                settings.imap.mailbox
            ))
        })?;
        let capabilities = timed(&server, "ask for capabilities", session.capabilities())
            .await?
            .map_err(|error| imap_error(&server, "ask for capabilities", error))?;
        let can_idle = capabilities.has_str("IDLE");
        tracing::info!(channel = %settings.name, %server, mailbox = %settings.imap.mailbox, can_idle, "email connected");

        let mut position = match self.store.load().await {
            Some(position) if position.uid_validity == uid_validity => Some(position),
            Some(_stale) => {
                tracing::warn!(channel = %settings.name, "the mailbox's UIDVALIDITY changed; taking its unseen mail");
                None
            }
            None => None,
        };
        let first_new_uid = mailbox.uid_next.unwrap_or(1);
        loop {
            if let Some(stop) = self.take_new_mail(&mut session, &mut position, uid_validity, first_new_uid).await? {
                return Ok(stop);
            }
            *caught_up = true;
            let mut announced = false;
            while let Ok(response) = session.unsolicited_responses.try_recv() {
                announced |= matches!(response, UnsolicitedResponse::Exists(_) | UnsolicitedResponse::Recent(_));
            }
            if announced {
                continue;
            }
            session = if can_idle {
                match self.idle(session).await? {
                    Some(session) => session,
                    None => return Ok(Stop::Shutdown),
                }
            } else {
                tokio::select! {
                    () = self.shutdown.cancelled() => return Ok(Stop::Shutdown),
                    () = tokio::time::sleep(settings.poll_interval) => {}
                }
                timed(&server, "poll", session.noop()).await?.map_err(|error| imap_error(&server, "poll", error))?;
                session
            };
        }
    }

    /// Waits in IDLE until the server reports a change, the IDLE is due for renewal,
    /// or shutdown (`None`).
    async fn idle(&self, session: ImapSession) -> Result<Option<ImapSession>, ChannelError> {
        let server = self.server();
        let mut handle = session.idle();
        timed(&server, "start IDLE", handle.init()).await?.map_err(|error| imap_error(&server, "start IDLE", error))?;
        let (waiting, _interrupt) = handle.wait_with_timeout(IDLE_SILENCE);
        let outcome = tokio::select! {
            () = self.shutdown.cancelled() => return Ok(None),
            outcome = tokio::time::timeout(IDLE_RENEW, waiting) => outcome,
        };
        match outcome {
            Ok(Ok(IdleResponse::NewData(_) | IdleResponse::Timeout | IdleResponse::ManualInterrupt)) | Err(_) => {}
            Ok(Err(error)) => return Err(imap_error(&server, "wait in IDLE", error)),
        }
        let session =
            timed(&server, "end IDLE", handle.done()).await?.map_err(|error| imap_error(&server, "end IDLE", error))?;
        Ok(Some(session))
    }

    /// Hands over every mail after `position` (or every unseen one without a position).
    async fn take_new_mail(
        &self,
        session: &mut ImapSession,
        position: &mut Option<Position>,
        uid_validity: u32,
        first_new_uid: u32,
    ) -> Result<Option<Stop>, ChannelError> {
        let server = self.server();
        let query = match position {
            Some(position) => format!("UID {}:*", position.last_uid.saturating_add(1)),
            None => "UNSEEN".to_owned(),
        };
        let found = timed(&server, "search for new mail", session.uid_search(&query))
            .await?
            .map_err(|error| imap_error(&server, "search for new mail", error))?;
        let last_uid = position.map_or(0, |position| position.last_uid);
        let mut uids: Vec<u32> = found.into_iter().filter(|uid| *uid > last_uid).collect();
        uids.sort_unstable();
        for batch in uids.chunks(BATCH) {
            let sizes = self.sizes(session, batch).await?;
            for uid in batch {
                if self.shutdown.is_cancelled() {
                    return Ok(Some(Stop::Shutdown));
                }
                match sizes.get(uid) {
                    Some(size) => {
                        if let Some(stop) = self.take_mail(session, *uid, *size, uid_validity).await? {
                            return Ok(Some(stop));
                        }
                    }
                    None => tracing::debug!(uid, "mail vanished before it was read"),
                }
                let handled = Position { uid_validity, last_uid: *uid };
                self.store.save(handled).await?;
                *position = Some(handled);
            }
        }
        // Every mail that was in the mailbox when it was selected is handled now (or was
        // seen before the first start), even where UIDs were skipped by expunges.
        let floor = first_new_uid.saturating_sub(1);
        if position.is_none_or(|position| position.last_uid < floor) {
            let caught_up = Position { uid_validity, last_uid: floor };
            self.store.save(caught_up).await?;
            *position = Some(caught_up);
        }
        Ok(None)
    }

    /// The RFC822.SIZE of each mail in `uids`.
    async fn sizes(&self, session: &mut ImapSession, uids: &[u32]) -> Result<HashMap<u32, u64>, ChannelError> {
        let server = self.server();
        let set = uids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let fetches = self.fetch(session, &set, "(UID RFC822.SIZE)").await.map_err(|error| match error {
            FetchError::Refused(reason) => {
                ChannelError::transient(format!("can't fetch mail sizes on IMAP server {server}: {reason}"))
            }
            FetchError::Failed(error) => error,
        })?;
        Ok(fetches
            .iter()
            .filter_map(|fetch| Some((fetch.uid?, u64::from(fetch.size.unwrap_or(0)))))
            .inspect(|(uid, size)| tracing::trace!(%server, uid, size, "mail size"))
            .collect())
    }

    async fn fetch(&self, session: &mut ImapSession, set: &str, query: &str) -> Result<Vec<Fetch>, FetchError> {
        let server = self.server();
        let fetching = async {
            let stream = session.uid_fetch(set, query).await?;
            stream.try_collect::<Vec<Fetch>>().await
        };
        match timed(&server, "fetch mail", fetching).await.map_err(FetchError::Failed)? {
            Ok(fetches) => Ok(fetches),
            Err(async_imap::error::Error::No(reason)) => Err(FetchError::Refused(reason)),
            Err(error) => Err(FetchError::Failed(imap_error(&server, "fetch mail", error))),
        }
    }

    /// Reads one mail and delivers it (or logs why not), flagging it `\Seen` once
    /// delivered.
    async fn take_mail(
        &self,
        session: &mut ImapSession,
        uid: u32,
        size: u64,
        uid_validity: u32,
    ) -> Result<Option<Stop>, ChannelError> {
        let settings = &self.channel.settings;
        let mailbox_tag: String = settings
            .imap
            .mailbox
            .chars()
            .map(
                |character| {
                    if character.is_ascii_alphanumeric() || ".-_".contains(character) { character } else { '_' }
                },
            )
            .collect();
        let context = MailContext {
            bot_address: &self.bot_address,
            fallback_message_id: format!("<{uid}.{uid_validity}@{mailbox_tag}>"),
            max_attachment_bytes: settings.max_attachment_bytes,
        };
        let oversized = size > settings.max_message_bytes;
        let query = if oversized { "(UID BODY.PEEK[HEADER])" } else { "(UID BODY.PEEK[])" };
        let fetches = match self.fetch(session, &uid.to_string(), query).await {
            Ok(fetches) => fetches,
            Err(FetchError::Refused(reason)) => {
                // The server can't produce this mail (broken on its disk); skip it
                // rather than retrying it forever.
                tracing::warn!(channel = %settings.name, uid, %reason, "the server refused to hand out a mail; skipping it");
                return Ok(None);
            }
            Err(FetchError::Failed(error)) => return Err(error),
        };
        let Some(fetch) = fetches.iter().find(|fetch| fetch.uid == Some(uid)) else {
            tracing::debug!(uid, "mail vanished before it was read");
            return Ok(None);
        };
        let verdict = if oversized {
            tracing::warn!(
                channel = %settings.name,
                uid,
                size,
                limit = settings.max_message_bytes,
                "mail is over the size limit; delivering a note instead of its content"
            );
            read_oversized(fetch.header().unwrap_or_default(), size, settings.max_message_bytes, &context)
        } else {
            read_mail(fetch.body().unwrap_or_default(), &context)
        };
        let mail = match verdict {
            Verdict::Deliver(mail) => mail,
            Verdict::Skip(reason) => {
                tracing::warn!(channel = %settings.name, uid, %reason, "not answering a mail");
                return Ok(None);
            }
        };
        self.channel.threads.remember(
            &mail.conversation_id,
            ThreadEntry {
                recipient: mail.sender_address.clone(),
                recipient_name: mail.sender_name.clone(),
                subject: mail.subject.clone(),
                message_id: mail.message_id.clone(),
                references: mail.references.clone(),
            },
        );
        let message = self.inbound_message(*mail);
        tokio::select! {
            () = self.shutdown.cancelled() => return Ok(Some(Stop::Shutdown)),
            delivered = self.inbound.deliver(message) => {
                if delivered.is_err() {
                    return Ok(Some(Stop::SinkClosed));
                }
            }
        }
        let server = self.server();
        let marking = async {
            let stream = session.uid_store(uid.to_string(), "+FLAGS.SILENT (\\Seen)").await?;
            stream.try_collect::<Vec<Fetch>>().await
        };
        timed(&server, "flag mail as seen", marking)
            .await?
            .map_err(|error| imap_error(&server, "flag mail as seen", error))?;
        Ok(None)
    }

    fn inbound_message(&self, mail: ParsedMail) -> InboundMessage {
        InboundMessage {
            channel: self.channel.settings.name.clone(),
            platform_message_id: mail.message_id,
            conversation: Conversation { id: mail.conversation_id, kind: ConversationKind::Direct, thread: None },
            sender: Sender { id: mail.sender_address, display_name: mail.sender_name },
            text: mail.text,
            mentions_bot: true,
            attachments: mail.attachments,
            received_at: Timestamp::now(),
        }
    }
}

/// The wait after `failed_attempts` failures in a row: 1 s doubling, at most 30 s.
fn backoff(failed_attempts: u32) -> Duration {
    Backoff::doubling(FIRST_BACKOFF, MAX_BACKOFF).nominal(failed_attempts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(6), Duration::from_secs(30));
        assert_eq!(backoff(40), Duration::from_secs(30));
    }
}
