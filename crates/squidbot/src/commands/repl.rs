//! `squidbot agent`: the interactive REPL with streaming, line editing, history,
//! multi-line input, `/new`, `/quit`, the tree and model commands (`commands`), and
//! Ctrl-C that stops a turn, not the program.

mod commands;

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use squidbot_core::agent::{AgentEvents, TurnStatus};
use squidbot_types::ToolCall;
use tokio_util::sync::CancellationToken;

use crate::cli::AgentArgs;
use crate::wiring::Environment;

const HELP: &str = "Commands: /new starts a fresh conversation, /quit exits, /help shows this.
/tree shows the conversation's branches; /fork [ENTRY] continues from an entry on a new branch
(default: before your last message); /model [NAME] lists or switches models; /compact condenses
the older turns now.
End a line with \\ to continue it, or wrap several lines in \"\"\" … \"\"\".
Ctrl-C stops the current reply; Ctrl-D exits.";

/// Prints the reply as it streams, tool activity dimmed.
struct TerminalEvents {
    color: bool,
    /// True when streamed text left the cursor mid-line.
    mid_line: AtomicBool,
}

impl TerminalEvents {
    fn dim(&self, text: &str) -> String {
        if self.color { format!("\x1b[2m{text}\x1b[0m") } else { text.to_owned() }
    }

    /// Prints a status line, first ending any half-written line of reply text.
    fn status_line(&self, text: &str) {
        let newline = if self.mid_line.swap(false, Ordering::Relaxed) { "\n" } else { "" };
        println!("{newline}{}", self.dim(text));
    }
}

impl AgentEvents for TerminalEvents {
    fn text_delta(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        if write!(stdout, "{text}").and_then(|()| stdout.flush()).is_err() {
            tracing::debug!("stdout closed while streaming");
        }
        if let Some(last) = text.chars().last() {
            self.mid_line.store(last != '\n', Ordering::Relaxed);
        }
    }

    fn stream_reset(&self) {
        self.status_line("[retrying…]");
    }

    fn tool_started(&self, call: &ToolCall) {
        let mut arguments = call.arguments.replace('\n', " ");
        if arguments.len() > 100 {
            arguments.truncate(squidbot_core::text::floor_char_boundary(&arguments, 100));
            arguments.push('…');
        }
        self.status_line(&format!("  → {} {arguments}", call.name));
    }

    fn tool_finished(&self, call: &ToolCall, is_error: bool, _output: &str) {
        if is_error {
            self.status_line(&format!("  ✗ {} failed (the model sees the error)", call.name));
        }
    }

    fn warning(&self, message: &str) {
        eprintln!("warning: {message}");
    }

    fn notice(&self, message: &str) {
        self.status_line(&format!("({message})"));
    }

    fn file_shared(&self, file: &squidbot_core::tool::SharedFile) {
        self.status_line(&format!("  📎 {} ({})", file.path.display(), file.mime));
    }
}

/// Prints a background sub-agent's result the moment it ends; the session records it at
/// the start of the next turn (or at exit).
struct TerminalSink {
    color: bool,
}

impl squidbot_core::delegation::BackgroundSink for TerminalSink {
    fn background_finished(&self, result: &squidbot_core::delegation::BackgroundResult) {
        let text = result.announcement();
        let shown = if self.color { format!("\x1b[2m{text}\x1b[0m") } else { text };
        println!("\n{shown}");
    }
}

/// Runs the system jobs while the REPL is open, until `stop`.
fn start_housekeeping(
    environment: &Environment,
    runtime: &tokio::runtime::Runtime,
    stop: CancellationToken,
) -> Option<crate::jobs::RunningScheduler> {
    match runtime.block_on(crate::jobs::start_system_jobs(environment, stop)) {
        Ok(running) => Some(running),
        Err(error) => {
            eprintln!("warning: system jobs are off: {error:#}");
            None
        }
    }
}

/// Reads one logical input: `\`-continued lines or a `"""` block.
fn read_input(editor: &mut DefaultEditor) -> Result<Option<String>, ReadlineError> {
    let first = editor.readline("you> ")?;
    if first.trim() == "\"\"\"" {
        let mut lines = Vec::new();
        loop {
            let line = editor.readline("... ")?;
            if line.trim() == "\"\"\"" {
                break;
            }
            lines.push(line);
        }
        return Ok(Some(lines.join("\n")));
    }
    let mut text = first;
    while text.ends_with('\\') {
        text.pop();
        text.push('\n');
        text.push_str(&editor.readline("... ")?);
    }
    Ok(Some(text))
}

