//! `squidbot hooks`: lists the `[[hooks]]` and runs them by hand on an input file.

use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use squidbot_core::hooks::{HookEvent, HookInput, HookVerdict};
use squidbot_tools::hooks::{ExecutableHooks, verdict};
use squidbot_types::hooks::HookConfig;

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
    let about_a_tool = HookEvent::from_name(&hook.event).is_some_and(HookEvent::is_about_a_tool);
    let tools = match (about_a_tool, hook.tools.is_empty()) {
        (false, _) => "-".to_owned(),
        (true, true) => "every tool".to_owned(),
        (true, false) => hook.tools.join(", "),
    };
    let failure = if hook.fail_open { "fail open" } else { "fail closed" };
    format!("{}\t{}\ttools: {tools}\ttimeout: {} ms\t{failure}", hook.event, hook.command.join(" "), hook.timeout_ms)
}

async fn test(environment: &Environment, event: &str, file: &std::path::Path) -> Result<ExitCode> {
    let Some(event) = HookEvent::from_name(event) else {
        bail!("can't test hooks: unknown event {event:?}; known: {}", HookEvent::names());
    };
    let text = std::fs::read_to_string(file).with_context(|| format!("can't read {}", file.display()))?;
    let mut value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("can't read {}: not JSON", file.display()))?;
    if let serde_json::Value::Object(fields) = &mut value {
        fields.insert("event".into(), event.name().into());
        if event.is_about_a_tool() {
            fields.entry("arguments").or_insert_with(|| serde_json::json!({}));
        }
    }
    let expected = match event {
        HookEvent::BeforeTool | HookEvent::AfterTool => "{\"tool\", \"arguments\", ...}",
        HookEvent::MessageReceived | HookEvent::BeforeReply => "{\"text\", \"session\", ...}",
        _ => "a JSON object",
    };
    let input: HookInput = serde_json::from_value(value.clone())
        .with_context(|| format!("can't read {}: expected {expected}", file.display()))?;
    let hooks = ExecutableHooks::new(&environment.config().hooks, environment.sandbox())?;
    let matching: Vec<&HookConfig> = hooks.matching(event, &input.tool).collect();
    if matching.is_empty() {
        match event.is_about_a_tool() {
            true => println!("No {event} hook applies to `{}`.", input.tool),
            false => println!("No {event} hook is configured."),
        }
    }
    let mut blocked = false;
    for hook in matching {
        let program = hook.command.join(" ");
        if !event.decides() {
            match hooks.notify(hook, &value).await {
                Ok(()) => println!("{program}: ran"),
                Err(failure) => println!("{program}: failed: {failure}"),
            }
            continue;
        }
        let result = hooks.run(hook, &value).await;
        if let Err(failure) = &result {
            println!("{program}: failed: {failure}");
        }
        match verdict(hook, event, result) {
            HookVerdict::Allow => println!("{program}: allow"),
            HookVerdict::Rewrite(serde_json::Value::String(text)) => println!("{program}: rewrite text: {text}"),
            HookVerdict::Rewrite(arguments) => println!("{program}: rewrite {arguments}"),
            HookVerdict::Veto(reason) => {
                blocked = true;
                println!("{program}: veto: {reason}");
            }
        }
    }
    Ok(if blocked { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
