//! What the gateway and `squidbot skills list --json` show of a skill: plain data, so the
//! server can list skills without knowing how they are found.

use std::path::PathBuf;

use serde::Serialize;

/// One skill as listed. Fields are declared in name order, the order the JSON has always
/// had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillSummary {
    /// Put in full into every prompt (`always: true`), not only listed.
    pub always: bool,
    /// True when nothing it requires is missing.
    pub available: bool,
    /// What it is for, from SKILL.md.
    pub description: String,
    /// Its SKILL.md.
    pub file: PathBuf,
    /// Its directory.
    pub location: PathBuf,
    /// What the host lacks of its requirements; all empty when it is available.
    pub missing: SkillMissing,
    /// Its name.
    pub name: String,
    /// Sources of skills of the same name it takes precedence over (`bundled`, `user`, …).
    pub overrides: Vec<String>,
    /// What it needs from the host.
    pub requires: SkillRequirements,
    /// Where it came from: `bundled`, `extra`, `user`, `group` or `workspace`.
    pub source: String,
}

/// A skill's requirements the host does not meet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SkillMissing {
    /// Alternatives of which none is on `PATH` (empty when one is, or none was asked).
    pub any_bins: Vec<String>,
    /// Required executables not on `PATH`.
    pub bins: Vec<String>,
    /// Required environment variables that are unset or empty.
    pub env: Vec<String>,
    /// This host's OS when the skill lists others only.
    pub os: Option<String>,
}

/// What a skill needs from the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SkillRequirements {
    /// Executables of which at least one must be on `PATH`.
    pub any_bins: Vec<String>,
    /// Executables that must all be on `PATH`.
    pub bins: Vec<String>,
    /// Environment variables that must all be set and non-empty.
    pub env: Vec<String>,
    /// Operating systems it supports (`linux`, `darwin`, `win32`); empty means any.
    pub os: Vec<String>,
}
