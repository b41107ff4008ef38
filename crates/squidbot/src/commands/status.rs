//! `squidbot status`: configuration, providers, workspace, sessions, prompt size and MCP
//! servers.

use anyhow::Result;
use serde_json::json;
use squidbot_core::clock::{Clock as _, SystemClock};
use squidbot_core::context::{BOOTSTRAP_FILES, FIRST_RUN_FILE};
use squidbot_core::store::SessionStore;
use squidbot_store::JsonlSessionStore;
use squidbot_types::ToolSpec;

use crate::wiring::{Environment, OWNER_CONTEXT};

/// Prints the status report.
pub async fn run(environment: &Environment, as_json: bool) -> Result<()> {
    let config = environment.config();
    let workspace = environment.workspace();
    let model = environment.assistant_model(None).unwrap_or_else(|_| "(not set)".to_owned());
    // Status reports a broken or missing config instead of failing on it.
    let (providers, mut problems) = match environment.router() {
        Ok(router) => (router.describe(), router.validate_keys().iter().map(ToString::to_string).collect()),
        Err(error) => (Vec::new(), vec![error.to_string()]),
    };
    if !environment.loaded.file_exists {
        problems = vec![format!("no config at {}: run `squidbot onboard`", environment.paths.config.display())];
    }
    if let Err(issues) = squidbot_mcp::check(&config.mcp) {
        problems.extend(issues.iter().map(ToString::to_string));
    }
    let mcp_servers = mcp_servers(config);
    let sessions = JsonlSessionStore::new(environment.paths.sessions()).list().await?;
    let bootstrap: Vec<&str> = BOOTSTRAP_FILES
        .iter()
        .chain([FIRST_RUN_FILE].iter())
        .copied()
        .filter(|name| workspace.join(name).is_file())
        .collect();
    let (prompt_chars, tool_count, tool_chars) = match environment.assistant(None, true, "cli") {
        Ok(agent) => {
            let specs = agent.tool_specs();
            (agent.system_prompt(false, &[]).text.len(), specs.len(), specs.iter().map(ToolSpec::serialized_len).sum())
        }
        Err(_) => (0, 0, 0),
    };
    let memory = memory_report(environment).await;
    let channels = channel_report(environment).await;
    if as_json {
        let report = json!({
            "version": env!("CARGO_PKG_VERSION"),
            "home": environment.paths.home,
            "config": { "path": environment.paths.config, "exists": environment.loaded.file_exists, "env_overrides": environment.loaded.env_keys },
            "model": model,
            "fallbacks": config.llm.fallbacks,
            "providers": providers.iter().map(|provider| json!({
                "name": provider.name, "kind": provider.kind.as_str(), "api_base": provider.api_base, "key": provider.key.to_string(), "vision": provider.vision,
            })).collect::<Vec<_>>(),
            "problems": problems,
            "workspace": { "path": workspace, "exists": workspace.is_dir(), "bootstrap_files": bootstrap },
            "sessions": { "count": sessions.len(), "messages": sessions.iter().map(|session| session.message_count).sum::<usize>() },
            "prompt": { "system_chars": prompt_chars, "tools": tool_count, "tool_schema_chars": tool_chars },
            "memory": memory,
            "mcp": { "servers": mcp_servers },
            "channels": channels,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("squidbot {}", env!("CARGO_PKG_VERSION"));
    println!("home       {}", environment.paths.home.display());
    println!(
        "config     {}{}",
        environment.paths.config.display(),
        if environment.loaded.file_exists { "" } else { " (missing: run `squidbot onboard`)" }
    );
    if !environment.loaded.env_keys.is_empty() {
        println!("env        overrides {}", environment.loaded.env_keys.join(", "));
    }
    println!("model      {model}");
    if !config.llm.fallbacks.is_empty() {
        println!("fallbacks  {}", config.llm.fallbacks.join(" → "));
    }
    for provider in &providers {
        println!(
            "provider   {} ({}, {}) key: {}{}",
            provider.name,
            provider.kind.as_str(),
            provider.api_base,
            provider.key,
            if provider.vision { ", sees images" } else { "" }
        );
    }
    for problem in &problems {
        println!("problem    {problem}");
    }
    println!(
        "workspace  {}{}",
        workspace.display(),
        if workspace.is_dir() { format!(" ({})", bootstrap.join(", ")) } else { " (missing)".to_owned() }
    );
    println!(
        "sessions   {} ({} messages)",
        sessions.len(),
        sessions.iter().map(|session| session.message_count).sum::<usize>()
    );
    println!("prompt     {prompt_chars} chars system prompt, {tool_count} tools in {tool_chars} chars of schema");
    for server in &mcp_servers {
        println!(
            "mcp        {} ({}, {}) {}",
            server["name"].as_str().unwrap_or_default(),
            server["transport"].as_str().unwrap_or_default(),
            if server["enabled"] == true { "enabled" } else { "disabled" },
            server["target"].as_str().unwrap_or_default()
        );
    }
    for channel in &channels {
        let error = channel["lastError"].as_str().map(|error| format!(" ({error})")).unwrap_or_default();
        println!(
            "channel    {} ({}) {}{error}",
            channel["name"].as_str().unwrap_or_default(),
            channel["kind"].as_str().unwrap_or_default(),
            channel["status"].as_str().unwrap_or_default()
        );
    }
    match memory.get("error") {
        Some(error) => println!("memory     unavailable: {}", error.as_str().unwrap_or_default()),
        None => {
            println!(
                "memory     {} memories ({} with vectors), recall: {}",
                memory["memories"],
                memory["with_vectors"],
                memory["recall"].as_str().unwrap_or_default()
            );
            println!(
                "           memory.md {} chars; bulletin {}",
                memory["document_chars"],
                memory["bulletin"].as_str().unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// The enabled chat channels: their live state from the running gateway, or
/// `not running` when no gateway answers.
async fn channel_report(environment: &Environment) -> Vec<serde_json::Value> {
    let config = environment.config();
    let mut live = std::collections::HashMap::new();
    if config.channels.values().any(|channel| channel.enabled)
        && let Ok(Some(mut client)) = super::gateway_client::GatewayClient::connect(&config.gateway).await
    {
        if let Ok(response) = client.call("status", json!({})).await
            && let Some(channels) = response["payload"]["channels"].as_array()
        {
            for channel in channels {
                live.insert(channel["name"].as_str().unwrap_or_default().to_owned(), channel.clone());
            }
        }
        client.close().await;
    }
    config
        .channels
        .iter()
        .filter(|(_, channel)| channel.enabled)
        .map(|(name, channel)| {
            live.remove(name).unwrap_or_else(
                || json!({"name": name, "kind": channel.kind_of(name), "status": "not running (no gateway answers)"}),
            )
        })
        .collect()
}

/// The configured MCP servers (name, transport, enabled, command or URL); none is started.
fn mcp_servers(config: &squidbot_types::config::Config) -> Vec<serde_json::Value> {
    config
        .mcp
        .servers
        .iter()
        .map(|(name, server)| {
            let (transport, target) = match (&server.command, &server.url) {
                (Some(command), None) => ("stdio", command.clone()),
                // A query string may carry a credential; status never prints it.
                (None, Some(url)) => ("http", url.split('?').next().unwrap_or_default().to_owned()),
                _ => ("invalid", String::new()),
            };
            json!({ "name": name, "transport": transport, "enabled": server.enabled, "target": target })
        })
        .collect()
}

/// Memory facts for the owner's context, or the reason they can't be read.
async fn memory_report(environment: &Environment) -> serde_json::Value {
    let report = async {
        let memories = environment.memories()?;
        let stats = memories.stats(OWNER_CONTEXT).await?;
        let documents = environment.documents();
        let document = tokio::task::spawn_blocking(move || documents.read(OWNER_CONTEXT)).await??;
        let bulletin = squidbot_store::BulletinCache::new(environment.database()?).get(OWNER_CONTEXT)?;
        let bulletin = match bulletin {
            Some(bulletin) if !bulletin.content.is_empty() => {
                format!("written {} minutes ago", (SystemClock.unix_seconds() - bulletin.generated_at).max(0) / 60)
            }
            Some(_) => "empty (no memories yet)".to_owned(),
            None => "not written yet".to_owned(),
        };
        anyhow::Ok(json!({
            "memories": stats.memories,
            "with_vectors": stats.with_vectors,
            "recall": match memories.embedding_model() {
                Some(_) => memories.mode().describe().to_owned(),
                None => format!("{} (no embedder configured)", memories.mode().describe()),
            },
            "embedding_model": memories.embedding_model(),
            "document_chars": document.map_or(0, |text| text.len()),
            "bulletin": bulletin,
            "database": environment.paths.database(),
        }))
    };
    report.await.unwrap_or_else(|error| json!({ "error": format!("{error:#}") }))
}
