//! The `squidbot` binary: parses the command line and runs the chosen command.

mod agents;
mod bus;
mod channels;
mod cli;
mod commands;
mod config;
mod jobs;
mod logging;
mod paths;
mod wiring;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // The binary doubles as the sandbox helper; that must happen before any thread starts.
    if let Some(code) = squidbot_sandbox::run_if_requested() {
        return code;
    }
    // So does the skill validator `skills install` starts inside the sandbox.
    if let Some(code) = squidbot_skills::install::run_validator_if_requested() {
        return code;
    }
    let cli = cli::Cli::parse();
    // Blocking work (SQLite, session appends, file tools) gets a bounded pool: under a
    // thousand concurrent turns the default 512 threads only add memory and contention.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(16)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: can't start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match commands::run(cli.command, &runtime) {
        Ok(code) => code,
        Err(error) => {
            let chain: Vec<String> = error.chain().map(ToString::to_string).collect();
            eprintln!("error: {}", chain.join(": "));
            ExitCode::FAILURE
        }
    }
}
