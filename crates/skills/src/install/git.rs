//! Cloning a skill repository with the `git` binary: shallow, non-interactive, with
//! the `ext::` transport and hooks disabled and a timeout after which git is killed.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::CloneError;

/// Default time a clone may take.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// Git's error output kept for the message.
const STDERR_CAP: u64 = 16 * 1024;

/// True for scp-like addresses such as `git@host:owner/repo.git`.
pub(super) fn is_scp_like(source: &str) -> bool {
    let Some((user_host, path)) = source.split_once(':') else { return false };
    let Some((user, host)) = user_host.split_once('@') else { return false };
    let word = |text: &str| {
        !text.is_empty() && text.chars().all(|character| character.is_ascii_alphanumeric() || "._-".contains(character))
    };
    word(user) && word(host) && !path.is_empty() && !path.starts_with('-')
}

/// The arguments of `git` for a clone of `url` into `into`: shallow, quiet, no tags,
/// no hard links into the source, `ext::` refused (it runs arbitrary commands) and no
/// hooks (a user's `core.hooksPath` must not run on a stranger's checkout).
pub(super) fn clone_arguments(url: &str, into: &Path) -> Vec<OsString> {
    let mut arguments: Vec<OsString> = [
        "-c",
        "protocol.ext.allow=never",
        "-c",
        "core.hooksPath=/dev/null",
        "clone",
        "--depth",
        "1",
        "--quiet",
        "--no-tags",
        "--no-hardlinks",
        "--",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    arguments.push(OsString::from(url));
    arguments.push(into.as_os_str().to_owned());
    arguments
}

/// Trims git's error output into one line: why the clone failed.
pub(super) fn summarize(status: impl std::fmt::Display, message: &str) -> CloneError {
    let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    CloneError::Failed(if message.is_empty() { format!("git clone failed ({status})") } else { message })
}

/// `git clone --depth 1 <url> <into>` on the host; the error is git's own message or the timeout.
pub(super) fn clone(url: &str, into: &Path, timeout: Duration) -> Result<(), CloneError> {
    let mut child = Command::new("git")
        .args(clone_arguments(url, into))
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => CloneError::NoGit,
            _ => CloneError::CannotRun(error.to_string()),
        })?;
    // Read stderr on a thread so a chatty git never blocks on a full pipe.
    let stderr = child.stderr.take().map(|stderr| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Err(error) = stderr.take(STDERR_CAP).read_to_string(&mut text) {
                tracing::debug!(%error, "can't read git's error output");
            }
            text
        })
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() >= timeout => {
                if let Err(error) = child.kill() {
                    tracing::warn!(%error, "can't kill a git clone that timed out");
                }
                if let Err(error) = child.wait() {
                    tracing::warn!(%error, "can't reap a git clone that timed out");
                }
                break Err(CloneError::TimedOut { seconds: timeout.as_secs() });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(error) => break Err(CloneError::CannotRun(format!("can't wait for it: {error}"))),
        }
    };
    // After a timeout the reader is left behind: a helper git started may still hold
    // the pipe open, and joining would wait for it.
    let status = status?;
    let message = stderr.and_then(|thread| thread.join().ok()).unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    Err(summarize(status, &message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scp_like_addresses_are_recognized() {
        assert!(is_scp_like("git@example.invalid:owner/repo.git"));
        assert!(!is_scp_like("./local/path"));
        assert!(!is_scp_like("git@host:-upload-pack=x"));
        assert!(!is_scp_like("a b@host:x"));
    }
}
