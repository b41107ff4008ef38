//! `squidbot gateway`: serves the OpenAI-compatible API and `/health` on one port until
//! Ctrl-C or SIGTERM, then finishes running requests.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use squidbot_server::{Auth, Gateway};
use squidbot_types::Secret;
use squidbot_types::config::GatewayAuthMode;
use tokio_util::sync::CancellationToken;

use crate::cli::GatewayArgs;
use crate::wiring::Environment;

fn auth(environment: &Environment) -> Result<Auth> {
    let config = &environment.config().gateway.auth;
    match config.mode {
        GatewayAuthMode::None => Ok(Auth::None),
        GatewayAuthMode::Token => {
            if let Some(token) = config.token.clone().filter(|token| !token.is_empty()) {
                return Ok(Auth::Token(token));
            }
            if let Some(variable) = &config.token_env {
                let value = std::env::var(variable)
                    .with_context(|| format!("gateway.auth.token_env names {variable}, which is not set"))?;
                return Ok(Auth::Token(Secret::new(value)));
            }
            bail!("gateway.auth.mode is token but neither gateway.auth.token nor gateway.auth.token_env is set")
        }
    }
}

/// Runs the gateway.
pub async fn run(environment: &Environment, arguments: &GatewayArgs) -> Result<()> {
    let config = &environment.config().gateway;
    let bind = arguments.bind.clone().unwrap_or_else(|| config.bind.clone());
    let port = arguments.port.unwrap_or(config.port);
    let address: IpAddr = bind.parse().with_context(|| format!("--bind: {bind:?} is not an IP address"))?;
    let auth = auth(environment)?;
    if matches!(auth, Auth::None) && !address.is_loopback() {
        bail!(
            "refusing to listen on {address} without authentication: set gateway.auth.mode = \"token\" or bind to 127.0.0.1"
        );
    }
    let agent = Arc::new(environment.ready_assistant(None, true, "api")?);
    let mut models = vec![agent.settings().model.clone()];
    models.extend(environment.config().llm.fallbacks.iter().cloned());
    models.extend(environment.config().agents.keys().map(|role| format!("squidbot/{role}")));
    models.dedup();
    let gateway = Gateway::new(agent, auth, models);
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(address, port))
        .await
        .with_context(|| format!("can't listen on {address}:{port}"))?;
    let local = listener.local_addr()?;
    println!("listening on http://{local}");
    let shutdown = CancellationToken::new();
    let signals = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        signals.cancel();
    });
    squidbot_server::run(listener, gateway, shutdown).await.context("the gateway stopped")?;
    eprintln!("gateway stopped");
    Ok(())
}

async fn wait_for_signal() {
    let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(error) => {
            tracing::warn!(%error, "can't watch SIGTERM; Ctrl-C still stops the gateway");
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
