//! `squidbot workers list|cancel`: the assistant's sub-agents as the running gateway
//! knows them (they live inside it), through its `workers.list` / `workers.cancel` methods.

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::gateway_client::{GatewayClient, gateway_address, payload};
use crate::cli::WorkersAction;
use crate::wiring::Environment;

/// Runs `squidbot workers …`.
pub async fn run(environment: &Environment, action: &WorkersAction) -> Result<()> {
    let config = &environment.config().gateway;
    let Some(mut client) = GatewayClient::connect(config).await? else {
        bail!(
            "can't reach the gateway at {}: no gateway is running there; workers live inside the gateway, start one with `squidbot gateway`",
            gateway_address(config)?
        );
    };
    let outcome = match action {
        WorkersAction::List(flags) => list(&mut client, flags.json).await,
        WorkersAction::Cancel { id } => cancel(&mut client, id).await,
    };
    client.close().await;
    outcome
}

async fn list(client: &mut GatewayClient, as_json: bool) -> Result<()> {
    let workers = payload(client.call("workers.list", json!({})).await?, "list the workers")?["workers"].clone();
    let workers = workers.as_array().cloned().unwrap_or_default();
    if as_json {
        println!("{}", Value::Array(workers));
        return Ok(());
    }
    if workers.is_empty() {
        println!("no workers");
        return Ok(());
    }
    println!("{:<10} {:<12} {:<18} {:<10} {:>7}  {:<40} STATUS", "ID", "ROLE", "STATE", "PRIORITY", "AGE", "SESSION");
    for worker in &workers {
        let text = |key: &str| worker[key].as_str().unwrap_or_default().to_owned();
        let priority = if worker["background"] == true { "background" } else { "normal" };
        println!(
            "{:<10} {:<12} {:<18} {:<10} {:>7}  {:<40} {}",
            text("id"),
            text("role"),
            text("state"),
            priority,
            age(worker["elapsedMs"].as_u64().unwrap_or_default()),
            text("sessionKey"),
            text("status")
        );
    }
    Ok(())
}

async fn cancel(client: &mut GatewayClient, id: &str) -> Result<()> {
    let answer = payload(client.call("workers.cancel", json!({"id": id})).await?, &format!("cancel worker {id}"))?;
    let worker = &answer["worker"];
    println!(
        "cancelling {} worker {}; it stops within seconds and its owner session gets the cancelled result",
        worker["role"].as_str().unwrap_or("the"),
        worker["id"].as_str().unwrap_or(id)
    );
    Ok(())
}

/// `12s`, `3m04s`, `2h05m`.
fn age(milliseconds: u64) -> String {
    let seconds = milliseconds / 1000;
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m{:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h{:02}m", seconds / 3600, (seconds % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_at_a_glance() {
        assert_eq!(age(999), "0s");
        assert_eq!(age(59_000), "59s");
        assert_eq!(age(184_000), "3m04s");
        assert_eq!(age(7_500_000), "2h05m");
    }
}
