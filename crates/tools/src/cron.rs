//! Cron tools: adding, listing, removing, pausing and resuming scheduled jobs from a
//! conversation. Every call is scoped by the context of its `ToolContext`: a job belongs
//! to the context that added it, and other contexts can't see or change it.

mod add;
mod list;
mod manage;

use std::sync::Arc;

use squidbot_core::jobs::{DynJobStore, Job, JobKind, JobStoreError};
use squidbot_core::tool::{DynTool, ToolContext, ToolError};

pub use add::{CronAddArguments, CronAddTool};
pub use list::{CronListArguments, CronListTool};
pub use manage::{
    CronPauseArguments, CronPauseTool, CronRemoveArguments, CronRemoveTool, CronResumeArguments, CronResumeTool,
};

/// The five cron tools (`cron_add`, `cron_list`, `cron_remove`, `cron_pause`,
/// `cron_resume`) over `store`; `default_zone` is the IANA zone of jobs added without one.
pub fn cron_tools(store: Arc<dyn DynJobStore>, default_zone: String) -> Vec<Arc<dyn DynTool>> {
    vec![
        Arc::new(CronAddTool::new(store.clone(), default_zone)),
        Arc::new(CronListTool::new(store.clone())),
        Arc::new(CronRemoveTool::new(store.clone())),
        Arc::new(CronPauseTool::new(store.clone())),
        Arc::new(CronResumeTool::new(store)),
    ]
}

/// A job store failure as the model sees it. Storage failures are told to the model too
/// (and logged): a broken database should cost the request, not the whole answer.
fn refusal(action: &str, error: JobStoreError) -> ToolError {
    match error {
        JobStoreError::NotFound { id } => not_found(action, &id),
        error @ (JobStoreError::AlreadyExists { .. } | JobStoreError::Storage { .. }) => {
            tracing::warn!(%error, "cron tool failed");
            ToolError::RespondToModel(format!("can't {action}: {error}"))
        }
    }
}

fn not_found(action: &str, id: &str) -> ToolError {
    ToolError::RespondToModel(format!("can't {action}: there is no job {id:?}; use cron_list to find ids"))
}

/// The user job `id` of the calling context. Jobs of other contexts read as missing, so
/// one context can't probe another's ids; heartbeat and system jobs are refused because
/// HEARTBEAT.md and squidbot itself own them.
async fn owned_job(store: &dyn DynJobStore, id: &str, context: &ToolContext, action: &str) -> Result<Job, ToolError> {
    let id = id.trim();
    let job = store.get_boxed(id).await.map_err(|error| refusal(action, error))?;
    let job = job.filter(|job| job.owner_context == context.context).ok_or_else(|| not_found(action, id))?;
    match job.kind {
        JobKind::User => Ok(job),
        JobKind::Heartbeat => Err(ToolError::RespondToModel(format!(
            "can't {action}: job {id} comes from HEARTBEAT.md; edit that file instead"
        ))),
        JobKind::System => Err(ToolError::RespondToModel(format!(
            "can't {action}: job {id} is squidbot's own housekeeping and can't be changed"
        ))),
    }
}

#[cfg(test)]
mod tests;