/// Runs the REPL until `/quit` or end of input.
pub fn run(environment: &Environment, arguments: &AgentArgs, runtime: &tokio::runtime::Runtime) -> Result<ExitCode> {
    let mut agent = environment.ready_assistant(arguments.model.as_deref(), true, "cli")?;
    let (mut session, warnings) = runtime.block_on(agent.open_session(&arguments.session))?;
    for warning in warnings {
        eprintln!("warning: session {}: {warning}", arguments.session);
    }
    let mut editor = DefaultEditor::new()?;
    let history_path = environment.paths.repl_history();
    if history_path.exists()
        && let Err(error) = editor.load_history(&history_path)
    {
        tracing::debug!(%error, "can't load REPL history");
    }
    if environment.session_archived(&arguments.session)? {
        println!("(session {} was archived; resuming it)", arguments.session);
    }
    let housekeeping_stop = CancellationToken::new();
    let housekeeping = start_housekeeping(environment, runtime, housekeeping_stop.clone());
    let color = std::env::var_os("NO_COLOR").is_none();
    let events = TerminalEvents { color, mid_line: AtomicBool::new(false) };
    if let Some(delegation) = agent.delegation() {
        delegation.set_sink(std::sync::Arc::new(TerminalSink { color }));
    }
    let prior = session.history().len();
    println!(
        "squidbot · {} · session {}{} · /help for commands",
        agent.settings().model,
        session.key(),
        if prior > 0 { format!(" ({prior} messages)") } else { String::new() }
    );
    loop {
        let input = match read_input(&mut editor) {
            Ok(Some(input)) => input,
            Ok(None) => continue,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => return Err(error.into()),
        };
        let trimmed = input.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Err(error) = editor.add_history_entry(trimmed) {
            tracing::debug!(%error, "can't record REPL history");
        }
        match trimmed {
            "/quit" | "/exit" => break,
            "/help" => {
                println!("{HELP}");
                continue;
            }
            "/new" => {
                session.start_new_branch();
                println!("{}", events.dim("(new conversation; the old one stays in the session file)"));
                continue;
            }
            command if matches!(command.split_whitespace().next(), Some("/tree" | "/fork" | "/model" | "/compact")) => {
                let mut words = command.split_whitespace();
                let (name, argument) = (words.next().unwrap_or_default(), words.next());
                let done = runtime.block_on(async {
                    match name {
                        "/tree" => commands::tree(&agent, &session).await,
                        "/fork" => commands::fork(&agent, &mut session, argument).await,
                        "/compact" => commands::compact(&agent, &mut session, &events).await,
                        _ => Ok(()),
                    }
                });
                if name == "/model" {
                    let current = agent.settings().model.clone();
                    match argument {
                        None => {
                            for model in crate::channels::configured_models(environment, &current) {
                                let marker = if model == current { '*' } else { ' ' };
                                println!("{marker} {model}");
                            }
                        }
                        Some(model) => match environment.ready_assistant(Some(model), true, "cli") {
                            Ok(next) => {
                                runtime.block_on(agent.shutdown());
                                agent = next;
                                if let Some(delegation) = agent.delegation() {
                                    delegation.set_sink(std::sync::Arc::new(TerminalSink { color }));
                                }
                                println!(
                                    "{}",
                                    events.dim(&format!("(model {current} → {model}; the session records it)"))
                                );
                            }
                            Err(error) => eprintln!("can't switch to {model}: {error:#}"),
                        },
                    }
                }
                if let Err(error) = done {
                    eprintln!("error: {error:#}");
                }
                continue;
            }
            command if command.starts_with('/') && !command.contains(' ') => {
                println!("unknown command {command}; /help lists them");
                continue;
            }
            _ => {}
        }
        let cancel = CancellationToken::new();
        let result = runtime.block_on(async {
            let watcher = {
                let cancel = cancel.clone();
                tokio::spawn(async move {
                    if tokio::signal::ctrl_c().await.is_ok() {
                        cancel.cancel();
                    }
                })
            };
            let result = agent.run_turn(&mut session, trimmed, &events, &cancel).await;
            watcher.abort();
            result
        });
        match result {
            Ok(outcome) => match outcome.status {
                TurnStatus::Completed => println!(),
                TurnStatus::MaxTurns | TurnStatus::Refused => println!("\n{}", outcome.reply),
                TurnStatus::Cancelled => println!("{}", events.dim("\n[stopped]")),
            },
            Err(error) => eprintln!("\nerror: {error}"),
        }
    }
    housekeeping_stop.cancel();
    runtime.block_on(async {
        if let Some(delegation) = agent.delegation() {
            // Background sub-agents don't outlive the REPL; what they did is recorded.
            delegation.shutdown().await;
            if let Err(error) = agent.take_background_results(&mut session).await {
                eprintln!("warning: can't record the background results: {error}");
            }
        }
        let settle = agent.settle(&mut session, &events);
        match tokio::time::timeout(std::time::Duration::from_secs(60), settle).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => eprintln!("warning: can't apply the background compaction: {error}"),
            Err(_) => eprintln!("warning: a background compaction did not finish; it will run again next time"),
        }
        if let Some(housekeeping) = housekeeping {
            housekeeping.stopped().await;
        }
        agent.hooks().close().await;
    });
    if let Some(parent) = history_path.parent()
        && let Err(error) = std::fs::create_dir_all(parent)
            .and_then(|()| editor.save_history(&history_path).map_err(|error| std::io::Error::other(error.to_string())))
    {
        tracing::debug!(%error, "can't save REPL history");
    }
    Ok(ExitCode::SUCCESS)
}
