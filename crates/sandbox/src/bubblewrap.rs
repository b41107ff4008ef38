//! The bubblewrap backend's command line: a fresh mount namespace holding only the
//! granted paths (hidden ones masked), private PID, IPC, UTS and network namespaces, a
//! private /tmp, a cleared environment and the seccomp filter.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::grants::{canonical, strictly_below};
use crate::launch::Launch;

/// Where `bwrap` is looked for.
pub const SEARCH_PATH: [&str; 3] = ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// The installed `bwrap`, if any.
pub fn find() -> Option<PathBuf> {
    SEARCH_PATH.iter().map(PathBuf::from).find(|path| path.is_file())
}

/// One step of building the sandbox's file tree.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mount {
    /// The host path, read-only, at the same place.
    ReadOnly(PathBuf),
    /// The host path, writable, at the same place.
    ReadWrite(PathBuf),
    /// An empty read-only directory over a hidden directory.
    MaskDirectory(PathBuf),
    /// An empty file over a hidden file.
    MaskFile(PathBuf),
    /// A private, writable, empty directory.
    Tmpfs(PathBuf),
    /// A fresh procfs for the PID namespace.
    Proc,
    /// A minimal /dev (null, zero, random, urandom, tty, pts, shm).
    Dev,
}

impl Mount {
    fn target(&self) -> &Path {
        match self {
            Self::ReadOnly(path)
            | Self::ReadWrite(path)
            | Self::MaskDirectory(path)
            | Self::MaskFile(path)
            | Self::Tmpfs(path) => path,
            Self::Proc => Path::new("/proc"),
            Self::Dev => Path::new("/dev"),
        }
    }

    /// Masks go after the mounts of their parents and before those of their children.
    fn is_mask(&self) -> bool {
        matches!(self, Self::MaskDirectory(_) | Self::MaskFile(_))
    }
}

/// The mounts for `launch`, ordered so that each path is mounted after its parents.
fn mounts(launch: &Launch) -> Vec<Mount> {
    let mut mounts = vec![Mount::Proc, Mount::Dev, Mount::Tmpfs(PathBuf::from("/tmp"))];
    let managed = |path: &Path| path.starts_with("/proc") || path.starts_with("/dev");
    let hidden = canonical(&launch.hidden);
    let mut roots = Vec::new();
    for path in &launch.read_only {
        let resolved = path.canonicalize().unwrap_or_else(|_| path.clone());
        // Hiding a read-only path outright wins over granting it.
        if !managed(path) && path.exists() && !hidden.contains(&resolved) {
            mounts.push(Mount::ReadOnly(path.clone()));
            roots.push(resolved);
        }
    }
    let mut writable = launch.read_write.clone();
    writable.push(launch.workspace.clone());
    for path in writable {
        if !managed(&path) && path.exists() {
            roots.push(path.canonicalize().unwrap_or_else(|_| path.clone()));
            mounts.push(Mount::ReadWrite(path));
        }
    }
    for secret in hidden {
        // Only what a bind makes visible needs masking; anything else does not exist
        // in the sandbox at all.
        if !roots.iter().any(|root| strictly_below(&secret, root)) {
            continue;
        }
        match std::fs::symlink_metadata(&secret) {
            Ok(metadata) if metadata.is_dir() => mounts.push(Mount::MaskDirectory(secret)),
            Ok(_) => mounts.push(Mount::MaskFile(secret)),
            Err(_) => {}
        }
    }
    mounts.sort_by_key(|mount| (mount.target().components().count(), mount.is_mask()));
    mounts
}

/// Who runs `bwrap`: root keeps every capability inside unless told to drop them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// Effective user id 0.
    Root,
    /// Anyone else (bwrap drops capabilities by itself).
    User,
}

