//! `cron_add`: schedules a job from a conversation, validated exactly as `squidbot cron add`.

use std::sync::Arc;

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::ids::job_id;
use squidbot_core::jobs::{DynJobStore, JobRequest, JobRequestError, job_time, job_zone, new_user_job};
use squidbot_core::schedule::ScheduleError;
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use super::refusal;
use crate::{parse, schema};

/// Every schedule form, told to the model with any schedule it got wrong so the retry
/// can pick a form instead of guessing again.
const SCHEDULE_FORMS: &str = "valid schedules: 5-field cron \"0 9 * * 1-5\", \"every 30m\" (s, m, h, d), \
                              \"at 2026-12-01T09:00\" (in tz) or \"at 2026-12-01T09:00:00Z\", \"daily 09:00\", \
                              \"weekly mon 09:00\"";

/// Schedule a reminder or recurring task; when due, `message` starts a new turn.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CronAddArguments {
    /// Short name for the user.
    pub name: String,
    /// "weekly mon 09:00", "daily 08:30", "every 2h", "at 2026-12-01T09:00", or cron "0 9 * * 1-5".
    pub schedule: String,
    /// Full instruction for your future self when it fires.
    pub message: String,
    /// Where to reply; default the user's usual channel.
    pub channel: Option<String>,
    /// IANA zone, e.g. Europe/Berlin; default the user's.
    pub tz: Option<String>,
}

/// The `cron_add` tool.
#[derive(Clone)]
pub struct CronAddTool {
    store: Arc<dyn DynJobStore>,
    default_zone: String,
}

impl std::fmt::Debug for CronAddTool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("CronAddTool").finish_non_exhaustive()
    }
}

impl CronAddTool {
    /// A `cron_add` tool writing to `store`; jobs asked for without a zone get
    /// `default_zone` (an IANA name).
    pub fn new(store: Arc<dyn DynJobStore>, default_zone: String) -> Self {
        Self { store, default_zone }
    }

    async fn add(&self, arguments: CronAddArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let request = JobRequest {
            name: &arguments.name,
            schedule: &arguments.schedule,
            message: &arguments.message,
            channel: arguments.channel.as_deref(),
            timezone: arguments.tz.as_deref(),
            default_zone: &self.default_zone,
            owner_context: &context.context,
        };
        let job = new_user_job(&request, job_id(), Timestamp::now()).map_err(|error| {
            let hint = match &error {
                JobRequestError::Schedule(ScheduleError::Parse { .. }) => format!("; {SCHEDULE_FORMS}"),
                JobRequestError::Empty { .. }
                | JobRequestError::Schedule(
                    ScheduleError::UnknownCadence { .. }
                    | ScheduleError::UnknownZone { .. }
                    | ScheduleError::NoFutureRun { .. },
                ) => String::new(),
            };
            ToolError::RespondToModel(format!("can't add the job: {error}{hint}"))
        })?;
        self.store.insert_boxed(&job).await.map_err(|error| refusal("add the job", error))?;
        let next_run = job_time(job.next_run, &job_zone(&job)).unwrap_or_else(|| "-".to_owned());
        Ok(ToolOutput::text(format!(
            "added job {} ({}): \"{}\" in {}, next run {next_run}; the gateway runs it then and sends the reply to the user",
            job.id, job.name, job.schedule, job.timezone
        )))
    }
}

impl Tool for CronAddTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<CronAddArguments>("cron_add")
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.add(parse(arguments)?, context).await
    }
}
