//! The checks every request passes before its handler: the `Host` must name this gateway
//! (a page whose name was rebound to our address can't talk to us) and a WebSocket
//! upgrade's `Origin`, when a browser sends one, must be the gateway's own page or an
//! allowed one (another site's page can't open the protocol with the user's browser).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::{IncomingStream, Listener};
use squidbot_types::config::GatewayConfig;
use tokio::net::{TcpListener, TcpStream};

use crate::Gateway;

/// Both ends of a client's connection: the peer for auth and logs, the local address
/// (the one the client reached) for the `Host` check.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Addresses {
    /// The client.
    pub(crate) peer: SocketAddr,
    /// This end; `None` when the socket could not say (the `Host` check then refuses).
    pub(crate) local: Option<SocketAddr>,
}

impl Connected<IncomingStream<'_, NoDelay>> for Addresses {
    fn connect_info(stream: IncomingStream<'_, NoDelay>) -> Self {
        Self { peer: *stream.remote_addr(), local: stream.io().local_addr().ok() }
    }
}

/// The gateway's listener: accepts like axum's and turns Nagle's algorithm off, since
/// streamed replies are many small writes that it would hold back by tens of milliseconds.
#[derive(Debug)]
pub(crate) struct NoDelay(pub(crate) TcpListener);

impl Listener for NoDelay {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        let (stream, peer) = Listener::accept(&mut self.0).await;
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "can't set TCP_NODELAY");
        }
        (stream, peer)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// `[gateway]`'s door settings, read once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Doors {
    /// `allowed_hosts`: lower-case names, with the port they must come with if any.
    allowed_hosts: Vec<(String, Option<u16>)>,
    /// `allowed_origins`, lower-case, without a trailing slash.
    allowed_origins: Vec<String>,
    /// `metrics_open`.
    pub(crate) metrics_open: bool,
    /// `[gateway.tls]` is set: a `Host` without a port means 443, not 80.
    tls: bool,
}

impl Doors {
    /// The settings of `config` (none: only the gateway's own addresses, metrics closed).
    pub(crate) fn from_config(config: Option<&GatewayConfig>) -> Self {
        let Some(config) = config else { return Self::default() };
        let allowed_hosts = config
            .allowed_hosts
            .iter()
            .filter_map(|entry| {
                let parsed = split_host(entry.trim());
                if parsed.is_none() {
                    tracing::warn!(entry, "ignoring an unreadable gateway.allowed_hosts entry");
                }
                parsed
            })
            .collect();
        let allowed_origins = config.allowed_origins.iter().map(|origin| normalize_origin(origin)).collect();
        let tls = config.tls.cert.is_some() && config.tls.key.is_some();
        Self { allowed_hosts, allowed_origins, metrics_open: config.metrics_open, tls }
    }

    /// True when `host` (with `port`, if it named one) is an address of this gateway as
    /// reached through `local`.
    fn host_allowed(&self, host: &str, port: Option<u16>, local: SocketAddr) -> bool {
        let local_ip = local.ip().to_canonical();
        let port = port.unwrap_or(if self.tls { 443 } else { 80 });
        let own_port = port == local.port();
        let own_address = match host.parse::<IpAddr>() {
            Ok(ip) => {
                let ip = ip.to_canonical();
                ip == local_ip || (local_ip.is_loopback() && is_loopback_name(ip))
            }
            Err(_) => local_ip.is_loopback() && host == "localhost",
        };
        if own_address && own_port {
            return true;
        }
        self.allowed_hosts.iter().any(|(name, wanted)| name == host && wanted.is_none_or(|wanted| wanted == port))
    }

    /// True when a page of `origin` may open the WebSocket of a request to `host:port`.
    fn origin_allowed(&self, origin: &str, host: &str, port: Option<u16>) -> bool {
        let origin = normalize_origin(origin);
        if self.allowed_origins.contains(&origin) {
            return true;
        }
        let Some((scheme, authority)) = origin.split_once("://") else { return false };
        let default_port = match scheme {
            "http" => 80,
            "https" => 443,
            _ => return false,
        };
        let Some((origin_host, origin_port)) = split_host(authority) else { return false };
        origin_host == host && origin_port.unwrap_or(default_port) == port.unwrap_or(default_port)
    }
}

/// `127.0.0.1` and `::1`, the loopback names a local browser uses.
fn is_loopback_name(ip: IpAddr) -> bool {
    ip == IpAddr::from([127, 0, 0, 1]) || ip == IpAddr::from(std::net::Ipv6Addr::LOCALHOST)
}

fn normalize_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// `name`, `name:port`, `1.2.3.4:port` or `[::1]:port` as a lower-case host without
/// brackets or a trailing dot and the port; `None` when unreadable.
fn split_host(authority: &str) -> Option<(String, Option<u16>)> {
    if authority.is_empty() || authority.contains(['@', '/', ' ']) {
        return None;
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        host.parse::<std::net::Ipv6Addr>().ok()?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':')?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((_, _)) if authority.matches(':').count() > 1 => return None,
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some((host, port))
}

/// The request's `Host` (or its URI's authority, as HTTP/2 sends it).
fn host_of(request: &Request) -> Option<&str> {
    match request.headers().get(header::HOST) {
        Some(value) => value.to_str().ok(),
        None => request.uri().authority().map(|authority| authority.as_str()),
    }
}

fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
}

fn refuse(gateway: &Gateway, status: StatusCode, kind: &'static str, message: String) -> Response {
    gateway.metrics.error(kind);
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], message).into_response()
}