/// `bwrap` arguments up to and including `--`; the command follows.
pub fn arguments(
    launch: &Launch,
    environment: &[(OsString, OsString)],
    seccomp_fds: &[i32],
    caller: Caller,
) -> Vec<OsString> {
    let mut arguments: Vec<OsString> = Vec::new();
    let mut push = |items: &[&dyn AsRef<std::ffi::OsStr>]| {
        arguments.extend(items.iter().map(|item| item.as_ref().to_os_string()));
    };
    push(&[&"--unshare-all", &"--die-with-parent", &"--new-session"]);
    if launch.network {
        push(&[&"--share-net"]);
    }
    match caller {
        Caller::Root => push(&[&"--cap-drop", &"ALL"]),
        Caller::User => {}
    }
    push(&[&"--clearenv"]);
    for (name, value) in environment {
        if name != "TMPDIR" {
            push(&[&"--setenv", name, value]);
        }
    }
    push(&[&"--setenv", &"TMPDIR", &"/tmp"]);
    let mut read_only_masks = Vec::new();
    for mount in mounts(launch) {
        match mount {
            Mount::ReadOnly(path) => push(&[&"--ro-bind", &path, &path]),
            Mount::ReadWrite(path) => push(&[&"--bind", &path, &path]),
            Mount::MaskDirectory(path) => {
                push(&[&"--tmpfs", &path]);
                read_only_masks.push(path);
            }
            Mount::MaskFile(path) => push(&[&"--ro-bind", &"/dev/null", &path]),
            Mount::Tmpfs(path) => push(&[&"--tmpfs", &path]),
            Mount::Proc => push(&[&"--proc", &"/proc"]),
            Mount::Dev => push(&[&"--dev", &"/dev"]),
        }
    }
    // The skeleton bwrap builds to hold the mounts (parents of bound paths) is a
    // writable tmpfs until remounted: writes outside the grants must fail, not vanish.
    push(&[&"--remount-ro", &"/"]);
    for path in read_only_masks {
        push(&[&"--remount-ro", &path]);
    }
    for descriptor in seccomp_fds {
        push(&[&"--add-seccomp-fd", &descriptor.to_string()]);
    }
    push(&[&"--chdir", &launch.workspace, &"--"]);
    arguments
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::{Confiner, Limits};

    fn launch(workspace: PathBuf, hidden: Vec<PathBuf>) -> Launch {
        Launch {
            confiner: Confiner::Bubblewrap,
            command: "true".to_owned(),
            program: None,
            workspace,
            read_only: vec![PathBuf::from("/usr"), PathBuf::from("/etc"), PathBuf::from("/dev/null")],
            read_write: Vec::new(),
            hidden,
            private_tmp: None,
            network: false,
            limits: Limits { cpu_secs: 1, data_bytes: 1, file_bytes: 1, processes: None },
            cgroup: None,
            bwrap: None,
            report: false,
            rules: None,
        }
    }

    #[test]
    fn masks_follow_their_parents_and_precede_the_workspace() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let workspace = home.join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let launch = launch(workspace.clone(), vec![home.clone(), PathBuf::from("/etc/shadow")]);
        let mounts = mounts(&launch);
        let position = |wanted: &Mount| mounts.iter().position(|mount| mount == wanted);
        let etc = position(&Mount::ReadOnly(PathBuf::from("/etc"))).unwrap();
        let shadow = position(&Mount::MaskFile(PathBuf::from("/etc/shadow"))).unwrap();
        let tmp = position(&Mount::Tmpfs(PathBuf::from("/tmp"))).unwrap();
        let bound = position(&Mount::ReadWrite(workspace)).unwrap();
        assert!(etc < shadow && tmp < bound, "{mounts:?}");
        // The home directory is not under any bound root: nothing to mask.
        assert!(!mounts.contains(&Mount::MaskDirectory(home)), "{mounts:?}");
        assert!(!mounts.iter().any(|mount| mount.target() == Path::new("/dev/null")), "{mounts:?}");
    }

    #[test]
    fn network_and_root_change_the_namespaces_and_capabilities() {
        let workspace = tempfile::tempdir().unwrap();
        let mut launch = launch(workspace.path().to_path_buf(), Vec::new());
        let isolated = arguments(&launch, &[], &[3], Caller::User);
        assert!(!isolated.contains(&OsString::from("--share-net")));
        assert!(!isolated.contains(&OsString::from("--cap-drop")));
        assert!(isolated.windows(2).any(|pair| pair == [OsString::from("--add-seccomp-fd"), OsString::from("3")]));
        assert_eq!(isolated.last(), Some(&OsString::from("--")));
        launch.network = true;
        let networked = arguments(&launch, &[(OsString::from("LANG"), OsString::from("C"))], &[], Caller::Root);
        assert!(networked.contains(&OsString::from("--share-net")));
        assert!(networked.contains(&OsString::from("--cap-drop")));
        assert!(networked.windows(3).any(|triple| triple == ["--setenv", "LANG", "C"].map(OsString::from)));
    }
}
