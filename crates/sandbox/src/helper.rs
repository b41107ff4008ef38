//! The helper: the process the gateway starts (its own binary, re-executed with
//! [`HELPER_SUBCOMMAND`]) that confines itself and then becomes the command. It starts a
//! new session, joins the command's process-count group, sets resource limits, then
//! either applies landlock rules and the seccomp filter and executes `sh -c`, or
//! executes `bwrap` with the equivalent arguments.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use nix::sys::resource::{Resource, setrlimit};

use crate::launch::{Confiner, HELPER_SUBCOMMAND, Launch, Limits};
use crate::{bubblewrap, ruleset, seccomp};

/// Exit code of the helper when it could not confine the command (nothing ran).
pub const SANDBOX_FAILURE_EXIT: u8 = 125;

/// Runs the helper when the process was started as one (`argv[1]` is
/// [`HELPER_SUBCOMMAND`]); returns `None` otherwise so the program goes on as usual.
/// Call it first thing in `main`, before any thread or runtime starts. On success it
/// never returns: the process becomes the confined command.
pub fn run_if_requested() -> Option<ExitCode> {
    let mut arguments = std::env::args_os().skip(1);
    if arguments.next().as_deref() != Some(OsStr::new(HELPER_SUBCOMMAND)) {
        return None;
    }
    let error = match arguments.next() {
        Some(launch) => confine_and_execute(&launch),
        None => HelperError("missing the launch description".to_owned()),
    };
    // Standard error is the command's: the caller shows it with the command's output.
    eprintln!("squidbot sandbox: {error}");
    Some(ExitCode::from(SANDBOX_FAILURE_EXIT))
}

/// Why the helper gave up.
#[derive(Debug)]
struct HelperError(String);

impl std::fmt::Display for HelperError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

fn fail(action: &str, error: impl std::fmt::Display) -> HelperError {
    HelperError(format!("can't {action}: {error}"))
}

/// Confines this process and executes the command; returns only on failure.
fn confine_and_execute(launch: &OsStr) -> HelperError {
    let launch: Launch = match launch.to_str().map(serde_json::from_str) {
        Some(Ok(launch)) => launch,
        Some(Err(error)) => return fail("read the launch description", error),
        None => return HelperError("the launch description is not UTF-8".to_owned()),
    };
    let outcome = match launch.confiner {
        Confiner::Landlock => landlock(&launch),
        Confiner::Bubblewrap => bubblewrap(&launch),
    };
    match outcome {
        Ok(error) | Err(error) => error,
    }
}

/// Steps both backends share: own session (so the caller's timeout kills the whole
/// group), the process-count group, resource limits.
fn common(launch: &Launch) -> Result<(), HelperError> {
    nix::unistd::setsid().map_err(|error| fail("start a new session", error))?;
    if let Some(group) = &launch.cgroup {
        let members = group.join("cgroup.procs");
        std::fs::write(&members, std::process::id().to_string())
            .map_err(|error| fail(&format!("join {}", members.display()), error))?;
    }
    limit(&launch.limits)
}

fn limit(limits: &Limits) -> Result<(), HelperError> {
    let set = |resource: Resource, name: &str, soft: u64, hard: u64| {
        setrlimit(resource, soft, hard).map_err(|error| fail(&format!("set {name}"), error))
    };
    set(Resource::RLIMIT_CORE, "RLIMIT_CORE", 0, 0)?;
    // The soft limit sends SIGXCPU; the hard one, a little later, SIGKILL.
    set(Resource::RLIMIT_CPU, "RLIMIT_CPU", limits.cpu_secs, limits.cpu_secs.saturating_add(2))?;
    set(Resource::RLIMIT_DATA, "RLIMIT_DATA", limits.data_bytes, limits.data_bytes)?;
    set(Resource::RLIMIT_FSIZE, "RLIMIT_FSIZE", limits.file_bytes, limits.file_bytes)?;
    if let Some(processes) = limits.processes {
        // RLIMIT_NPROC counts every process of the user, not just this command's.
        let running = user_tasks(nix::unistd::getuid().as_raw());
        let allowed = running.saturating_add(processes);
        set(Resource::RLIMIT_NPROC, "RLIMIT_NPROC", allowed, allowed)?;
    }
    Ok(())
}

