//! `squidbot config show|path|validate`.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::ConfigAction;
use crate::config as config_loader;
use crate::paths::Paths;

/// Runs a config action. Never starts logging before the config is known to parse.
pub fn run(action: ConfigAction) -> Result<ExitCode> {
    let paths = Paths::from_env()?;
    match action {
        ConfigAction::Path => {
            println!("{}", paths.config.display());
            Ok(ExitCode::SUCCESS)
        }
        ConfigAction::Show => {
            // Unresolved: a value from the vault shows as its `secret:NAME` reference (MCP
            // servers' `env` is plain text, so a resolved value would be printed).
            let loaded = config_loader::load_unresolved(&paths.config)?;
            if !loaded.file_exists {
                eprintln!("note: {} does not exist; showing defaults", paths.config.display());
            }
            print!("{}", toml::to_string_pretty(&loaded.config)?);
            Ok(ExitCode::SUCCESS)
        }
        ConfigAction::Validate => {
            let loaded = config_loader::load(&paths.config)?;
            if !loaded.file_exists {
                anyhow::bail!("no config at {}: run `squidbot onboard` first", paths.config.display());
            }
            let mut issues = config_loader::validate(&loaded.config);
            let workspace = paths.workspace(loaded.config.workspace.path.as_deref());
            issues.extend(crate::agents::prompt_file_issues(&loaded.config, &workspace));
            // What `squidbot gateway` would refuse at start-up, said now (a warning: the
            // config may be meant for the terminal only).
            let gateway_problems = gateway_problems(&loaded.config, &paths.home);
            if loaded.config.llm.model.is_empty() {
                issues.push(squidbot_llm::ConfigIssue { key: "llm.model".into(), problem: "not set".into() });
            }
            let mut warnings = match squidbot_llm::Router::from_config(&loaded.config, &|name| std::env::var(name).ok())
            {
                Ok(router) => router.validate_keys(),
                Err(_) => Vec::new(),
            };
            warnings.extend(crate::channels::settings::warnings(&loaded.config));
            let gateway_refuses = !gateway_problems.is_empty();
            warnings.extend(gateway_problems);
            for warning in &warnings {
                eprintln!("warning: {warning}");
            }
            if issues.is_empty() {
                match gateway_refuses {
                    // Agrees with start-up: the terminal works, the gateway would not start.
                    true => println!(
                        "{}: ok for the terminal, but `squidbot gateway` would refuse to start (see the warnings)",
                        paths.config.display()
                    ),
                    false => println!("{}: ok", paths.config.display()),
                }
                return Ok(ExitCode::SUCCESS);
            }
            for issue in &issues {
                eprintln!("{}: {issue}", paths.config.display());
            }
            eprintln!("{} problem(s) found", issues.len());
            Ok(ExitCode::FAILURE)
        }
    }
}

/// What `squidbot gateway` would refuse to start with: its auth settings, no auth off
/// loopback, TLS files it can't use.
fn gateway_problems(config: &squidbot_types::config::Config, home: &std::path::Path) -> Vec<squidbot_llm::ConfigIssue> {
    let issue = |key: &str, problem: String| squidbot_llm::ConfigIssue {
        key: key.into(),
        problem: format!("{problem} (`squidbot gateway` refuses to start)"),
    };
    let Ok(address) = config.gateway.bind.parse::<std::net::IpAddr>() else {
        return vec![issue("gateway.bind", format!("{:?} is not an IP address", config.gateway.bind))];
    };
    let mut problems: Vec<_> = match crate::commands::gateway::auth_of(&config.gateway.auth) {
        Ok(auth) => crate::commands::gateway::unauthenticated_bind(&auth, address)
            .map(|problem| issue("gateway.bind", problem))
            .into_iter()
            .collect(),
        Err(problem) => vec![issue("gateway.auth", format!("{problem:#}"))],
    };
    if let Err(tls) = crate::commands::gateway::load_tls(&config.gateway, home) {
        problems.push(issue(&tls.key, tls.problem));
    }
    problems
}
