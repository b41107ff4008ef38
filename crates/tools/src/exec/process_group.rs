//! Killing a command's whole process group, so children it started (`sleep 30 &`) die
//! with it on timeout, cancellation, or when the call is dropped.

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Sends SIGKILL to process group `group`; a group that is already gone is fine.
pub(crate) fn kill_group(group: u32) {
    let Ok(raw) = i32::try_from(group) else {
        return;
    };
    match killpg(Pid::from_raw(raw), Signal::SIGKILL) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(error) => tracing::warn!(group, %error, "can't kill process group"),
    }
}

/// Kills the process group when dropped, unless disarmed: covers the call future being
/// dropped half-way (the turn aborted) as well as early returns.
#[derive(Debug)]
pub(crate) struct GroupGuard {
    group: Option<u32>,
}

impl GroupGuard {
    /// Guards process group `group` (the leader's pid when spawned with `process_group(0)`).
    pub(crate) fn new(group: Option<u32>) -> Self {
        Self { group }
    }

    /// Kills the group now.
    pub(crate) fn kill(&mut self) {
        if let Some(group) = self.group.take() {
            kill_group(group);
        }
    }

    /// Leaves the group alone from now on.
    pub(crate) fn disarm(&mut self) {
        self.group = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
