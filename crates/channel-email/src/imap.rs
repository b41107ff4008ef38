//! Connecting to the IMAP server: TCP, TLS (implicit or STARTTLS), login, and what
//! each failure means (credentials refused and untrusted certificates are fatal,
//! everything on the wire is transient).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_imap::{Client, Session};
use rustls::pki_types::ServerName;
use squidbot_channels::ChannelError;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::settings::{ImapSettings, Security};
use crate::tls::{Trust, certificate_problem};

/// How long one IMAP command (or connecting) may take before the connection is
/// considered dead.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// The connection under the IMAP session: TLS, or plain to this machine.
#[derive(Debug)]
pub(crate) enum ImapStream {
    /// Implicit TLS or upgraded with STARTTLS.
    Tls(Box<TlsStream<TcpStream>>),
    /// Unencrypted (local servers only, checked in the settings).
    Plain(TcpStream),
}

impl AsyncRead for ImapStream {
    fn poll_read(self: Pin<&mut Self>, context: &mut Context<'_>, buffer: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ImapStream::Tls(stream) => Pin::new(stream.as_mut()).poll_read(context, buffer),
            ImapStream::Plain(stream) => Pin::new(stream).poll_read(context, buffer),
        }
    }
}

impl AsyncWrite for ImapStream {
    fn poll_write(self: Pin<&mut Self>, context: &mut Context<'_>, buffer: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ImapStream::Tls(stream) => Pin::new(stream.as_mut()).poll_write(context, buffer),
            ImapStream::Plain(stream) => Pin::new(stream).poll_write(context, buffer),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ImapStream::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(context),
            ImapStream::Plain(stream) => Pin::new(stream).poll_flush(context),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ImapStream::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(context),
            ImapStream::Plain(stream) => Pin::new(stream).poll_shutdown(context),
        }
    }
}

/// A logged-in IMAP session.
pub(crate) type ImapSession = Session<ImapStream>;

/// Connects, protects the connection as configured, and logs in.
pub(crate) async fn connect(settings: &ImapSettings, trust: &Trust) -> Result<ImapSession, ChannelError> {
    let server = format!("{}:{}", settings.host, settings.port);
    let tcp = timed(&server, "connect", TcpStream::connect((settings.host.as_str(), settings.port)))
        .await?
        .map_err(|error| ChannelError::transient(format!("can't connect to IMAP server {server}: {error}")))?;
    let stream = match settings.security {
        Security::Tls => ImapStream::Tls(Box::new(handshake(tcp, settings, trust).await?)),
        Security::Plain => ImapStream::Plain(tcp),
        Security::StartTls => {
            let mut client = Client::new(tcp);
            read_greeting(&mut client, &server).await?;
            timed(&server, "STARTTLS", client.run_command_and_check_ok("STARTTLS", None)).await?.map_err(|error| {
                match error {
                    async_imap::error::Error::No(_) | async_imap::error::Error::Bad(_) => ChannelError::fatal(format!(
                        "can't start TLS with IMAP server {server}: the server refused STARTTLS ({error})"
                    )),
                    other => imap_error(&server, "start TLS", other),
                }
            })?;
            ImapStream::Tls(Box::new(handshake(client.into_inner(), settings, trust).await?))
        }
    };
    let mut client = Client::new(stream);
    if settings.security != Security::StartTls {
        read_greeting(&mut client, &server).await?;
    }
    let login = timed(&server, "log in", client.login(&settings.username, settings.password.expose())).await?;
    login.map_err(|(error, _client)| match error {
        async_imap::error::Error::No(reason) | async_imap::error::Error::Bad(reason) => ChannelError::fatal(format!(
            "can't log in to IMAP server {server} as {}: the server refused the credentials ({})",
            settings.username,
            reason.trim()
        )),
        other => imap_error(&server, "log in", other),
    })
}

async fn handshake(
    tcp: TcpStream,
    settings: &ImapSettings,
    trust: &Trust,
) -> Result<TlsStream<TcpStream>, ChannelError> {
    let server = format!("{}:{}", settings.host, settings.port);
    let name = ServerName::try_from(settings.host.clone()).map_err(|error| {
        ChannelError::fatal(format!(
            "can't connect to IMAP server {server}: {} is not a host name ({error})",
            settings.host
        ))
    })?;
    let connector = TlsConnector::from(trust.client_config.clone());
    timed(&server, "TLS handshake", connector.connect(name, tcp)).await?.map_err(|error| tls_error(&server, &error))
}

/// A failed TLS handshake: a certificate that isn't trusted is a configuration problem
/// (fatal); anything else happened on the wire (transient).
fn tls_error(server: &str, error: &io::Error) -> ChannelError {
    match certificate_problem(error) {
        Some(problem) => ChannelError::fatal(format!(
            "can't connect to IMAP server {server}: its TLS certificate is not trusted ({problem}); add its CA to \
             extra_root_certificates if it is yours"
        )),
        None => {
            ChannelError::transient(format!("can't connect to IMAP server {server}: TLS handshake failed: {error}"))
        }
    }
}

async fn read_greeting(
    client: &mut Client<impl AsyncRead + AsyncWrite + Unpin + std::fmt::Debug + Send>,
    server: &str,
) -> Result<(), ChannelError> {
    match timed(server, "read the greeting", client.read_response()).await? {
        Ok(Some(_greeting)) => Ok(()),
        Ok(None) => Err(ChannelError::transient(format!(
            "can't talk to IMAP server {server}: it closed the connection before greeting"
        ))),
        Err(error) => Err(ChannelError::transient(format!("can't talk to IMAP server {server}: {error}"))),
    }
}

/// Runs one IMAP step with [`COMMAND_TIMEOUT`]; a timeout is transient.
pub(crate) async fn timed<T>(server: &str, action: &str, step: impl Future<Output = T>) -> Result<T, ChannelError> {
    tokio::time::timeout(COMMAND_TIMEOUT, step).await.map_err(|_elapsed| {
        ChannelError::transient(format!(
            "can't {action} on IMAP server {server}: no answer within {} s",
            COMMAND_TIMEOUT.as_secs()
        ))
    })
}

/// What an IMAP error means once logged in: the connection is retried either way.
pub(crate) fn imap_error(server: &str, action: &str, error: async_imap::error::Error) -> ChannelError {
    ChannelError::transient(format!("can't {action} on IMAP server {server}: {error}"))
}
