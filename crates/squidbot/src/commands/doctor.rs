//! `squidbot doctor`: quick checks of an installation (config, database, workspace) and
//! which sandbox runs commands, with every backend's probe result.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use squidbot_sandbox::{Active, Report};
use squidbot_types::sandbox::SandboxBackend;

use crate::cli::DoctorFlags;
use crate::config as config_loader;
use crate::wiring::Environment;

mod security;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ok,
    Warning,
    Failed,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warning => "warn",
            Self::Failed => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug)]
struct Check {
    name: &'static str,
    verdict: Verdict,
    detail: String,
}

/// Runs `doctor` with its flags: the installation checks, or with `--security` the
/// security review.
pub fn run_with(flags: &DoctorFlags) -> Result<ExitCode> {
    if flags.security { security::run(flags.json) } else { run(flags.json) }
}

/// Runs the checks; exits non-zero when one failed (warnings don't count).
pub fn run(as_json: bool) -> Result<ExitCode> {
    let mut checks = Vec::new();
    let environment = match Environment::load() {
        Ok(environment) => environment,
        Err(error) => {
            checks.push(Check { name: "config", verdict: Verdict::Failed, detail: format!("{error:#}") });
            return Ok(finish(&checks, None, as_json));
        }
    };
    checks.push(config_check(&environment));
    checks.push(match environment.database() {
        Ok(_) => {
            Check { name: "database", verdict: Verdict::Ok, detail: environment.paths.database().display().to_string() }
        }
        Err(error) => Check { name: "database", verdict: Verdict::Failed, detail: format!("{error:#}") },
    });
    checks.push(workspace_check(&environment));
    checks.push(privacy_check(&environment));
    let report = environment.sandbox().report();
    checks.push(sandbox_check(&report));
    Ok(finish(&checks, Some(&report), as_json))
}

/// What squidbot keeps under its home that must be the user's alone (700/600): the home,
/// the config, the database, the keys, transcripts and memory, those that exist.
fn private_paths(environment: &Environment) -> Vec<std::path::PathBuf> {
    let home = &environment.paths.home;
    let mut candidates = vec![
        home.clone(),
        environment.paths.config.clone(),
        environment.paths.database(),
        home.join("audit.key"),
        home.join("vault.key"),
        home.join("sessions"),
        home.join("memory"),
    ];
    candidates.retain(|path| path.exists());
    candidates
}

/// Those of [`private_paths`] the group or others may use, with their modes.
fn exposed_paths(environment: &Environment) -> Vec<(std::path::PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt as _;
    private_paths(environment)
        .into_iter()
        .filter_map(|path| {
            let mode = std::fs::metadata(&path).ok()?.permissions().mode() & 0o777;
            (mode & 0o077 != 0).then_some((path, mode))
        })
        .collect()
}

/// The home, the config, the database and the keys must be the user's alone (700/600):
/// anything readable by the group or others is named.
fn privacy_check(environment: &Environment) -> Check {
    let home = &environment.paths.home;
    let open: Vec<String> =
        exposed_paths(environment).iter().map(|(path, mode)| format!("{} is {mode:o}", path.display())).collect();
    if open.is_empty() {
        Check {
            name: "files",
            verdict: Verdict::Ok,
            detail: format!("{} and what squidbot keeps there are private", home.display()),
        }
    } else {
        Check {
            name: "files",
            verdict: Verdict::Warning,
            detail: format!("readable by others: {} (fix with `chmod -R go-rwx {}`)", open.join(", "), home.display()),
        }
    }
}

fn config_check(environment: &Environment) -> Check {
    let path = environment.paths.config.display();
    if !environment.loaded.file_exists {
        return Check {
            name: "config",
            verdict: Verdict::Warning,
            detail: format!("{path} does not exist: run `squidbot onboard`"),
        };
    }
    let issues = config_loader::validate(environment.config());
    if issues.is_empty() {
        Check { name: "config", verdict: Verdict::Ok, detail: path.to_string() }
    } else {
        let problems: Vec<String> = issues.iter().map(ToString::to_string).collect();
        Check { name: "config", verdict: Verdict::Failed, detail: format!("{path}: {}", problems.join("; ")) }
    }
}

fn workspace_check(environment: &Environment) -> Check {
    let workspace = environment.workspace();
    let probe = workspace.join(format!(".squidbot-doctor-{}", std::process::id()));
    let written = std::fs::create_dir_all(&workspace)
        .and_then(|()| std::fs::write(&probe, b"doctor"))
        .and_then(|()| std::fs::remove_file(&probe));
    match written {
        Ok(()) => {
            Check { name: "workspace", verdict: Verdict::Ok, detail: format!("{} (writable)", workspace.display()) }
        }
        Err(error) => Check {
            name: "workspace",
            verdict: Verdict::Failed,
            detail: format!("can't write in {}: {error}", workspace.display()),
        },
    }
}

fn sandbox_check(report: &Report) -> Check {
    let selection = &report.selection;
    let (verdict, detail) = match &selection.active {
        Active::Landlock | Active::Bubblewrap(_) => {
            (Verdict::Ok, format!("{} ({})", selection.active.name(), selection.reason))
        }
        Active::None if report.configured == SandboxBackend::None => {
            (Verdict::Warning, format!("none: {}", selection.reason))
        }
        Active::None => (Verdict::Warning, format!("none: commands run unconfined; {}", selection.reason)),
        Active::Unavailable { backend, reason } => (
            Verdict::Failed,
            format!("{} is configured but does not work here, exec refuses to run: {reason}", backend.as_str()),
        ),
    };
    Check { name: "sandbox", verdict, detail }
}

fn finish(checks: &[Check], report: Option<&Report>, as_json: bool) -> ExitCode {
    let failed = checks.iter().any(|check| check.verdict == Verdict::Failed);
    if as_json {
        let sandbox = report.map(|report| {
            json!({
                "configured": report.configured.as_str(),
                "active": report.selection.active.name(),
                "reason": report.selection.reason,
                "process_limit": report.process_limit.describe(),
                "probes": report.probes.iter().map(|probe| json!({
                    "backend": probe.backend.as_str(),
                    "works": probe.outcome.is_ok(),
                    "detail": match &probe.outcome { Ok(detail) | Err(detail) => detail },
                })).collect::<Vec<_>>(),
            })
        });
        let checks: Vec<_> = checks
            .iter()
            .map(|check| json!({ "name": check.name, "verdict": check.verdict.as_str(), "detail": check.detail }))
            .collect();
        println!("{}", json!({ "ok": !failed, "checks": checks, "sandbox": sandbox }));
    } else {
        for check in checks {
            println!("{:<4} {:<10} {}", check.verdict.as_str(), check.name, check.detail);
        }
        if let Some(report) = report {
            for probe in &report.probes {
                let (verdict, detail) = match &probe.outcome {
                    Ok(detail) => ("works", detail),
                    Err(reason) => ("no", reason),
                };
                println!("     sandbox    {:<10} {verdict}: {detail}", probe.backend.as_str());
            }
            println!("     sandbox    processes  {}", report.process_limit.describe());
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
