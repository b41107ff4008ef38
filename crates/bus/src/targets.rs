//! Target names: the configured roles, `user`, aliases, and the rules every name follows
//! (which also make it safe as a trigger file name).

use std::collections::{BTreeMap, BTreeSet};

use crate::message::USER;

/// The roles every installation knows, whether or not `[agents.*]` mentions them.
pub const BUILTIN_ROLES: [&str; 6] = ["assistant", "worker", "researcher", "coder", "memory", "heartbeat"];

/// Aliases every installation knows: OpenClaw's name for the assistant.
pub const BUILTIN_ALIASES: [(&str, &str); 1] = [("main", "assistant")];

/// Longest target name.
pub const MAX_NAME_CHARS: usize = 64;

/// Why a role or alias can't be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectoryError {
    /// The name breaks the naming rule.
    #[error("can't use {name:?} as a bus target: {reason}")]
    BadName {
        /// The name as given.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// An alias points at nothing known.
    #[error("can't use the bus alias {alias:?}: it points at {target:?}, which is no role")]
    DanglingAlias {
        /// The alias.
        alias: String,
        /// What it points at.
        target: String,
    },
    /// An alias would hide a role of the same name.
    #[error("can't use the bus alias {alias:?}: a role has that name")]
    AliasShadowsRole {
        /// The alias.
        alias: String,
    },
}

/// Lower-cases and trims `name` and checks the naming rule: 1 to 64 characters of
/// `a-z`, `0-9`, `-` and `_`, starting with a letter or digit. Names that pass are safe
/// as file names (no separators, no `.`/`..`).
pub fn normalize(name: &str) -> Result<String, DirectoryError> {
    let name = name.trim().to_ascii_lowercase();
    let bad = |reason| DirectoryError::BadName { name: name.clone(), reason };
    if name.is_empty() {
        return Err(bad("the name is empty"));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(bad("names are at most 64 characters"));
    }
    if !name
        .chars()
        .all(|character| character.is_ascii_lowercase() || character.is_ascii_digit() || "-_".contains(character))
    {
        return Err(bad("names use only letters, digits, '-' and '_'"));
    }
    if name.starts_with(['-', '_']) {
        return Err(bad("names start with a letter or digit"));
    }
    Ok(name)
}

/// The configured part of the target space: roles, `user` and aliases. Running agents
/// with names of their own (workers) join it while their routes are registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directory {
    roles: BTreeSet<String>,
    aliases: BTreeMap<String, String>,
}

impl Default for Directory {
    fn default() -> Self {
        match Directory::new(std::iter::empty::<&str>(), std::iter::empty::<(&str, &str)>()) {
            Ok(directory) => directory,
            // The built-in names pass every check; this arm is never taken.
            Err(_) => Directory { roles: BTreeSet::new(), aliases: BTreeMap::new() },
        }
    }
}

impl Directory {
    /// The built-in roles plus `roles` (the keys of `[agents.*]`), the built-in aliases
    /// plus `aliases` (`[bus.aliases]`, e.g. legacy `devops = "worker"`). Aliases may
    /// point at a role or `user`, not at another alias.
    pub fn new<Role: AsRef<str>, Name: AsRef<str>>(
        roles: impl IntoIterator<Item = Role>,
        aliases: impl IntoIterator<Item = (Name, Name)>,
    ) -> Result<Self, DirectoryError> {
        let mut known: BTreeSet<String> = BUILTIN_ROLES.iter().map(|role| (*role).to_owned()).collect();
        for role in roles {
            known.insert(normalize(role.as_ref())?);
        }
        let mut map = BTreeMap::new();
        let configured: Vec<(String, String)> = BUILTIN_ALIASES
            .iter()
            .map(|(alias, target)| ((*alias).to_owned(), (*target).to_owned()))
            .chain(aliases.into_iter().map(|(alias, target)| (alias.as_ref().to_owned(), target.as_ref().to_owned())))
            .collect();
        for (alias, target) in configured {
            let alias = normalize(&alias)?;
            let target = normalize(&target)?;
            if known.contains(&alias) || alias == USER {
                return Err(DirectoryError::AliasShadowsRole { alias });
            }
            if !known.contains(&target) && target != USER {
                return Err(DirectoryError::DanglingAlias { alias, target });
            }
            map.insert(alias, target);
        }
        Ok(Self { roles: known, aliases: map })
    }

    /// The canonical name `name` stands for among roles, `user` and aliases.
    pub fn canonical(&self, name: &str) -> Option<String> {
        let name = normalize(name).ok()?;
        if let Some(target) = self.aliases.get(&name) {
            return Some(target.clone());
        }
        (self.roles.contains(&name) || name == USER).then_some(name)
    }

    /// True when `name` (already normalized) is a role.
    pub fn is_role(&self, name: &str) -> bool {
        self.roles.contains(name)
    }

    /// The roles, sorted.
    pub fn roles(&self) -> impl Iterator<Item = &str> {
        self.roles.iter().map(String::as_str)
    }

    /// The aliases and what they stand for.
    pub fn aliases(&self) -> impl Iterator<Item = (&str, &str)> {
        self.aliases.iter().map(|(alias, target)| (alias.as_str(), target.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_user_and_aliases_resolve() {
        let directory = Directory::new(["Reviewer"], [("devops", "worker"), ("analyst", "researcher")]).unwrap();
        assert_eq!(directory.canonical("assistant").as_deref(), Some("assistant"));
        assert_eq!(directory.canonical(" MAIN ").as_deref(), Some("assistant"));
        assert_eq!(directory.canonical("devops").as_deref(), Some("worker"));
        assert_eq!(directory.canonical("analyst").as_deref(), Some("researcher"));
        assert_eq!(directory.canonical("reviewer").as_deref(), Some("reviewer"));
        assert_eq!(directory.canonical("user").as_deref(), Some("user"));
        assert_eq!(directory.canonical("heartbeat").as_deref(), Some("heartbeat"));
        assert_eq!(directory.canonical("nobody"), None);
        assert_eq!(directory.canonical("../assistant"), None);
        assert_eq!(directory.canonical(""), None);
        assert!(directory.roles().any(|role| role == "reviewer"));
    }

    #[test]
    fn bad_configuration_is_refused() {
        assert!(matches!(
            Directory::new(std::iter::empty::<&str>(), [("ops", "nobody")]),
            Err(DirectoryError::DanglingAlias { .. })
        ));
        assert!(matches!(
            Directory::new(std::iter::empty::<&str>(), [("coder", "worker")]),
            Err(DirectoryError::AliasShadowsRole { .. })
        ));
        assert!(matches!(
            Directory::new(["a/b"], std::iter::empty::<(&str, &str)>()),
            Err(DirectoryError::BadName { .. })
        ));
        let error = Directory::new(["a b"], std::iter::empty::<(&str, &str)>()).unwrap_err();
        assert!(error.to_string().starts_with("can't use \"a b\" as a bus target"), "{error}");
    }

    #[test]
    fn names_that_pass_are_safe_file_names() {
        for bad in ["", ".", "..", "a/b", "a\\b", "-x", "_x", "a.txt", "x\0", "é", &"x".repeat(65)] {
            assert!(normalize(bad).is_err(), "{bad:?}");
        }
        assert_eq!(normalize("Builder-BG_1").unwrap(), "builder-bg_1");
    }
}
