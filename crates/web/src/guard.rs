//! The SSRF guard: checks a URL's scheme and host, resolves the host once, and hands back
//! exactly the addresses it vetted so the connection can't go anywhere else.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::address::{Forbidden, classify, is_metadata_name};

/// A URL's host: a domain name or an IP literal (reqwest doesn't re-export `url::Host`).
enum Host<'a> {
    /// A domain name (lowercased by the URL parser).
    Domain(&'a str),
    /// An IP literal (`[::1]`, `127.0.0.1`, and the numeric forms the parser normalises,
    /// such as `0x7f.1`).
    Ip(IpAddr),
}

/// The host of `url`, if it has one.
fn host_of(url: &Url) -> Option<Host<'_>> {
    let text = url.host_str()?;
    if let Some(inner) = text.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
        return inner.parse().ok().map(Host::Ip);
    }
    match text.parse() {
        Ok(address) => Some(Host::Ip(address)),
        Err(_) => Some(Host::Domain(text)),
    }
}

/// Why a URL may not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not `http` or `https`.
    #[error("refused: only http and https URLs can be fetched, not {scheme}:")]
    Scheme {
        /// The scheme given.
        scheme: String,
    },
    /// `http:///path` and the like.
    #[error("refused: the URL has no host")]
    NoHost,
    /// A name that reaches a metadata service.
    #[error("refused: {host} is a cloud metadata host")]
    MetadataName {
        /// The host name.
        host: String,
    },
    /// An IP literal in a forbidden range.
    #[error("refused: {address} is {class}")]
    Address {
        /// The address.
        address: IpAddr,
        /// Its range.
        class: Forbidden,
    },
    /// A name with at least one address in a forbidden range.
    #[error("refused: {host} resolves to {address}, {class}")]
    ResolvesTo {
        /// The host name.
        host: String,
        /// The offending address.
        address: IpAddr,
        /// Its range.
        class: Forbidden,
    },
    /// The test-only loopback exception applies to one port only.
    #[error("refused: {address} is a loopback address (only port {allowed} is allowed in this test setup)")]
    OtherLoopbackPort {
        /// The address and port asked for.
        address: SocketAddr,
        /// The one port allowed.
        allowed: u16,
    },
    /// DNS failed.
    #[error("can't resolve {host}: {reason}")]
    Resolve {
        /// The host name.
        host: String,
        /// What went wrong.
        reason: String,
    },
}

/// A URL that passed the guard and the addresses its connection must use.
#[derive(Debug, Clone)]
pub struct Vetted {
    /// The URL.
    pub url: Url,
    /// The host name to pin to `addresses`; `None` for an IP literal (no lookup happens).
    pub domain: Option<String>,
    /// Every address the host resolved to, all checked.
    pub addresses: Vec<SocketAddr>,
}

/// The address policy of `web_fetch`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SsrfGuard {
    /// Test setups only: this port on 127.0.0.1 is reachable. Never set from config.
    allowed_loopback_port: Option<u16>,
}

impl SsrfGuard {
    /// The production guard: public addresses only.
    pub fn public_only() -> Self {
        Self { allowed_loopback_port: None }
    }

    /// For tests against a local server: also allows `127.0.0.1:<port>`, and nothing else.
    pub fn with_allowed_loopback_port(port: u16) -> Self {
        Self { allowed_loopback_port: Some(port) }
    }

    /// Checks `url` and resolves its host once.
    pub async fn vet(&self, url: &Url) -> Result<Vetted, Refusal> {
        match url.scheme() {
            "http" | "https" => {}
            other => return Err(Refusal::Scheme { scheme: other.to_owned() }),
        }
        let port = url.port_or_known_default().unwrap_or(80);
        match host_of(url).ok_or(Refusal::NoHost)? {
            Host::Ip(address) => {
                let socket = SocketAddr::new(address, port);
                self.check(socket).map_err(|class| self.refusal_for_literal(socket, class))?;
                Ok(Vetted { url: url.clone(), domain: None, addresses: vec![socket] })
            }
            Host::Domain(host) => {
                if is_metadata_name(host) {
                    return Err(Refusal::MetadataName { host: host.to_owned() });
                }
                let resolved = tokio::net::lookup_host((host, port))
                    .await
                    .map_err(|error| Refusal::Resolve { host: host.to_owned(), reason: error.to_string() })?;
                let addresses: Vec<SocketAddr> = resolved.collect();
                if addresses.is_empty() {
                    return Err(Refusal::Resolve { host: host.to_owned(), reason: "no addresses".to_owned() });
                }
                for socket in &addresses {
                    if let Err(class) = self.check(*socket) {
                        return Err(Refusal::ResolvesTo { host: host.to_owned(), address: socket.ip(), class });
                    }
                }
                Ok(Vetted { url: url.clone(), domain: Some(host.to_owned()), addresses })
            }
        }
    }

