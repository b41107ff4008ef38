//! TLS on the gateway's port (`[gateway.tls]`): the certificate and key files, read again
//! when they change, a listener whose handshakes run beside the accept loop so a slow or
//! hostile client can't hold up the others, and the client side a local command uses to
//! trust exactly the gateway's certificate.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, ring};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::guard::{Addresses, NoDelay};

/// How long a client may take to finish its handshake before it is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the files are checked for a change.
const RELOAD_CHECK: Duration = Duration::from_secs(2);

/// Handshakes in progress at once; connections past it are closed at once, so a flood of
/// silent clients costs a bounded number of tasks.
const MAX_HANDSHAKES: usize = 256;

/// Handshaken connections waiting for the server to take them.
const READY_QUEUE: usize = 64;

/// Where the certificate chain and the private key are, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the gateway's own certificate first.
    pub cert: PathBuf,
    /// The private key of the first certificate.
    pub key: PathBuf,
}

/// Why the files can't be served with; [`TlsError::key`] names the config key at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file is missing, unreadable or holds no certificate.
    #[error("can't use {}: {reason}", path.display())]
    Certificate { path: PathBuf, reason: String },
    /// The key file is missing, unreadable or holds no usable private key.
    #[error("can't use {}: {reason}", path.display())]
    Key { path: PathBuf, reason: String },
    /// The key is not the certificate's.
    #[error("can't use {}: it is not the key of the certificate in {}", key.display(), cert.display())]
    Mismatch { cert: PathBuf, key: PathBuf },
    /// rustls refused its own defaults (not expected with the ring provider).
    #[error("can't set up TLS: {0}")]
    Setup(rustls::Error),
}

impl TlsError {
    /// The config key the problem is about.
    pub fn key(&self) -> &'static str {
        match self {
            Self::Certificate { .. } => "gateway.tls.cert",
            Self::Key { .. } | Self::Mismatch { .. } => "gateway.tls.key",
            Self::Setup(_) => "gateway.tls",
        }
    }
}

/// The TLS settings the gateway serves with: the files, the pair in use and the server
/// configuration that hands it out.
pub struct Tls {
    files: TlsFiles,
    pair: Arc<CertifiedKey>,
    /// Made afresh on every reload, so sessions of the old pair are not resumed.
    config: Arc<ServerConfig>,
    /// The files' state when the pair in use was read.
    loaded: Fingerprint,
    /// The files' state when reading them last failed, so one bad pair warns once.
    failed: Option<Fingerprint>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Tls").field("files", &self.files).finish()
    }
}

impl Tls {
    /// Reads and checks the certificate and key of `files`.
    pub fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let loaded = Fingerprint::of(&files);
        let pair = Arc::new(read_pair(&files)?);
        let config = server_config(pair.clone())?;
        Ok(Self { files, pair, config, loaded, failed: None })
    }

    /// The files served from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Reads the files again when they changed since the pair in use was read; a pair
    /// that can't be used keeps the old one and is warned about once.
    fn reload_if_changed(&mut self) {
        let now = Fingerprint::of(&self.files);
        if now == self.loaded || self.failed.as_ref() == Some(&now) {
            return;
        }
        let reloaded = read_pair(&self.files).map(Arc::new).and_then(|pair| Ok((server_config(pair.clone())?, pair)));
        match reloaded {
            Ok((config, pair)) => {
                self.config = config;
                self.pair = pair;
                self.loaded = now;
                self.failed = None;
                tracing::info!(cert = %self.files.cert.display(), "reloaded the gateway's TLS certificate");
            }
            Err(error) => {
                // A renewal writes the two files one after the other: the next check,
                // with both in place, tries again.
                let key = error.key();
                tracing::warn!(%error, key, "can't reload the gateway's TLS certificate; still serving the previous one");
                self.failed = Some(now);
            }
        }
    }
}

/// A server configuration serving `pair`.
fn server_config(pair: Arc<CertifiedKey>) -> Result<Arc<ServerConfig>, TlsError> {
    let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Setup)?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Served(pair)));
    // HTTP/1.1 only: the server speaks no HTTP/2, and WebSocket upgrades need 1.1.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Reads the certificate chain and key of `files` and checks that they belong together.
