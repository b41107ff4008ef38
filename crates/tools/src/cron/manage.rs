//! `cron_remove`, `cron_pause` and `cron_resume`: changing one job of the calling context
//! by id, with the same next-run rules as `squidbot cron`.

use std::sync::Arc;

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::jobs::{DynJobStore, JobStatus, job_time, job_zone, resumed_next_run};
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use super::{owned_job, refusal};
use crate::{parse, schema};

/// Delete a scheduled job.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CronRemoveArguments {
    /// Job id from cron_list.
    pub id: String,
}

/// Pause a job; it keeps its settings but stops running until resumed.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CronPauseArguments {
    /// Job id from cron_list.
    pub id: String,
}

/// Resume a paused job; runs missed while paused are skipped.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CronResumeArguments {
    /// Job id from cron_list.
    pub id: String,
}

macro_rules! job_tool {
    ($tool:ident, $name:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone)]
        pub struct $tool {
            store: Arc<dyn DynJobStore>,
        }

        impl std::fmt::Debug for $tool {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.debug_struct(stringify!($tool)).finish_non_exhaustive()
            }
        }

        impl $tool {
            #[doc = concat!("A `", $name, "` tool over `store`.")]
            pub fn new(store: Arc<dyn DynJobStore>) -> Self {
                Self { store }
            }
        }
    };
}

job_tool!(CronRemoveTool, "cron_remove", "The `cron_remove` tool.");
job_tool!(CronPauseTool, "cron_pause", "The `cron_pause` tool.");
job_tool!(CronResumeTool, "cron_resume", "The `cron_resume` tool.");

impl Tool for CronRemoveTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<CronRemoveArguments>("cron_remove")
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let CronRemoveArguments { id } = parse(arguments)?;
        let action = format!("remove job {}", id.trim());
        let job = owned_job(self.store.as_ref(), &id, context, &action).await?;
        self.store.remove_boxed(&job.id).await.map_err(|error| refusal(&action, error))?;
        Ok(ToolOutput::text(format!("removed job {} ({})", job.id, job.name)))
    }
}

impl Tool for CronPauseTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<CronPauseArguments>("cron_pause")
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let CronPauseArguments { id } = parse(arguments)?;
        let action = format!("pause job {}", id.trim());
        let job = owned_job(self.store.as_ref(), &id, context, &action).await?;
        // The next run stays stored so listings still show where the job stood.
        self.store
            .set_status_boxed(&job.id, JobStatus::Paused, job.next_run)
            .await
            .map_err(|error| refusal(&action, error))?;
        Ok(ToolOutput::text(format!("paused job {} ({})", job.id, job.name)))
    }
}

impl Tool for CronResumeTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<CronResumeArguments>("cron_resume")
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let CronResumeArguments { id } = parse(arguments)?;
        let action = format!("resume job {}", id.trim());
        let job = owned_job(self.store.as_ref(), &id, context, &action).await?;
        let next_run = resumed_next_run(&job, Timestamp::now())
            .map_err(|error| ToolError::RespondToModel(format!("can't {action}: {error}")))?;
        self.store
            .set_status_boxed(&job.id, JobStatus::Active, Some(next_run))
            .await
            .map_err(|error| refusal(&action, error))?;
        let shown = job_time(Some(next_run), &job_zone(&job)).unwrap_or_else(|| "-".to_owned());
        Ok(ToolOutput::text(format!("resumed job {} ({}): next run {shown}", job.id, job.name)))
    }
}
