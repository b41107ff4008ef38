//! Process-count groups: one `pids` cgroup per command, so a fork bomb hits its own
//! limit (`RLIMIT_NPROC` counts every process of the user, and root is exempt from it)
//! and every process of a command can be killed, however it detached.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Cgroup file listing member processes.
const PROCESSES_FILE: &str = "cgroup.procs";

/// Names of this process's groups are unique per process.
static NEXT_GROUP: AtomicU64 = AtomicU64::new(0);

/// Which cgroup interface the hierarchy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// The unified hierarchy (`cgroup2`), with `cgroup.kill`.
    V2,
    /// A legacy `pids` hierarchy.
    V1,
}

/// The directory under which this process can create `pids` groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidsHierarchy {
    /// This process's own cgroup in a hierarchy with the `pids` controller.
    pub parent: PathBuf,
    /// Its interface.
    pub version: CgroupVersion,
}

impl PidsHierarchy {
    /// Finds a `pids` hierarchy this process can create groups in, and proves it by
    /// creating and removing one.
    pub fn discover() -> Result<Self, String> {
        let memberships = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|error| format!("can't read /proc/self/cgroup: {error}"))?;
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|error| format!("can't read /proc/self/mountinfo: {error}"))?;
        let mut reasons = Vec::new();
        for candidate in candidates(&memberships, &mounts) {
            match candidate.try_group() {
                Ok(()) => return Ok(candidate),
                Err(reason) => reasons.push(reason),
            }
        }
        if reasons.is_empty() {
            reasons.push("no cgroup hierarchy with the pids controller is mounted".to_owned());
        }
        Err(reasons.join("; "))
    }

    /// Creates a group allowing `max_processes` processes.
    pub fn create(&self, max_processes: u32) -> Result<CgroupLease, String> {
        let name = format!("squidbot-sandbox-{}-{}", std::process::id(), NEXT_GROUP.fetch_add(1, Ordering::Relaxed));
        let directory = self.parent.join(name);
        std::fs::create_dir(&directory)
            .map_err(|error| format!("can't create cgroup {}: {error}", directory.display()))?;
        let lease = CgroupLease { directory, version: self.version };
        let limit = lease.directory.join("pids.max");
        if !limit.exists() {
            return Err(format!("{} has no pids controller enabled for its children", self.parent.display()));
        }
        std::fs::write(&limit, max_processes.to_string())
            .map_err(|error| format!("can't write {}: {error}", limit.display()))?;
        Ok(lease)
    }

    fn try_group(&self) -> Result<(), String> {
        let lease = self.create(1)?;
        lease.remove()
    }
}

/// `pids` hierarchies this process belongs to, unified first.
fn candidates(memberships: &str, mounts: &str) -> Vec<PidsHierarchy> {
    let mut found = Vec::new();
    for version in [CgroupVersion::V2, CgroupVersion::V1] {
        let membership = memberships.lines().find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            let wanted = match version {
                CgroupVersion::V2 => controllers.is_empty(),
                CgroupVersion::V1 => controllers.split(',').any(|controller| controller == "pids"),
            };
            wanted.then(|| path.to_owned())
        });
        let Some(membership) = membership else {
            continue;
        };
        for line in mounts.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let (Some(root), Some(mount_point), Some(kind)) = (left.get(3), left.get(4), right.first()) else {
                continue;
            };
            let matches = match version {
                CgroupVersion::V2 => *kind == "cgroup2",
                CgroupVersion::V1 => {
                    *kind == "cgroup" && right.get(2).is_some_and(|options| options.split(',').any(|o| o == "pids"))
                }
            };
            // Escaped names (spaces and the like) are not worth decoding here.
            if !matches || mount_point.contains('\\') {
                continue;
            }
            let Some(relative) = membership.strip_prefix(root.trim_end_matches('/')) else {
                continue;
            };
            let parent = Path::new(mount_point).join(relative.trim_start_matches('/'));
            if version == CgroupVersion::V2 {
                let controls = std::fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
                if !controls.split_whitespace().any(|controller| controller == "pids") {
                    continue;
                }
            }
            found.push(PidsHierarchy { parent, version });
        }
    }
    found
}

/// One command's group; dropping it kills what is left inside and removes it.
#[derive(Debug)]
pub struct CgroupLease {
    directory: PathBuf,
    version: CgroupVersion,
}

impl CgroupLease {
    /// The group's directory (the helper joins it by writing to `cgroup.procs`).
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    /// Kills every process in the group.
    pub fn kill_all(&self) {
        if self.version == CgroupVersion::V2 && std::fs::write(self.directory.join("cgroup.kill"), "1").is_ok() {
            return;
        }
        // Without cgroup.kill, members are killed one by one until none is left; new
        // ones forked meanwhile are bounded by pids.max.
        for _ in 0..100 {
            let members = match std::fs::read_to_string(self.directory.join(PROCESSES_FILE)) {
                Ok(members) => members,
                Err(_) => return,
            };
            let pids: Vec<i32> = members.lines().filter_map(|line| line.trim().parse().ok()).collect();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                if let Err(error) = kill(Pid::from_raw(pid), Signal::SIGKILL) {
                    tracing::debug!(pid, %error, "can't kill sandboxed process");
                }
            }
        }
    }

    /// Removes the (empty) group, waiting briefly for killed members to finish exiting.
    fn remove(&self) -> Result<(), String> {
        let mut last = None;
        for attempt in 0..20u32 {
            match std::fs::remove_dir(&self.directory) {
                Ok(()) => return Ok(()),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(error) => last = Some(error),
            }
            std::thread::sleep(Duration::from_millis(u64::from(attempt.min(10)) + 1));
        }
        let reason = last.map(|error| error.to_string()).unwrap_or_default();
        Err(format!("can't remove cgroup {}: {reason}", self.directory.display()))
    }
}

impl Drop for CgroupLease {
    fn drop(&mut self) {
        self.kill_all();
        match std::fs::remove_dir(&self.directory) {
            Ok(()) => return,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => {}
        }
        // Killed members may take a moment to exit; don't hold up the caller for it.
        let leftover = CgroupLease { directory: std::mem::take(&mut self.directory), version: self.version };
        let spawned = std::thread::Builder::new().name("cgroup-cleanup".to_owned()).spawn(move || {
            leftover.kill_all();
            if let Err(reason) = leftover.remove() {
                tracing::warn!(%reason, "leaving a sandbox cgroup behind");
            }
            std::mem::forget(leftover);
        });
        if let Err(error) = spawned {
            tracing::warn!(%error, "can't start cgroup cleanup");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw";

    #[test]
    fn legacy_pids_hierarchy_is_found_under_our_own_group() {
        let memberships = "8:pids:/work/job\n4:memory:/other\n0::/\n";
        let found = candidates(memberships, MOUNTS);
        let legacy: Vec<_> = found.iter().filter(|candidate| candidate.version == CgroupVersion::V1).collect();
        assert_eq!(legacy.len(), 1);
        assert_eq!(legacy[0].parent, PathBuf::from("/sys/fs/cgroup/pids/work/job"));
    }

    #[test]
    fn nothing_is_found_without_a_pids_mount() {
        assert!(candidates("4:memory:/\n", "35 31 0:32 / /m rw - cgroup cgroup rw,memory").is_empty());
    }
}
