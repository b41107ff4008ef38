//! `squidbot-scripted-llm`: serves the same text reply to every chat request, and embeddings
//! from the fake embedding model, for benchmarks; optionally after a fixed latency, with
//! streamed words paced and stamped with their send time.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::Duration;

use squidbot_testkit::{FixedReply, run_fixed_reply_with};
use tokio::net::TcpListener;

const USAGE: &str =
    "usage: squidbot-scripted-llm --port N [--reply TEXT] [--delay-ms N] [--token-interval-ms N] [--stamp-tokens]
  --delay-ms N           wait N ms before answering each chat request (default 0)
  --token-interval-ms N  stream each word N ms after the previous one (OpenAI wire; default 0)
  --stamp-tokens         stream each word as its send time, Unix microseconds and a space (OpenAI wire)";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
struct Arguments {
    port: u16,
    reply: FixedReply,
}

/// Why the command line could not be understood.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum ArgumentsError {
    #[error("can't parse arguments: {0} needs a value")]
    MissingValue(String),
    #[error("can't parse arguments: {0:?} is not a port number")]
    InvalidPort(String),
    #[error("can't parse arguments: {0} needs a whole number of milliseconds, not {1:?}")]
    InvalidMilliseconds(String, String),
    #[error("can't parse arguments: unknown argument {0:?}")]
    Unknown(String),
    #[error("can't parse arguments: --port is required")]
    MissingPort,
}

fn parse_arguments(arguments: impl IntoIterator<Item = String>) -> Result<Arguments, ArgumentsError> {
    let mut arguments = arguments.into_iter();
    let mut port = None;
    let mut reply = FixedReply::new("Hello from the scripted LLM.");
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--port" => {
                let value = arguments.next().ok_or_else(|| ArgumentsError::MissingValue(argument.clone()))?;
                port = Some(value.parse().map_err(|_| ArgumentsError::InvalidPort(value))?);
            }
            "--reply" => {
                reply.text = arguments.next().ok_or_else(|| ArgumentsError::MissingValue(argument.clone()))?;
            }
            "--delay-ms" => reply.delay = milliseconds(&argument, arguments.next())?,
            "--token-interval-ms" => reply.token_interval = milliseconds(&argument, arguments.next())?,
            "--stamp-tokens" => reply.stamp_tokens = true,
            _ => return Err(ArgumentsError::Unknown(argument)),
        }
    }
    Ok(Arguments { port: port.ok_or(ArgumentsError::MissingPort)?, reply })
}

fn milliseconds(option: &str, value: Option<String>) -> Result<Duration, ArgumentsError> {
    let value = value.ok_or_else(|| ArgumentsError::MissingValue(option.to_owned()))?;
    let count = value.parse().map_err(|_| ArgumentsError::InvalidMilliseconds(option.to_owned(), value))?;
    Ok(Duration::from_millis(count))
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
    match run_fixed_reply_with(listener, arguments.reply, std::future::pending()).await {
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
            Ok(Arguments { port: 0, reply: FixedReply::new("hi there") })
        );
        assert_eq!(parse(&["--port", "8080"]).map(|arguments| arguments.port), Ok(8080));
    }

    #[test]
    fn parses_latency_pacing_and_stamps() {
        let arguments = parse(&["--port", "0", "--delay-ms", "200", "--token-interval-ms", "5", "--stamp-tokens"]);
        let expected = FixedReply {
            text: "Hello from the scripted LLM.".to_owned(),
            delay: Duration::from_millis(200),
            token_interval: Duration::from_millis(5),
            stamp_tokens: true,
        };
        assert_eq!(arguments, Ok(Arguments { port: 0, reply: expected }));
        assert_eq!(parse(&["--port", "0"]).map(|arguments| arguments.reply.is_paced()), Ok(false));
    }

    #[test]
    fn rejects_bad_command_lines() {
        assert_eq!(parse(&[]), Err(ArgumentsError::MissingPort));
        assert_eq!(parse(&["--port"]), Err(ArgumentsError::MissingValue("--port".to_owned())));
        assert_eq!(parse(&["--port", "x"]), Err(ArgumentsError::InvalidPort("x".to_owned())));
        assert_eq!(parse(&["--verbose"]), Err(ArgumentsError::Unknown("--verbose".to_owned())));
        assert_eq!(
            parse(&["--port", "0", "--delay-ms", "soon"]),
            Err(ArgumentsError::InvalidMilliseconds("--delay-ms".to_owned(), "soon".to_owned()))
        );
        assert_eq!(
            parse(&["--port", "0", "--token-interval-ms"]),
            Err(ArgumentsError::MissingValue("--token-interval-ms".to_owned()))
        );
    }
}
