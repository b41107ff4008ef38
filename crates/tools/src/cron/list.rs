//! `cron_list`: the calling context's jobs, as `squidbot cron list --json` shows them.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::jobs::{DynJobStore, job_row};
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use super::refusal;
use crate::{parse, schema};

/// List scheduled jobs with ids, schedules and next runs.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CronListArguments {}

/// The `cron_list` tool.
#[derive(Clone)]
pub struct CronListTool {
    store: Arc<dyn DynJobStore>,
}

impl std::fmt::Debug for CronListTool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("CronListTool").finish_non_exhaustive()
    }
}

impl CronListTool {
    /// A `cron_list` tool reading `store`.
    pub fn new(store: Arc<dyn DynJobStore>) -> Self {
        Self { store }
    }

    async fn list(&self, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let jobs = self.store.list_boxed().await.map_err(|error| refusal("list the jobs", error))?;
        let rows: Vec<serde_json::Value> =
            jobs.iter().filter(|job| job.owner_context == context.context).map(job_row).collect();
        if rows.is_empty() {
            return Ok(ToolOutput::text("no jobs yet; add one with cron_add"));
        }
        let text = serde_json::to_string(&rows)
            .map_err(|error| ToolError::Fatal(format!("can't list the jobs: can't serialize them: {error}")))?;
        Ok(ToolOutput::text(text))
    }
}

impl Tool for CronListTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<CronListArguments>("cron_list")
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let CronListArguments {} = parse(arguments)?;
        self.list(context).await
    }
}
