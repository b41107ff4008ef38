//! The "Workers" block of the assistant's prompt: its session's running sub-agents with
//! their last status line, and the work that finished recently.

use super::pool::one_line;
use super::{Priority, WorkerPool, WorkerState};
use crate::context::PromptSection;

/// Finished workers listed.
const RECENT: usize = 5;

/// The section for `session_key`, `None` when it never delegated (or it was forgotten).
pub(super) fn section(pool: &WorkerPool, session_key: &str) -> Option<PromptSection> {
    let running: Vec<_> = pool.owned_by(session_key).into_iter().filter(|worker| !worker.state.is_terminal()).collect();
    let finished = pool.finished_for(session_key, RECENT);
    if running.is_empty() && finished.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    if !running.is_empty() {
        lines.push("Running:".to_owned());
        for worker in &running {
            let status = if worker.status.is_empty() { "started".to_owned() } else { worker.status.clone() };
            let waiting = if worker.state == WorkerState::WaitingForInput { ", waiting" } else { "" };
            let priority = match worker.priority {
                Priority::Background => "background",
                Priority::Normal => "waited for",
            };
            lines.push(format!(
                "- {} {} ({priority}, {}s{waiting}): {status} | task: {}",
                worker.id,
                worker.role,
                worker.elapsed.as_secs(),
                one_line(&worker.task, 100)
            ));
        }
    }
    if !finished.is_empty() {
        lines.push("Recently finished:".to_owned());
        for worker in finished.iter().rev() {
            let result = worker.result.as_deref().unwrap_or_default();
            lines.push(format!(
                "- {} {} {}: {} | task: {}",
                worker.id,
                worker.role,
                worker.state.as_str(),
                one_line(result, 120),
                one_line(&worker.task, 60)
            ));
        }
    }
    Some(PromptSection { title: "Workers".into(), body: lines.join("\n") })
}
