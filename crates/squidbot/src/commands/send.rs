//! `squidbot send TARGET MESSAGE`: sends as `USER` through the running gateway's
//! `bus.send` method; when no gateway answers, the message goes to the target's trigger
//! file, which the gateway delivers when it starts.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use serde_json::{Value, json};
use squidbot_bus::{DynBusJournal, MemoryJournal, Priority, SendRequest, Sender};
use squidbot_types::config::GatewayConfig;

use super::gateway_client::GatewayClient;
use crate::cli::SendArgs;
use crate::wiring::Environment;

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
        session: None,
    };
    Ok(match bus.send(&Sender::user(), request).await {
        Ok(result) => Answer::Sent(result.to_json()),
        Err(error) => Answer::Refused { status: error.code().to_owned(), message: error.to_string() },
    })
}

/// Calls `bus.send` on the running gateway; `None` when no gateway answers.
async fn through_gateway(config: &GatewayConfig, arguments: &SendArgs, priority: Priority) -> Result<Option<Answer>> {
    let Some(mut client) = GatewayClient::connect(config).await? else {
        tracing::debug!("no gateway answered; using the trigger file");
        return Ok(None);
    };
    let mut params = json!({"target": arguments.target, "message": arguments.message, "from": "user"});
    if priority != Priority::Normal {
        params["priority"] = json!(priority.as_str());
    }
    let response = client.call("bus.send", params).await?;
    client.close().await;
    if response["ok"] == true {
        return Ok(Some(Answer::Sent(response["payload"].clone())));
    }
    let error = &response["error"];
    let message = error["message"].as_str().unwrap_or("the gateway refused the message").to_owned();
    match error["details"]["status"].as_str() {
        Some(status) => Ok(Some(Answer::Refused { status: status.to_owned(), message })),
        None => bail!("the gateway refused the message: {message}"),
    }
}
