//! A command's connection to the running gateway over its WebSocket protocol: where it
//! listens (from `[gateway]`), the `connect` handshake with the configured credentials,
//! and method calls, over wss when `[gateway.tls]` is set. Used by `squidbot send`,
//! `squidbot workers`, `squidbot cron`, `squidbot status` and `squidbot tui`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use squidbot_types::config::{GatewayAuthMode, GatewayConfig};
use tokio_tungstenite::tungstenite::Message;

/// How long connecting to the gateway may take before it counts as not running.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long the gateway may take to answer once connected.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// An open, authenticated connection to the gateway.
pub struct GatewayClient {
    socket: Socket,
    address: SocketAddr,
    calls: u64,
    /// The methods the gateway offers, from `hello-ok`.
    methods: Vec<String>,
}

/// Where a client reaches the gateway: its bind address, loopback when it listens on all.
pub fn gateway_address(config: &GatewayConfig) -> Result<SocketAddr> {
    let bind: IpAddr =
        config.bind.parse().with_context(|| format!("gateway.bind {:?} is not an IP address", config.bind))?;
    let host = match bind {
        IpAddr::V4(address) if address.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(address) if address.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        other => other,
    };
    Ok(SocketAddr::new(host, config.port))
}

/// The `auth` object of `connect`: the token from config (or `SQUIDBOT_GATEWAY_TOKEN`),
/// the password from `SQUIDBOT_GATEWAY_PASSWORD` (config only holds its hash).
fn credentials(config: &GatewayConfig) -> Result<Value> {
    let auth = &config.auth;
    Ok(match auth.mode {
        GatewayAuthMode::None => json!({}),
        GatewayAuthMode::Token => {
            let token = std::env::var("SQUIDBOT_GATEWAY_TOKEN")
                .ok()
                .filter(|token| !token.is_empty())
                .or_else(|| auth.token.as_ref().map(|token| token.expose().to_owned()))
                .or_else(|| auth.token_env.as_ref().and_then(|variable| std::env::var(variable).ok()))
                .filter(|token| !token.is_empty());
            match token {
                Some(token) => json!({"token": token}),
                None => json!({}),
            }
        }
        GatewayAuthMode::Password => match std::env::var("SQUIDBOT_GATEWAY_PASSWORD") {
            Ok(password) if !password.is_empty() => json!({"password": password}),
            _ => bail!("the gateway uses password auth: set SQUIDBOT_GATEWAY_PASSWORD"),
        },
    })
}

/// With `[gateway.tls]`, a TLS connector that trusts exactly the certificate in its
/// file (the gateway's own, often self-signed); `None` for plain WebSocket.
fn transport(config: &GatewayConfig) -> Result<Option<tokio_tungstenite::Connector>> {
    let paths = crate::paths::Paths::from_env()?;
    let Some(files) = crate::commands::gateway::tls_files(config, &paths.home).map_err(|issue| anyhow!(issue))? else {
        return Ok(None);
    };
    let client = squidbot_server::tls::pinned_client_config(&files.cert)
        .map_err(|error| anyhow!("can't trust the gateway's certificate: {}: {error}", error.key()))?;
    Ok(Some(tokio_tungstenite::Connector::Rustls(client)))
}

impl GatewayClient {
    /// Connects and authenticates as an operator with read and write scopes; `None` when
    /// no gateway answers at the configured address.
    pub async fn connect(config: &GatewayConfig) -> Result<Option<GatewayClient>> {
        Self::connect_within(config, CONNECT_TIMEOUT).await
    }

