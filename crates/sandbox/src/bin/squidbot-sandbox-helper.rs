//! The sandbox helper as a program of its own (the squidbot binary answers to the same
//! subcommand): `squidbot-sandbox-helper __sandbox-exec <launch JSON>`.

use std::process::ExitCode;

fn main() -> ExitCode {
    match squidbot_sandbox::run_if_requested() {
        Some(code) => code,
        None => {
            eprintln!("usage: squidbot-sandbox-helper {} <launch JSON>", squidbot_sandbox::HELPER_SUBCOMMAND);
            ExitCode::from(2)
        }
    }
}
