//! `squidbot send TARGET MESSAGE`: sends as `USER` through the running gateway's
//! `bus.send` method; when no gateway answers, the message goes to the target's trigger
//! file, which the gateway delivers when it starts.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use squidbot_bus::{DynBusJournal, MemoryJournal, Priority, SendRequest, Sender};
use squidbot_types::config::{GatewayAuthMode, GatewayConfig};
use tokio_tungstenite::tungstenite::Message;

use crate::cli::SendArgs;
use crate::wiring::Environment;

/// How long connecting to the gateway may take before it counts as not running.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long the gateway may take to answer once connected.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// What became of the message.
enum Answer {
    /// Sent: the delivery result (`status`, `target`, `envelope`, ...).
    Sent(Value),
    /// Refused with a protocol code (`invalid_target`, ...).
    Refused {
        /// The code.
        status: String,
        /// Why.
        message: String,
    },
}

/// Runs `squidbot send`.
pub async fn run(environment: &Environment, arguments: &SendArgs) -> Result<ExitCode> {
    let priority = match arguments.priority.as_deref() {
        None => Priority::Normal,
        Some(name) => Priority::parse(name).ok_or_else(|| anyhow!("unknown priority {name:?}"))?,
    };
    let answer = match through_gateway(&environment.config().gateway, arguments, priority).await? {
        Some(answer) => answer,
        None => offline(environment, arguments, priority).await?,
    };
    Ok(report(&answer, arguments.json))
}

fn report(answer: &Answer, as_json: bool) -> ExitCode {
    match answer {
        Answer::Sent(result) => {
            if as_json {
                println!("{result}");
            } else {
                let text = |key: &str| result[key].as_str().unwrap_or_default().to_owned();
                let header = text("envelope").split_once(':').map(|(header, _)| header.to_owned()).unwrap_or_default();
                println!("{}: {header} to {}", text("status"), text("target"));
                if let Some(detail) = result["detail"].as_str() {
                    println!("  {detail}");
                }
            }
            ExitCode::SUCCESS
        }
        Answer::Refused { status, message } => {
            if as_json {
                println!("{}", json!({"status": status, "error": message}));
            }
            eprintln!("error: {status}: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Sends through the local bus: no route, so the message lands in the trigger file.
async fn offline(environment: &Environment, arguments: &SendArgs, priority: Priority) -> Result<Answer> {
    let journal: Arc<dyn DynBusJournal> = match environment.database() {
        Ok(database) => Arc::new(squidbot_store::SqliteBusJournal::new(database)),
        Err(error) => {
            eprintln!("warning: the message is not journaled: {error:#}");
            Arc::new(MemoryJournal::new())
        }
    };
    let bus = crate::bus::build(environment.config(), environment.paths.triggers(), journal)?;
    let request = SendRequest {
        target: arguments.target.clone(),
        body: arguments.message.clone(),
        priority,
        correlation_id: None,
    };
    Ok(match bus.send(&Sender::user(), request).await {
        Ok(result) => Answer::Sent(result.to_json()),
        Err(error) => Answer::Refused { status: error.code().to_owned(), message: error.to_string() },
    })
}

/// Where a client reaches the gateway: its bind address, loopback when it listens on all.
fn gateway_address(config: &GatewayConfig) -> Result<SocketAddr> {
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

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Calls `bus.send` on the running gateway; `None` when no gateway answers.
async fn through_gateway(config: &GatewayConfig, arguments: &SendArgs, priority: Priority) -> Result<Option<Answer>> {
    let address = gateway_address(config)?;
    let url = format!("ws://{address}/");
    let socket = match tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(url.as_str())).await {
        Ok(Ok((socket, _))) => socket,
        Ok(Err(error)) => {
            tracing::debug!(%error, %url, "no gateway answered; using the trigger file");
            return Ok(None);
        }
        Err(_) => {
            tracing::debug!(%url, "the gateway did not answer in time; using the trigger file");
            return Ok(None);
        }
    };
    let exchange = exchange(socket, config, arguments, priority);
    tokio::time::timeout(ANSWER_TIMEOUT, exchange)
        .await
        .map_err(|_| anyhow!("the gateway at {address} did not answer within {} s", ANSWER_TIMEOUT.as_secs()))?
        .map(Some)
}

async fn exchange(
    mut socket: Socket,
    config: &GatewayConfig,
    arguments: &SendArgs,
    priority: Priority,
) -> Result<Answer> {
    let challenge = next_frame(&mut socket).await?;
    if challenge["event"] != "connect.challenge" {
        bail!("the gateway spoke unexpectedly: {challenge}");
    }
    let connect = json!({
        "minProtocol": 3, "maxProtocol": 4, "role": "operator",
        "scopes": ["operator.read", "operator.write"],
        "client": {"id": "squidbot-cli", "version": env!("CARGO_PKG_VERSION"), "platform": std::env::consts::OS, "mode": "cli"},
        "auth": credentials(config)?,
    });
    let connected = call(&mut socket, "connect", connect).await?;
    if connected["ok"] != true {
        let message = connected["error"]["message"].as_str().unwrap_or("refused");
        bail!("the gateway refused the connection: {message}");
    }
    let mut params = json!({"target": arguments.target, "message": arguments.message, "from": "user"});
    if priority != Priority::Normal {
        params["priority"] = json!(priority.as_str());
    }
    let response = call(&mut socket, "bus.send", params).await?;
    if let Err(error) = socket.close(None).await {
        tracing::debug!(%error, "closing the gateway connection failed");
    }
    if response["ok"] == true {
        return Ok(Answer::Sent(response["payload"].clone()));
    }
    let error = &response["error"];
    let message = error["message"].as_str().unwrap_or("the gateway refused the message").to_owned();
    match error["details"]["status"].as_str() {
        Some(status) => Ok(Answer::Refused { status: status.to_owned(), message }),
        None => bail!("the gateway refused the message: {message}"),
    }
}

/// Sends a request and returns its response, skipping events.
async fn call(socket: &mut Socket, method: &str, params: Value) -> Result<Value> {
    let id = format!("cli-{method}");
    let request = json!({"type": "req", "id": id, "method": method, "params": params});
    socket.send(Message::Text(request.to_string().into())).await.context("can't talk to the gateway")?;
    loop {
        let frame = next_frame(socket).await?;
        if frame["type"] == "res" && frame["id"] == id.as_str() {
            return Ok(frame);
        }
    }
}

/// The next JSON text frame.
async fn next_frame(socket: &mut Socket) -> Result<Value> {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => {
                return serde_json::from_str(text.as_str()).context("the gateway sent a frame that is not JSON");
            }
            Some(Ok(Message::Close(_))) | None => bail!("the gateway closed the connection"),
            Some(Err(error)) => return Err(anyhow!(error).context("the gateway connection failed")),
            Some(Ok(_)) => {}
        }
    }
}
