//! The test's own IMAP client of the bot's mailbox: puts mail in (APPEND, as a mail
//! server delivering it would) and reads flags.

use std::collections::HashMap;
use std::sync::Arc;

use async_imap::Session;
use futures_util::TryStreamExt;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::{BOT, Certificates, PASSWORD};

/// A logged-in IMAPS session with INBOX selected.
pub struct AdminMailbox {
    session: Session<TlsStream<TcpStream>>,
}

impl AdminMailbox {
    /// Logs in as the bot over IMAPS, trusting the test CA.
    pub async fn connect(port: u16, certificates: &Certificates) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        for certificate in CertificateDer::pem_file_iter(&certificates.ca).unwrap() {
            roots.add(certificate.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let tls = TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap();
        let mut client = async_imap::Client::new(tls);
        client.read_response().await.unwrap().unwrap();
        let mut session = client.login(BOT, PASSWORD).await.map_err(|(error, _client)| error).unwrap();
        session.select("INBOX").await.unwrap();
        Self { session }
    }

    /// Puts a mail into INBOX, unseen; returns its UID.
    pub async fn append(&mut self, raw: &[u8]) -> u32 {
        self.session.append("INBOX", None, None, raw).await.unwrap();
        self.session.noop().await.unwrap();
        let uids = self.session.uid_search("ALL").await.unwrap();
        uids.into_iter().max().unwrap()
    }

    /// Whether each mail (by UID) is flagged `\Seen`.
    pub async fn seen(&mut self) -> HashMap<u32, bool> {
        self.session.noop().await.unwrap();
        let fetches: Vec<_> = self.session.uid_fetch("1:*", "(UID FLAGS)").await.unwrap().try_collect().await.unwrap();
        // Unsolicited flag updates (without UID) may come along; the answers to our
        // command carry the UID.
        fetches
            .iter()
            .filter_map(|fetch| {
                let seen = fetch.flags().any(|flag| flag == async_imap::types::Flag::Seen);
                Some((fetch.uid?, seen))
            })
            .collect()
    }

    /// Clears `\Seen` on a mail, as a person marking it unread would.
    pub async fn mark_unseen(&mut self, uid: u32) {
        let _updates: Vec<_> = self
            .session
            .uid_store(uid.to_string(), "-FLAGS.SILENT (\\Seen)")
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
    }
}