/// The middleware: checks `Host` on every request and `Origin` on WebSocket upgrades,
/// then hands the handlers the peer's address.
pub(crate) async fn check(State(gateway): State<Arc<Gateway>>, mut request: Request, next: Next) -> Response {
    let Some(ConnectInfo(addresses)) = request.extensions().get::<ConnectInfo<Addresses>>().copied() else {
        tracing::error!("a request arrived without its connection's addresses");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let peer = addresses.peer;
    let Some(host) = host_of(&request).map(str::to_owned) else {
        tracing::warn!(%peer, "refused a request without a Host header");
        return refuse(&gateway, StatusCode::BAD_REQUEST, "host", "can't serve a request without a Host header".into());
    };
    let parsed = split_host(&host);
    let allowed = match (&parsed, addresses.local) {
        (Some((name, port)), Some(local)) => gateway.doors.host_allowed(name, *port, local),
        (None, _) | (_, None) => false,
    };
    let Some((name, port)) = parsed.filter(|_| allowed) else {
        tracing::warn!(%peer, host, "refused a request for a host that is not this gateway (DNS rebinding?)");
        let message = format!(
            "can't serve host {host:?}: it is not this gateway's address; \
             list the name in [gateway] allowed_hosts if it should be"
        );
        return refuse(&gateway, StatusCode::MISDIRECTED_REQUEST, "host", message);
    };
    if is_websocket_upgrade(request.headers())
        && let Some(origin) = request.headers().get(header::ORIGIN)
    {
        let origin = String::from_utf8_lossy(origin.as_bytes()).into_owned();
        if !gateway.doors.origin_allowed(&origin, &name, port) {
            tracing::warn!(%peer, origin, host, "refused a WebSocket from another site's page");
            let message = format!(
                "can't open the gateway's WebSocket from origin {origin:?}: only the gateway's own page \
                 and [gateway] allowed_origins may"
            );
            return refuse(&gateway, StatusCode::FORBIDDEN, "origin", message);
        }
    }
    request.extensions_mut().insert(ConnectInfo(peer));
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doors(hosts: &[&str], origins: &[&str]) -> Doors {
        let config = GatewayConfig {
            allowed_hosts: hosts.iter().map(|host| (*host).to_owned()).collect(),
            allowed_origins: origins.iter().map(|origin| (*origin).to_owned()).collect(),
            ..GatewayConfig::default()
        };
        Doors::from_config(Some(&config))
    }

    fn allowed(doors: &Doors, host: &str, local: &str) -> bool {
        let (name, port) = split_host(host).unwrap();
        doors.host_allowed(&name, port, local.parse().unwrap())
    }

    #[test]
    fn hosts_are_the_bound_address_loopback_names_or_listed_ones() {
        let doors = doors(&["chat.example.com", "lan.box:8443"], &[]);
        assert!(allowed(&doors, "127.0.0.1:18789", "127.0.0.1:18789"));
        assert!(allowed(&doors, "LOCALHOST:18789", "127.0.0.1:18789"));
        assert!(allowed(&doors, "[::1]:18789", "127.0.0.1:18789"));
        assert!(allowed(&doors, "192.168.1.5:18789", "192.168.1.5:18789"));
        assert!(allowed(&doors, "192.168.1.5:18789", "[::ffff:192.168.1.5]:18789"));
        assert!(allowed(&doors, "chat.example.com", "127.0.0.1:18789"));
        assert!(allowed(&doors, "chat.example.com.:443", "127.0.0.1:18789"));
        assert!(allowed(&doors, "lan.box:8443", "10.0.0.2:18789"));
        assert!(!allowed(&doors, "lan.box:18789", "10.0.0.2:18789"));
        assert!(!allowed(&doors, "evil.example:18789", "127.0.0.1:18789"));
        assert!(!allowed(&doors, "localhost:18789", "192.168.1.5:18789"), "localhost only on loopback");
        assert!(!allowed(&doors, "127.0.0.1:9999", "127.0.0.1:18789"), "the port must match");
        assert!(!allowed(&doors, "10.9.9.9:18789", "192.168.1.5:18789"));
        for unreadable in ["", "a b", "user@host", "[::1", "::1:80", "host:port"] {
            assert!(split_host(unreadable).is_none(), "{unreadable:?}");
        }
    }

    #[test]
    fn a_host_without_a_port_means_443_with_tls() {
        let mut config = GatewayConfig::default();
        config.tls.cert = Some("cert.pem".into());
        config.tls.key = Some("key.pem".into());
        let tls = Doors::from_config(Some(&config));
        assert!(allowed(&tls, "192.168.1.5", "192.168.1.5:443"));
        assert!(!allowed(&tls, "192.168.1.5", "192.168.1.5:80"));
        assert!(allowed(&Doors::default(), "192.168.1.5", "192.168.1.5:80"));
    }

    #[test]
    fn origins_are_the_requests_own_or_listed_ones() {
        let doors = doors(&[], &["https://UI.example.com/"]);
        assert!(doors.origin_allowed("http://127.0.0.1:18789", "127.0.0.1", Some(18789)));
        assert!(doors.origin_allowed("https://chat.example.com", "chat.example.com", None));
        assert!(doors.origin_allowed("https://chat.example.com", "chat.example.com", Some(443)));
        assert!(doors.origin_allowed("https://ui.example.com", "127.0.0.1", Some(18789)));
        assert!(!doors.origin_allowed("http://evil.example", "127.0.0.1", Some(18789)));
        assert!(!doors.origin_allowed("http://127.0.0.1:8000", "127.0.0.1", Some(18789)));
        assert!(!doors.origin_allowed("null", "127.0.0.1", Some(18789)));
        assert!(!doors.origin_allowed("file://", "127.0.0.1", Some(18789)));
    }
}
