//! `squidbot hooks`: lists the `[[hooks]]` and runs them by hand on an input file.

use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use squidbot_core::hooks::{HookInput, HookVerdict};
use squidbot_tools::hooks::{ExecutableHooks, verdict};
use squidbot_types::hooks::{BEFORE_TOOL, HOOK_EVENTS, HookConfig};

use crate::cli::HooksAction;
use crate::wiring::Environment;

/// Runs one `hooks` action.
pub async fn run(environment: &Environment, action: HooksAction) -> Result<ExitCode> {
    let config = &environment.config().hooks;
    match action {
        HooksAction::List => {
            if config.is_empty() {
                println!("No hooks configured ([[hooks]] in config.toml).");
            }
            for hook in config {
                println!("{}", describe(hook));
            }
            Ok(ExitCode::SUCCESS)
        }
        HooksAction::Test { event, file } => test(environment, &event, &file).await,
    }
}

fn describe(hook: &HookConfig) -> String {
    let tools = if hook.tools.is_empty() { "every tool".to_owned() } else { hook.tools.join(", ") };
    let failure = if hook.fail_open { "fail open" } else { "fail closed" };
    format!("{}\t{}\ttools: {tools}\ttimeout: {} ms\t{failure}", hook.event, hook.command.join(" "), hook.timeout_ms)
}

async fn test(environment: &Environment, event: &str, file: &std::path::Path) -> Result<ExitCode> {
    if !HOOK_EVENTS.contains(&event) {
        bail!("can't test hooks: unknown event {event:?}; known: {}", HOOK_EVENTS.join(", "));
    }
    let text = std::fs::read_to_string(file).with_context(|| format!("can't read {}", file.display()))?;
    let mut value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("can't read {}: not JSON", file.display()))?;
    if let serde_json::Value::Object(fields) = &mut value {
        fields.insert("event".into(), event.into());
        fields.entry("arguments").or_insert_with(|| serde_json::json!({}));
    }
    let input: HookInput = serde_json::from_value(value.clone())
        .with_context(|| format!("can't read {}: expected {{\"tool\", \"arguments\", ...}}", file.display()))?;
    let hooks = ExecutableHooks::new(&environment.config().hooks, environment.sandbox())?;
    let matching: Vec<&HookConfig> = hooks.matching(event, &input.tool).collect();
    if matching.is_empty() {
        println!("No {event} hook applies to `{}`.", input.tool);
    }
    let mut blocked = false;
    for hook in matching {
        let result = hooks.run(hook, &value).await;
        let program = hook.command.join(" ");
        if event != BEFORE_TOOL {
            match result {
                Ok(_) => println!("{program}: ran"),
                Err(failure) => println!("{program}: failed: {failure}"),
            }
            continue;
        }
        if let Err(failure) = &result {
            println!("{program}: failed: {failure}");
        }
        match verdict(hook, result) {
            HookVerdict::Allow => println!("{program}: allow"),
            HookVerdict::Rewrite(arguments) => println!("{program}: rewrite {arguments}"),
            HookVerdict::Veto(reason) => {
                blocked = true;
                println!("{program}: veto: {reason}");
            }
        }
    }
    Ok(if blocked { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
