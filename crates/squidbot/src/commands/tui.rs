//! `squidbot tui`: the terminal client of `squidbot-tui`, wired to the running gateway
//! (the command's WebSocket client, handshake included) or, when none answers within a
//! moment, to the assistant in this process (`tui/local.rs`).

mod local;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;
use squidbot_tui::{FrameSocket, GatewayTransport, Options, SocketError, ThemeName};

use super::gateway_client::GatewayClient;
use crate::cli::TuiArgs;
use crate::wiring::Environment;

/// How long a local gateway may take to accept the connection before the client runs the
/// assistant itself: a gateway on this machine answers in milliseconds.
const GATEWAY_TIMEOUT: Duration = Duration::from_millis(300);

/// The gateway client as the TUI's frame socket.
struct Socket(GatewayClient);

impl FrameSocket for Socket {
    async fn send(&mut self, frame: Value) -> Result<(), SocketError> {
        self.0.send_frame(&frame).await.map_err(|error| SocketError::Closed(format!("{error:#}")))
    }

    async fn receive(&mut self) -> Result<Value, SocketError> {
        self.0.next_frame().await.map_err(|error| SocketError::Closed(format!("{error:#}")))
    }
}

/// Runs `squidbot tui` until the user quits.
pub fn run(environment: Environment, arguments: &TuiArgs, runtime: &tokio::runtime::Runtime) -> Result<ExitCode> {
    let theme = ThemeName::parse(&arguments.theme).unwrap_or_default();
    let workspace = environment.workspace();
    let skills = environment.skill_catalog().discover().skills.iter().map(|skill| skill.name().to_owned()).collect();
    let options = Options {
        session: arguments.session.clone(),
        theme,
        skills,
        paths: squidbot_tui::paths::workspace_paths(&workspace),
    };
    runtime.block_on(async {
        let client = if arguments.local {
            None
        } else {
            GatewayClient::connect_within(&environment.config().gateway, GATEWAY_TIMEOUT).await?
        };
        match client {
            Some(client) => {
                let methods = client.methods().to_vec();
                let transport = GatewayTransport::new(Socket(client), methods, &arguments.session);
                squidbot_tui::run(transport, options).await?;
            }
            None => {
                let transport = local::LocalTransport::new(environment, arguments.model.clone());
                squidbot_tui::run(transport, options).await?;
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