/// Tasks (threads count) the user runs now, as `RLIMIT_NPROC` counts them.
fn user_tasks(uid: u32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut count = 0u64;
    for entry in entries.flatten() {
        let is_process = entry.file_name().to_str().is_some_and(|name| name.bytes().all(|byte| byte.is_ascii_digit()));
        if !is_process || !entry.metadata().is_ok_and(|metadata| metadata.uid() == uid) {
            continue;
        }
        let tasks = std::fs::read_dir(entry.path().join("task")).map(|tasks| tasks.count()).unwrap_or(1);
        count = count.saturating_add(u64::try_from(tasks).unwrap_or(1));
    }
    count
}

/// Root keeps its capabilities across `execve` unless the bounding set is emptied, and
/// capabilities would let a command past file permissions (landlock still applies, but
/// `/proc/kcore` and raw devices are not worth the risk).
fn drop_capabilities() -> Result<(), HelperError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    for set in [caps::CapSet::Bounding, caps::CapSet::Ambient, caps::CapSet::Inheritable] {
        caps::clear(None, set).map_err(|error| fail(&format!("drop the {set:?} capabilities"), error))?;
    }
    Ok(())
}

fn landlock(launch: &Launch) -> Result<HelperError, HelperError> {
    common(launch)?;
    drop_capabilities()?;
    nix::sys::prctl::set_no_new_privs().map_err(|error| fail("set no_new_privs", error))?;
    let enforced = ruleset::restrict(launch).map_err(|error| HelperError(error.to_string()))?;
    let options = seccomp::FilterOptions { network: launch.network, keep_in_group: launch.cgroup.is_none() };
    let programs = seccomp::programs(options).map_err(|error| HelperError(error.to_string()))?;
    seccomp::apply(&programs).map_err(|error| HelperError(error.to_string()))?;
    if launch.report {
        report(&format!("landlock abi={} tcp_rules={}", enforced.abi, enforced.tcp_rules))?;
    }
    let error = command_of(launch).exec();
    Ok(fail("execute the command", error))
}

fn bubblewrap(launch: &Launch) -> Result<HelperError, HelperError> {
    common(launch)?;
    let program = launch.bwrap.clone().ok_or_else(|| HelperError("no bwrap program given".to_owned()))?;
    let options = seccomp::FilterOptions { network: launch.network, keep_in_group: false };
    let programs = seccomp::programs(options).map_err(|error| HelperError(error.to_string()))?;
    // bwrap reads each filter from a descriptor it inherits; the pipes hold them whole
    // (a few hundred bytes, far below the pipe buffer).
    let mut readers: Vec<OwnedFd> = Vec::new();
    for filter in &programs {
        let (reader, writer) = nix::unistd::pipe().map_err(|error| fail("create a pipe", error))?;
        let mut writer = std::fs::File::from(writer);
        writer.write_all(&seccomp::to_bytes(filter)).map_err(|error| fail("pass the seccomp filter", error))?;
        drop(writer);
        readers.push(reader);
    }
    let descriptors: Vec<i32> = readers.iter().map(AsRawFd::as_raw_fd).collect();
    let environment: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let caller = if nix::unistd::geteuid().is_root() { bubblewrap::Caller::Root } else { bubblewrap::Caller::User };
    let arguments = bubblewrap::arguments(launch, &environment, &descriptors, caller);
    if launch.report {
        report(&format!("bubblewrap program={}", program.display()))?;
    }
    let mut command = std::process::Command::new(&program);
    command.args(arguments);
    match launch.program.as_deref() {
        Some(words @ [_, ..]) => command.args(words),
        Some([]) | None => command.arg("/bin/sh").arg("-c").arg(&launch.command),
    };
    let error = command.exec();
    drop(readers);
    Ok(fail(&format!("execute {}", program.display()), error))
}

/// What the helper becomes: the program given, or `sh -c` of the command line.
fn command_of(launch: &Launch) -> std::process::Command {
    match launch.program.as_deref() {
        Some([program, arguments @ ..]) => {
            let mut command = std::process::Command::new(program);
            command.args(arguments);
            command
        }
        Some([]) | None => {
            let mut command = std::process::Command::new("/bin/sh");
            command.arg("-c").arg(&launch.command);
            command
        }
    }
}

/// One status line for a probe, written before the command's own output.
fn report(line: &str) -> Result<(), HelperError> {
    let mut output = std::io::stdout().lock();
    writeln!(output, "{line}").and_then(|()| output.flush()).map_err(|error| fail("report the sandbox status", error))
}
