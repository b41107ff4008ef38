//! Background jobs: a command started detached, its output going to a log file under
//! `.squidbot/jobs/`, outliving the turn that started it.

use std::path::Path;
use std::process::Stdio;

use squidbot_core::tool::{ToolError, ToolOutput};

use super::environment;

/// Directory below the workspace holding job logs.
pub const JOBS_DIRECTORY: &str = ".squidbot/jobs";

/// Starts `command` in its own process group with output to a fresh log file, and returns
/// at once. The job records its exit code at the end of the log.
pub(crate) async fn start(command: &str, directory: &Path, passed_names: &[String]) -> Result<ToolOutput, ToolError> {
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
    // The outer shell runs the job and then appends its exit code to the log.
    let mut process = tokio::process::Command::new("sh");
    process
        .arg("-c")
        .arg(r#"sh -c "$1"; echo "[exit code $?]""#)
        .arg("squidbot-job")
        .arg(command)
        .current_dir(directory)
        .env_clear()
        .envs(environment::values(passed_names))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_for_errors)
        .process_group(0)
        .kill_on_drop(false);
    let child = process.spawn().map_err(|error| failure("can't spawn sh", error))?;
    let group = child.id().unwrap_or_default();
    // Dropping the handle leaves the job running; tokio reaps it when it exits.
    drop(child);
    Ok(ToolOutput::text(format!(
        "started background job {id} (process group {group})\n\
         log: {log_name}\n\
         read the log with read_file; stop the job with `kill -- -{group}`"
    )))
}
