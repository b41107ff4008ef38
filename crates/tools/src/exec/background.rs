//! Background jobs: a command started detached, its output going to a log file under
//! `.squidbot/jobs/`, outliving the turn that started it.

use std::path::Path;
use std::process::Stdio;

use squidbot_core::sandbox::SandboxedCommand;
use squidbot_core::tool::{ToolError, ToolOutput};

/// Directory below the workspace holding job logs.
pub const JOBS_DIRECTORY: &str = ".squidbot/jobs";

/// The shell line that runs `command` as a job: the job, then its exit code appended
/// to the log.
pub(crate) fn job_script(command: &str) -> String {
    format!("sh -c '{}'; echo \"[exit code $?]\"", command.replace('\'', r"'\''"))
}

/// Starts `wrapped` (a [`job_script`], already confined) in its own process group with
/// output to a fresh log file, and returns at once. The sandbox's lease lives until the
/// job ends.
pub(crate) async fn start(mut wrapped: SandboxedCommand, directory: &Path) -> Result<ToolOutput, ToolError> {
    let failure = |action: &str, error: std::io::Error| {
        ToolError::RespondToModel(format!("can't start background job: {action}: {error}"))
    };
    let jobs = directory.join(JOBS_DIRECTORY);
    tokio::fs::create_dir_all(&jobs).await.map_err(|error| failure("can't create the jobs directory", error))?;
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let log_name = format!("{JOBS_DIRECTORY}/{id}.log");
    let log = std::fs::File::create(directory.join(&log_name))
        .map_err(|error| failure("can't create the log file", error))?;
    let log_for_errors = log.try_clone().map_err(|error| failure("can't share the log file", error))?;
    let mut process = tokio::process::Command::new(&wrapped.program);
    process
        .args(&wrapped.arguments)
        .current_dir(&wrapped.current_dir)
        .env_clear()
        .envs(wrapped.environment.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_for_errors)
        .kill_on_drop(false);
    if !wrapped.starts_own_session {
        process.process_group(0);
    }
    let mut child = process.spawn().map_err(|error| failure("can't spawn sh", error))?;
    let group = child.id().unwrap_or_default();
    match wrapped.lease.take() {
        // Waiting keeps the sandbox (its process group, its temporary directory) until
        // the job is done; it goes with the gateway process at the latest.
        Some(lease) => {
            tokio::spawn(async move {
                if let Err(error) = child.wait().await {
                    tracing::warn!(%error, "can't wait for a background job");
                }
                drop(lease);
            });
        }
        // Dropping the handle leaves the job running; tokio reaps it when it exits.
        None => drop(child),
    }
    Ok(ToolOutput::text(format!(
        "started background job {id} (process group {group})\n\
         log: {log_name}\n\
         read the log with read_file; stop the job with `kill -- -{group}`"
    )))
}
