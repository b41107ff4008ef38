//! Probing whether a backend works here: the helper confines a real command that must
//! write inside its workspace and fail to write outside it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::launch::{Confiner, HELPER_SUBCOMMAND, Launch, Limits};
use crate::policy::ResolvedPaths;

/// How long a probe may take before it counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// `PATH` the probe's command runs with.
const PROBE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What probing found: a status line from the helper on success, the reason otherwise.
pub type ProbeOutcome = Result<String, String>;

/// Runs the probe for `confiner` through `helper`.
pub fn probe(confiner: Confiner, helper: &Path, paths: &ResolvedPaths, bwrap: Option<PathBuf>) -> ProbeOutcome {
    let scratch = tempfile::Builder::new()
        .prefix("squidbot-sandbox-probe-")
        .tempdir()
        .map_err(|error| format!("can't create a probe directory: {error}"))?;
    let workspace = scratch.path().join("workspace");
    let outside = scratch.path().join("outside");
    let private_tmp = scratch.path().join("tmp");
    for directory in [&workspace, &outside, &private_tmp] {
        std::fs::create_dir(directory).map_err(|error| format!("can't create {}: {error}", directory.display()))?;
    }
    let command = format!(
        "set -e; : > ./inside; if ( : > '{}/escaped' ) 2>/dev/null; then echo 'wrote outside the sandbox'; exit 3; fi",
        outside.display()
    );
    let launch = Launch {
        confiner,
        command,
        workspace: workspace.clone(),
        read_only: paths.read_only.clone(),
        read_write: Vec::new(),
        hidden: paths.hidden.clone(),
        private_tmp: (confiner == Confiner::Landlock).then_some(private_tmp),
        network: false,
        limits: Limits { cpu_secs: 10, data_bytes: 512 << 20, file_bytes: 16 << 20, processes: None },
        cgroup: None,
        bwrap,
        report: true,
        program: None,
        rules: None,
    };
    let description = serde_json::to_string(&launch).map_err(|error| format!("can't describe the probe: {error}"))?;
    let mut child = Command::new(helper)
        .arg(HELPER_SUBCOMMAND)
        .arg(description)
        .current_dir(&workspace)
        .env_clear()
        .env("PATH", PROBE_PATH)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("can't run the helper {}: {error}", helper.display()))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > PROBE_TIMEOUT => {
                if let Err(error) = child.kill() {
                    tracing::warn!(%error, "can't kill a hung sandbox probe");
                }
                return Err(format!("the probe did not finish within {}s", PROBE_TIMEOUT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(error) => return Err(format!("can't wait for the probe: {error}")),
        }
    }
    let output = child.wait_with_output().map_err(|error| format!("can't read the probe's output: {error}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let status_line = stdout.lines().next().unwrap_or_default().trim().to_owned();
    if !output.status.success() {
        let said = [stderr.trim(), stdout.trim()].into_iter().find(|text| !text.is_empty()).unwrap_or("no output");
        return Err(format!("{} ({})", said.lines().last().unwrap_or(said), output.status));
    }
    if !workspace.join("inside").exists() {
        return Err("the probe could not write inside its workspace".to_owned());
    }
    if outside.join("escaped").exists() {
        return Err("the probe wrote outside its workspace".to_owned());
    }
    Ok(status_line)
}
