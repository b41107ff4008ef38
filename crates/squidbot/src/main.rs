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
mod people;
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
    limit_allocator_arenas();
    keep_files_private();
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

/// glibc gives each thread that meets a busy heap an arena of its own, up to eight per
/// core, and keeps what each arena ever held: a gateway whose blocking pool threads each
/// build a large request once ends up holding that peak once per arena. One arena per
/// core (at least two) keeps memory flat under a long conversation (BENCHMARKS.md, the
/// soak) at no cost in speed on this many threads. `MALLOC_ARENA_MAX` still wins when set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_allocator_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(2, usize::from).max(2);
    let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
    // Called before any thread starts, as mallopt's settings are read when arenas are made.
    // SAFETY: mallopt takes two integers and only changes a glibc allocator setting; no
    // memory is passed or returned.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_allocator_arenas() {}

/// Everything squidbot creates (the home, the database, transcripts, memory, keys) is
/// its user's alone: directories 700, files 600, whatever the shell's umask was.
fn keep_files_private() {
    // SAFETY: umask only sets the process's file-creation mask; it takes and returns an
    // integer and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::umask(0o077);
    }
}
