//! `squidbot agent -m MESSAGE`: one turn, the final reply on stdout.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use squidbot_core::agent::{AgentEvents, TurnStatus};
use squidbot_types::ToolCall;
use tokio_util::sync::CancellationToken;

use crate::cli::AgentArgs;
use crate::wiring::Environment;

/// Exit code after Ctrl-C, as shells expect.
const INTERRUPTED_EXIT: u8 = 130;

/// Progress of a one-shot turn: warnings and shared files on stderr, nothing else.
struct QuietEvents;

impl AgentEvents for QuietEvents {
    fn tool_started(&self, call: &ToolCall) {
        tracing::info!(tool = %call.name, "tool call");
    }

    fn warning(&self, message: &str) {
        eprintln!("warning: {message}");
    }

    fn file_shared(&self, file: &squidbot_core::tool::SharedFile) {
        eprintln!("file: {}", file.path.display());
    }
}

/// Runs one message through the assistant.
pub fn one_shot(
    environment: &Environment,
    arguments: &AgentArgs,
    message: &str,
    runtime: &tokio::runtime::Runtime,
) -> Result<ExitCode> {
    if message.trim().is_empty() {
        anyhow::bail!("can't send an empty message");
    }
    let agent = environment.ready_assistant(arguments.model.as_deref(), false, "cli")?;
    runtime.block_on(async {
        let (mut session, warnings) = agent.open_session(&arguments.session).await?;
        for warning in warnings {
            eprintln!("warning: session {}: {warning}", arguments.session);
        }
        if environment.session_archived(&arguments.session)? {
            eprintln!("note: session {} was archived; resuming it", arguments.session);
        }
        let cancel = CancellationToken::new();
        let watcher = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    cancel.cancel();
                }
            })
        };
        let outcome = agent.run_turn(&mut session, message, &QuietEvents, &cancel).await;
        let outcome = outcome?;
        let code = {
            let mut stdout = std::io::stdout().lock();
            match outcome.status {
                TurnStatus::Completed => {
                    writeln!(stdout, "{}", outcome.reply)?;
                    ExitCode::SUCCESS
                }
                TurnStatus::MaxTurns => {
                    eprintln!("warning: the turn hit max_turns");
                    writeln!(stdout, "{}", outcome.reply)?;
                    ExitCode::SUCCESS
                }
                TurnStatus::Cancelled => {
                    eprintln!("interrupted");
                    ExitCode::from(INTERRUPTED_EXIT)
                }
                TurnStatus::Refused => {
                    eprintln!("error: {}", outcome.reply);
                    ExitCode::FAILURE
                }
            }
        };
        if outcome.status != TurnStatus::Cancelled {
            finish_background_work(&agent, &mut session, &cancel).await?;
            // The reply is out; a compaction started by this turn finishes before exit
            // (Ctrl-C abandons it: nothing is applied until it completes).
            tokio::select! {
                () = cancel.cancelled() => {}
                settled = agent.settle(&mut session, &QuietEvents) => settled?,
            }
        }
        // Hooks observing this turn (turn_finished, after_tool) end before the process
        // does; each has its timeout.
        agent.hooks().close().await;
        watcher.abort();
        Ok(code)
    })
}

/// A one-shot process would lose background sub-agents at exit: wait for them (Ctrl-C
/// stops them), record their results in the session and print each after the reply.
async fn finish_background_work(
    agent: &squidbot_core::agent::Agent,
    session: &mut squidbot_core::session::Session,
    cancel: &CancellationToken,
) -> Result<()> {
    let Some(delegation) = agent.delegation() else { return Ok(()) };
    let running = delegation.pool().owned_by(session.key()).iter().filter(|worker| !worker.state.is_terminal()).count();
    if running > 0 {
        eprintln!("waiting for {running} background sub-agent(s); Ctrl-C stops them");
        delegation.wait_for_background(session.key(), cancel).await;
        if cancel.is_cancelled() {
            delegation.shutdown().await;
        }
    }
    let results = agent.take_background_results(session).await?;
    let mut stdout = std::io::stdout().lock();
    for result in results {
        writeln!(stdout, "\n{}", result.announcement())?;
    }
    Ok(())
}