    /// As [`GatewayClient::connect`], counting the gateway as not running when it does not
    /// accept the connection within `timeout`.
    pub async fn connect_within(config: &GatewayConfig, timeout: Duration) -> Result<Option<GatewayClient>> {
        let address = gateway_address(config)?;
        let (url, connector) = match transport(config)? {
            Some(connector) => (format!("wss://{address}/"), Some(connector)),
            None => (format!("ws://{address}/"), None),
        };
        let connecting = tokio_tungstenite::connect_async_tls_with_config(url.as_str(), None, false, connector);
        let socket = match tokio::time::timeout(timeout, connecting).await {
            Ok(Ok((socket, _))) => socket,
            Ok(Err(error)) => {
                tracing::debug!(%error, %url, "no gateway answered");
                return Ok(None);
            }
            Err(_) => {
                tracing::debug!(%url, "the gateway did not answer in time");
                return Ok(None);
            }
        };
        let mut client = GatewayClient { socket, address, calls: 0, methods: Vec::new() };
        let handshake = async {
            let challenge = client.next_frame().await?;
            if challenge["event"] != "connect.challenge" {
                bail!("the gateway spoke unexpectedly: {challenge}");
            }
            let connect = json!({
                "minProtocol": 3, "maxProtocol": 4, "role": "operator",
                "scopes": ["operator.read", "operator.write"],
                "client": {"id": "squidbot-cli", "version": env!("CARGO_PKG_VERSION"), "platform": std::env::consts::OS, "mode": "cli"},
                "auth": credentials(config)?,
            });
            let connected = client.exchange("connect", connect).await?;
            if connected["ok"] != true {
                let message = connected["error"]["message"].as_str().unwrap_or("refused");
                bail!("the gateway refused the connection: {message}");
            }
            let methods = connected["payload"]["features"]["methods"].as_array().cloned().unwrap_or_default();
            client.methods = methods.iter().filter_map(|method| method.as_str().map(str::to_owned)).collect();
            Ok(())
        };
        tokio::time::timeout(ANSWER_TIMEOUT, handshake).await.map_err(|_| client.silent())??;
        Ok(Some(client))
    }

    fn silent(&self) -> anyhow::Error {
        anyhow!("the gateway at {} did not answer within {} s", self.address, ANSWER_TIMEOUT.as_secs())
    }

    /// Calls `method` and returns the whole `res` frame (`ok`, `payload` or `error`),
    /// skipping events in between.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        match tokio::time::timeout(ANSWER_TIMEOUT, self.exchange(method, params)).await {
            Ok(response) => response,
            Err(_) => Err(self.silent()),
        }
    }

    async fn exchange(&mut self, method: &str, params: Value) -> Result<Value> {
        self.calls += 1;
        let id = format!("cli-{method}-{}", self.calls);
        let request = json!({"type": "req", "id": id, "method": method, "params": params});
        self.socket.send(Message::Text(request.to_string().into())).await.context("can't talk to the gateway")?;
        loop {
            let frame = self.next_frame().await?;
            if frame["type"] == "res" && frame["id"] == id.as_str() {
                return Ok(frame);
            }
        }
    }

    /// Closes the connection politely.
    pub async fn close(mut self) {
        if let Err(error) = self.socket.close(None).await {
            tracing::debug!(%error, "closing the gateway connection failed");
        }
    }

    /// The methods the gateway offers.
    pub fn methods(&self) -> &[String] {
        &self.methods
    }

    /// Sends one frame as it is (the TUI speaks the protocol itself).
    pub async fn send_frame(&mut self, frame: &Value) -> Result<()> {
        self.socket.send(Message::Text(frame.to_string().into())).await.context("can't talk to the gateway")
    }

    /// The next JSON text frame; cancel-safe.
    pub async fn next_frame(&mut self) -> Result<Value> {
        loop {
            match self.socket.next().await {
                Some(Ok(Message::Text(text))) => {
                    return serde_json::from_str(text.as_str()).context("the gateway sent a frame that is not JSON");
                }
                Some(Ok(Message::Close(_))) | None => bail!("the gateway closed the connection"),
                Some(Err(error)) => return Err(anyhow!(error).context("the gateway connection failed")),
                Some(Ok(_)) => {}
            }
        }
    }
}

/// The payload of a successful `res` frame, or the gateway's reason as the error.
pub fn payload(response: Value, action: &str) -> Result<Value> {
    if response["ok"] == true {
        return Ok(response["payload"].clone());
    }
    let message = response["error"]["message"].as_str().unwrap_or("refused").to_owned();
    Err(anyhow!("can't {action}: {message}"))
}