fn read_pair(files: &TlsFiles) -> Result<CertifiedKey, TlsError> {
    let certificate_error = |reason: String| TlsError::Certificate { path: files.cert.clone(), reason };
    let key_error = |reason: String| TlsError::Key { path: files.key.clone(), reason };
    let text = std::fs::read(&files.cert).map_err(|error| certificate_error(error.to_string()))?;
    let chain = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| certificate_error(format!("not a PEM certificate file ({error})")))?;
    if chain.is_empty() {
        return Err(certificate_error("no certificate in it (a PEM file with BEGIN CERTIFICATE)".into()));
    }
    let text = std::fs::read(&files.key).map_err(|error| key_error(error.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(&text).map_err(|error| match error {
        rustls::pki_types::pem::Error::NoItemsFound => {
            key_error("no private key in it (a PEM file with BEGIN PRIVATE KEY)".into())
        }
        other => key_error(format!("not a PEM key file ({other})")),
    })?;
    CertifiedKey::from_der(chain, key, &ring::default_provider()).map_err(|error| match error {
        rustls::Error::InconsistentKeys(_) => TlsError::Mismatch { cert: files.cert.clone(), key: files.key.clone() },
        rustls::Error::InvalidCertificate(reason) => certificate_error(format!("{reason:?}")),
        other => key_error(other.to_string()),
    })
}

/// The modification time and size of both files (`None` for one that can't be read), to
/// notice a change without reading them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint([Option<(SystemTime, u64)>; 2]);

impl Fingerprint {
    fn of(files: &TlsFiles) -> Self {
        let state = |path: &Path| {
            let metadata = std::fs::metadata(path).ok()?;
            Some((metadata.modified().ok()?, metadata.len()))
        };
        Self([state(&files.cert), state(&files.key)])
    }
}

/// The one pair a server configuration hands out, whatever name the client asks for.
#[derive(Debug)]
struct Served(Arc<CertifiedKey>);

impl ResolvesServerCert for Served {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The gateway's listener with TLS: a task accepts, runs each handshake in a task of its
/// own (bounded in time and number) and queues the connections that finished it.
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: JoinHandle<()>,
}

impl TlsListener {
    /// Starts accepting on `plain`; it stops when the listener is dropped.
    pub(crate) fn start(plain: NoDelay, tls: Tls) -> std::io::Result<Self> {
        let local = plain.local_addr()?;
        let (sender, ready) = mpsc::channel(READY_QUEUE);
        let accepting = tokio::spawn(accept_loop(plain, tls, sender));
        Ok(Self { ready, local, accepting })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, SocketAddr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            None => {
                tracing::error!("the gateway's TLS accept loop ended; no new connections are taken");
                std::future::pending().await
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for Addresses {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        Self { peer: *stream.remote_addr(), local: stream.io().get_ref().0.local_addr().ok() }
    }
}

/// Accepts until the listener is dropped, checking the files for a change every
/// [`RELOAD_CHECK`]; handshakes in progress end with it.
async fn accept_loop(mut plain: NoDelay, mut tls: Tls, sender: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>) {
    let mut handshakes = JoinSet::new();
    let mut reload = tokio::time::interval(RELOAD_CHECK);
    reload.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = sender.closed() => return,
            _ = reload.tick() => tls.reload_if_changed(),
            Some(finished) = handshakes.join_next(), if !handshakes.is_empty() => {
                if let Err(error) = finished {
                    tracing::warn!(%error, "a TLS handshake task failed");
                }
            }
            (stream, peer) = Listener::accept(&mut plain) => {
                if handshakes.len() >= MAX_HANDSHAKES {
                    tracing::warn!(%peer, "closed a connection: too many TLS handshakes in progress");
                    continue;
                }
                handshakes.spawn(handshake(TlsAcceptor::from(tls.config.clone()), stream, peer, sender.clone()));
            }
        }
    }
}

/// Runs one handshake and queues the connection; failures are the client's and only
/// logged at debug level (scanners and plain-HTTP clients make many).
async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    sender: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => {
            if sender.send((stream, peer)).await.is_err() {
                tracing::debug!(%peer, "dropped a connection: the gateway is stopping");
            }
        }
        Ok(Err(error)) => tracing::debug!(%peer, %error, "a TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "a TLS handshake timed out"),
    }
}

/// A client configuration that trusts exactly the certificate first in `cert` (the
/// gateway's own, read from its file), whatever its name or issuer: for commands talking
/// to the local gateway, which a self-signed certificate would otherwise fail.
pub fn pinned_client_config(cert: &Path) -> Result<Arc<ClientConfig>, TlsError> {
    let certificate_error = |reason: String| TlsError::Certificate { path: cert.to_owned(), reason };
    let text = std::fs::read(cert).map_err(|error| certificate_error(error.to_string()))?;
    let pinned = CertificateDer::from_pem_slice(&text)
        .map_err(|error| certificate_error(format!("no PEM certificate in it ({error})")))?;
    let provider = Arc::new(ring::default_provider());
    let verifier = Arc::new(Pinned { certificate: pinned, provider: provider.clone() });
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Setup)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Accepts one certificate; the handshake's signatures are still checked, so the server
/// must hold its key.
#[derive(Debug)]
struct Pinned {
    certificate: CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.certificate.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            signature,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            signature,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
