//! `squidbot-scripted-llm`: serves the same text reply to every chat request, and embeddings
//! from the fake embedding model, for benchmarks.

use std::net::Ipv4Addr;
use std::process::ExitCode;

use squidbot_testkit::run_fixed_reply;
use tokio::net::TcpListener;

const USAGE: &str = "usage: squidbot-scripted-llm --port N [--reply TEXT]";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
struct Arguments {
    port: u16,
    reply: String,
}

/// Why the command line could not be understood.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum ArgumentsError {
    #[error("can't parse arguments: {0} needs a value")]
    MissingValue(String),
    #[error("can't parse arguments: {0:?} is not a port number")]
    InvalidPort(String),
    #[error("can't parse arguments: unknown argument {0:?}")]
    Unknown(String),
    #[error("can't parse arguments: --port is required")]
    MissingPort,
}

fn parse_arguments(arguments: impl IntoIterator<Item = String>) -> Result<Arguments, ArgumentsError> {
    let mut arguments = arguments.into_iter();
    let mut port = None;
    let mut reply = "Hello from the scripted LLM.".to_owned();
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--port" => {
                let value = arguments.next().ok_or_else(|| ArgumentsError::MissingValue(argument.clone()))?;
                port = Some(value.parse().map_err(|_| ArgumentsError::InvalidPort(value))?);
            }
            "--reply" => {
                reply = arguments.next().ok_or_else(|| ArgumentsError::MissingValue(argument.clone()))?;
            }
            _ => return Err(ArgumentsError::Unknown(argument)),
        }
    }
    Ok(Arguments { port: port.ok_or(ArgumentsError::MissingPort)?, reply })
}

#[tokio::main]
async fn main() -> ExitCode {
    let arguments = match parse_arguments(std::env::args().skip(1)) {
        Ok(arguments) => arguments,
        Err(error) => {
            eprintln!("{error}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, arguments.port)).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("can't bind 127.0.0.1:{}: {error}", arguments.port);
            return ExitCode::FAILURE;
        }
    };
    match listener.local_addr() {
        Ok(address) => println!("listening on http://{address}/v1"),
        Err(error) => {
            eprintln!("can't read the bound address: {error}");
            return ExitCode::FAILURE;
        }
    }
    match run_fixed_reply(listener, arguments.reply, std::future::pending()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(arguments: &[&str]) -> Result<Arguments, ArgumentsError> {
        parse_arguments(arguments.iter().map(|argument| (*argument).to_owned()))
    }

    #[test]
    fn parses_port_and_reply() {
        assert_eq!(
            parse(&["--port", "0", "--reply", "hi there"]),
            Ok(Arguments { port: 0, reply: "hi there".to_owned() })
        );
        assert_eq!(parse(&["--port", "8080"]).map(|arguments| arguments.port), Ok(8080));
    }

    #[test]
    fn rejects_bad_command_lines() {
        assert_eq!(parse(&[]), Err(ArgumentsError::MissingPort));
        assert_eq!(parse(&["--port"]), Err(ArgumentsError::MissingValue("--port".to_owned())));
        assert_eq!(parse(&["--port", "x"]), Err(ArgumentsError::InvalidPort("x".to_owned())));
        assert_eq!(parse(&["--verbose"]), Err(ArgumentsError::Unknown("--verbose".to_owned())));
    }
}