    /// `Ok` when `socket` may be connected to.
    fn check(&self, socket: SocketAddr) -> Result<(), Forbidden> {
        if self.allowed_loopback_port.is_some_and(|port| port == socket.port())
            && socket.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST)
        {
            return Ok(());
        }
        match classify(socket.ip()) {
            Some(class) => Err(class),
            None => Ok(()),
        }
    }

    /// Names the test port in the message when a loopback literal just missed it.
    fn refusal_for_literal(&self, socket: SocketAddr, class: Forbidden) -> Refusal {
        match self.allowed_loopback_port {
            Some(allowed) if class == Forbidden::Loopback => Refusal::OtherLoopbackPort { address: socket, allowed },
            Some(_) | None => Refusal::Address { address: socket.ip(), class },
        }
    }
}

/// A resolver that resolves nothing: every client `web_fetch` builds pins its one host
/// to vetted addresses, so any other lookup is a bug that must fail closed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NoLookups;

impl Resolve for NoLookups {
    fn resolve(&self, name: Name) -> Resolving {
        let message = format!("{} was not vetted by the SSRF guard", name.as_str());
        Box::pin(std::future::ready(Err::<Addrs, _>(message.into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    #[tokio::test]
    async fn literals_are_checked_without_a_lookup() {
        let guard = SsrfGuard::public_only();
        let refusal = guard.vet(&url("http://10.0.0.5/")).await.err();
        assert_eq!(refusal.map(|error| error.to_string()).as_deref(), Some("refused: 10.0.0.5 is a private address"));
        let refusal = guard.vet(&url("http://[::ffff:127.0.0.1]:8080/")).await.err();
        assert_eq!(
            refusal.map(|error| error.to_string()).as_deref(),
            Some("refused: ::ffff:127.0.0.1 is a loopback address")
        );
        let refusal = guard.vet(&url("http://0x7f.1/")).await.err();
        assert_eq!(refusal.map(|error| error.to_string()).as_deref(), Some("refused: 127.0.0.1 is a loopback address"));
        let refusal = guard.vet(&url("http://169.254.169.254/latest/meta-data/")).await.err();
        assert_eq!(
            refusal.map(|error| error.to_string()).as_deref(),
            Some("refused: 169.254.169.254 is a cloud metadata address")
        );
        let vetted = guard.vet(&url("https://93.184.216.34/")).await;
        assert_eq!(
            vetted.map(|vetted| vetted.addresses).ok(),
            Some(vec!["93.184.216.34:443".parse().unwrap_or_else(|_| unreachable!())])
        );
    }

    #[tokio::test]
    async fn schemes_other_than_http_are_refused() {
        let guard = SsrfGuard::public_only();
        for text in ["file:///etc/passwd", "ftp://example.org/", "gopher://example.org/", "data:text/plain,hi"] {
            let refusal = guard.vet(&url(text)).await.err();
            assert!(matches!(refusal, Some(Refusal::Scheme { .. })), "{text}: {refusal:?}");
        }
    }

    #[tokio::test]
    async fn metadata_names_are_refused_before_any_lookup() {
        let refusal = SsrfGuard::public_only().vet(&url("http://metadata.google.internal/computeMetadata/v1/")).await;
        assert_eq!(
            refusal.err().map(|error| error.to_string()).as_deref(),
            Some("refused: metadata.google.internal is a cloud metadata host")
        );
    }

    #[tokio::test]
    async fn the_test_port_allows_exactly_one_loopback_socket() {
        let guard = SsrfGuard::with_allowed_loopback_port(4000);
        assert!(guard.vet(&url("http://127.0.0.1:4000/")).await.is_ok());
        let other_port = guard.vet(&url("http://127.0.0.1:4001/")).await.err().map(|error| error.to_string());
        assert_eq!(
            other_port.as_deref(),
            Some("refused: 127.0.0.1:4001 is a loopback address (only port 4000 is allowed in this test setup)")
        );
        assert!(guard.vet(&url("http://127.0.0.2:4000/")).await.is_err());
        assert!(guard.vet(&url("http://[::1]:4000/")).await.is_err());
        assert!(guard.vet(&url("http://10.0.0.1:4000/")).await.is_err());
        assert!(SsrfGuard::public_only().vet(&url("http://127.0.0.1:4000/")).await.is_err());
    }
}
