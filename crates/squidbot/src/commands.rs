//! Dispatch of CLI commands.

mod agent;
mod approvals;
mod audit;
mod config;
mod cron;
mod doctor;
mod gateway;
mod gateway_client;
mod hooks;
mod memory;
mod onboard;
mod repl;
mod secrets;
mod send;
mod sessions;
mod skills;
mod status;
#[cfg(feature = "tui")]
mod tui;
mod usage;
mod users;
mod workers;

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::Command;
use crate::wiring::Environment;

/// Runs one command to completion.
pub fn run(command: Command, runtime: &tokio::runtime::Runtime) -> Result<ExitCode> {
    match command {
        Command::Onboard(arguments) => onboard::run(&arguments).map(|()| ExitCode::SUCCESS),
        Command::Agent(arguments) => {
            let environment = Environment::load()?;
            match &arguments.message {
                Some(message) => agent::one_shot(&environment, &arguments, message, runtime),
                None => repl::run(&environment, &arguments, runtime),
            }
        }
        #[cfg(feature = "tui")]
        Command::Tui(arguments) => {
            let environment = Environment::load()?;
            tui::run(environment, &arguments, runtime)
        }
        Command::Gateway(arguments) => {
            if let Some(action) = &arguments.action {
                return gateway::helper(action).map(|()| ExitCode::SUCCESS);
            }
            let environment = Environment::load()?;
            runtime.block_on(gateway::run(&environment, &arguments)).map(|()| ExitCode::SUCCESS)
        }
        Command::Status(flags) => {
            let environment = Environment::load()?;
            runtime.block_on(status::run(&environment, flags.json)).map(|()| ExitCode::SUCCESS)
        }
        Command::Doctor(flags) => doctor::run_with(&flags),
        Command::Config { action } => config::run(action),
        Command::Sessions { action } => {
            let environment = Environment::load()?;
            runtime.block_on(sessions::run(&environment, action)).map(|()| ExitCode::SUCCESS)
        }
        Command::Memory { action } => {
            let environment = Environment::load()?;
            runtime.block_on(memory::run(&environment, action)).map(|()| ExitCode::SUCCESS)
        }
        Command::Send(arguments) => {
            let environment = Environment::load()?;
            runtime.block_on(send::run(&environment, &arguments))
        }
        Command::Workers { action } => {
            let environment = Environment::load()?;
            runtime.block_on(workers::run(&environment, &action)).map(|()| ExitCode::SUCCESS)
        }
        Command::Cron { action } => {
            let environment = Environment::load()?;
            runtime.block_on(cron::run(&environment, action)).map(|()| ExitCode::SUCCESS)
        }
        Command::Skills { action } => {
            let environment = Environment::load()?;
            skills::run(&environment, action).map(|()| ExitCode::SUCCESS)
        }
        Command::Users { action } => {
            let environment = Environment::load()?;
            users::run(&environment, action).map(|()| ExitCode::SUCCESS)
        }
        Command::Approvals { action } => {
            let environment = Environment::load()?;
            approvals::run(&environment, action).map(|()| ExitCode::SUCCESS)
        }
        Command::Usage(arguments) => {
            let environment = Environment::load()?;
            usage::run(&environment, &arguments).map(|()| ExitCode::SUCCESS)
        }
        Command::Audit(arguments) => {
            let environment = Environment::load()?;
            audit::run(&environment, &arguments).map(|()| ExitCode::SUCCESS)
        }
        Command::Secrets { action } => secrets::run(action).map(|()| ExitCode::SUCCESS),
        Command::Hooks { action } => {
            let environment = Environment::load()?;
            runtime.block_on(hooks::run(&environment, action))
        }
        Command::Maintenance => {
            let environment = Environment::load()?;
            for line in runtime.block_on(crate::jobs::run_system_jobs_now(&environment))? {
                println!("{line}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
