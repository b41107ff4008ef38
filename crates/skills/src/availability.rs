//! Whether the host meets a skill's requirements: executables on `PATH` (looked up
//! without spawning anything), environment variables set, a supported OS.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;

use serde::Serialize;

use crate::manifest::Requirements;

/// What the requirement checks ask of the host.
pub trait Host: Send + Sync {
    /// True when an executable file called `name` is in a `PATH` directory.
    fn has_bin(&self, name: &str) -> bool;
    /// True when the environment variable is set and not empty.
    fn has_env(&self, name: &str) -> bool;
    /// The OS name as skills write it (`linux`, `darwin`, `win32`).
    fn os(&self) -> &str;
}

/// The real machine, read at each call so a tool installed while running counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemHost;

impl Host for SystemHost {
    fn has_bin(&self, name: &str) -> bool {
        std::env::var_os("PATH").is_some_and(|path| bin_on_path(name, &path))
    }

    fn has_env(&self, name: &str) -> bool {
        !name.is_empty() && !name.contains(['=', '\0']) && std::env::var_os(name).is_some_and(|value| !value.is_empty())
    }

    fn os(&self) -> &str {
        match std::env::consts::OS {
            "macos" => "darwin",
            "windows" => "win32",
            other => other,
        }
    }
}

/// True when `name` is an executable regular file in one of the `path` directories.
/// A name with a path separator is never looked up: requirements name commands.
pub fn bin_on_path(name: &str, path: &OsString) -> bool {
    if name.is_empty() || name.contains(['/', '\\', '\0']) || name == "." || name == ".." {
        return false;
    }
    std::env::split_paths(path).filter(|directory| !directory.as_os_str().is_empty()).any(|directory| {
        let candidate = directory.join(name);
        is_executable(&candidate) || (cfg!(windows) && is_executable(&candidate.with_extension("exe")))
    })
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|metadata| metadata.is_file())
}

/// The requirements a skill is missing; empty when it is available.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Missing {
    /// Required executables not on `PATH`.
    pub bins: Vec<String>,
    /// Alternatives of which none is on `PATH` (empty when one is, or none was asked).
    pub any_bins: Vec<String>,
    /// Required environment variables that are unset or empty.
    pub env: Vec<String>,
    /// This host's OS when the skill lists others only.
    pub os: Option<String>,
}

impl Missing {
    /// True when nothing is missing.
    pub fn is_empty(&self) -> bool {
        self.bins.is_empty() && self.any_bins.is_empty() && self.env.is_empty() && self.os.is_none()
    }

    /// One line for people and the model: `bins: gh; env: GH_TOKEN`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.bins.is_empty() {
            parts.push(format!("bins: {}", self.bins.join(", ")));
        }
        if !self.any_bins.is_empty() {
            parts.push(format!("one of the bins: {}", self.any_bins.join(", ")));
        }
        if !self.env.is_empty() {
            parts.push(format!("env: {}", self.env.join(", ")));
        }
        if let Some(os) = &self.os {
            parts.push(format!("does not support this OS ({os})"));
        }
        parts.join("; ")
    }
}

/// Checks requirements against a host, remembering each executable's answer for the
/// checker's lifetime (one discovery), since many skills ask for the same few.
pub struct Checker<'a> {
    host: &'a dyn Host,
    bins: HashMap<String, bool>,
}

impl<'a> Checker<'a> {
    /// A checker for one pass over the skills.
    pub fn new(host: &'a dyn Host) -> Self {
        Self { host, bins: HashMap::new() }
    }

    fn has_bin(&mut self, name: &str) -> bool {
        if let Some(found) = self.bins.get(name) {
            return *found;
        }
        let found = self.host.has_bin(name);
        self.bins.insert(name.to_owned(), found);
        found
    }

    /// What of `requirements` this host lacks.
    pub fn missing(&mut self, requirements: &Requirements) -> Missing {
        let bins = requirements.bins.iter().filter(|bin| !self.has_bin(bin)).cloned().collect();
        let any_bins = if requirements.any_bins.is_empty() || requirements.any_bins.iter().any(|bin| self.has_bin(bin))
        {
            Vec::new()
        } else {
            requirements.any_bins.clone()
        };
        let env = requirements.env.iter().filter(|name| !self.host.has_env(name)).cloned().collect();
        let os = self.host.os();
        let supported = requirements.os.is_empty()
            || requirements.os.iter().any(|listed| listed == os || (os == "darwin" && listed == "macos"));
        Missing { bins, any_bins, env, os: (!supported).then(|| os.to_owned()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct FakeHost;

    impl Host for FakeHost {
        fn has_bin(&self, name: &str) -> bool {
            name == "git"
        }
        fn has_env(&self, name: &str) -> bool {
            name == "HOME"
        }
        fn os(&self) -> &str {
            "linux"
        }
    }

    #[test]
    fn missing_lists_exactly_what_is_absent() {
        let requirements = Requirements {
            bins: vec!["git".into(), "gh".into()],
            any_bins: vec!["rg".into(), "ag".into()],
            env: vec!["HOME".into(), "GH_TOKEN".into()],
            os: vec!["darwin".into()],
        };
        let missing = Checker::new(&FakeHost).missing(&requirements);
        assert_eq!(missing.bins, ["gh"]);
        assert_eq!(missing.any_bins, ["rg", "ag"]);
        assert_eq!(missing.env, ["GH_TOKEN"]);
        assert_eq!(missing.os.as_deref(), Some("linux"));
        assert_eq!(
            missing.describe(),
            "bins: gh; one of the bins: rg, ag; env: GH_TOKEN; does not support this OS (linux)"
        );
        let met =
            Requirements { any_bins: vec!["ag".into(), "git".into()], os: vec!["linux".into()], ..Default::default() };
        assert!(Checker::new(&FakeHost).missing(&met).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn path_lookup_needs_an_executable_file_and_refuses_paths() {
        use std::os::unix::fs::PermissionsExt;
        let directory = tempfile::tempdir().unwrap();
        let tool = directory.path().join("mytool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let path = OsString::from(directory.path());
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(!bin_on_path("mytool", &path), "not executable");
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(bin_on_path("mytool", &path));
        std::fs::create_dir(directory.path().join("adir")).unwrap();
        assert!(!bin_on_path("adir", &path), "a directory is not a command");
        assert!(!bin_on_path(&tool.display().to_string(), &path), "paths are not looked up");
        assert!(!bin_on_path("../mytool", &path));
        assert!(!bin_on_path("", &path));
    }
}
