//! `addons` in `SKILL.md`: `env` names the environment variables the skill's commands get
//! while it is in use, each valued from the vault secret of the same name; other keys
//! (`packages`) are kept as written.

use serde_json::Value;

use crate::problem::ProblemKind;

/// Longest variable name: a vault secret's name may not be longer.
pub const MAX_VARIABLE_CHARS: usize = 64;

/// Variables no skill may set: they change how the shell, the dynamic loader or an
/// interpreter behaves, where a command finds its programs, or who it thinks it is.
pub const RESERVED_VARIABLES: [&str; 20] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "PWD",
    "OLDPWD",
    "IFS",
    "ENV",
    "BASH_ENV",
    "CDPATH",
    "PS4",
    "PROMPT_COMMAND",
    "TMPDIR",
    "LANG",
    "TERM",
    "TZ",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "NODE_OPTIONS",
];

/// Prefixes of variables no skill may set (the loaders', locales', squidbot's own).
pub const RESERVED_PREFIXES: [&str; 5] = ["LD_", "DYLD_", "LC_", "SQUIDBOT_", "BASH_FUNC_"];

/// Checks a variable name of `addons.env`: `[A-Z_][A-Z0-9_]*`, at most 64 characters, not
/// one of the [`RESERVED_VARIABLES`] nor starting with one of the [`RESERVED_PREFIXES`].
pub fn validate_variable(name: &str) -> Result<(), &'static str> {
    let mut characters = name.chars();
    let Some(first) = characters.next() else { return Err("it is empty") };
    if !(first.is_ascii_uppercase() || first == '_')
        || !characters.all(|character| character.is_ascii_uppercase() || character.is_ascii_digit() || character == '_')
    {
        return Err("only uppercase letters, digits and `_` are allowed, and it must not start with a digit");
    }
    if name.len() > MAX_VARIABLE_CHARS {
        return Err("it is longer than 64 characters");
    }
    if RESERVED_VARIABLES.contains(&name) || RESERVED_PREFIXES.iter().any(|prefix| name.starts_with(prefix)) {
        return Err("it changes how commands run and is never set by a skill");
    }
    Ok(())
}

/// The variables of `addons.env`, checked, in order and without repeats.
pub fn read_env(addons: Option<&Value>) -> Result<Vec<String>, ProblemKind> {
    let env = match addons {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(map)) => map.get("env"),
        Some(_) => return Err(ProblemKind::InvalidAddons("`addons` must be a table (with an `env` list)".into())),
    };
    let items = match env {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(ProblemKind::InvalidAddons("`addons.env` must be a list of environment variable names".into()));
        }
    };
    let mut names: Vec<String> = Vec::new();
    for item in items {
        let Some(name) = item.as_str().map(str::trim) else {
            return Err(ProblemKind::InvalidAddons("`addons.env` must be a list of environment variable names".into()));
        };
        validate_variable(name)
            .map_err(|reason| ProblemKind::InvalidAddons(format!("`addons.env` entry {name:?}: {reason}")))?;
        if !names.iter().any(|known| known == name) {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn variable_names_are_uppercase_and_harmless() {
        for good in ["GH_TOKEN", "_PRIVATE", "API2_KEY", &"A".repeat(64)] {
            assert_eq!(validate_variable(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "gh_token",
            "2FA",
            "GH-TOKEN",
            "GH TOKEN",
            "É",
            "PATH",
            "HOME",
            "LD_PRELOAD",
            "DYLD_X",
            "LC_ALL",
            "SQUIDBOT_HOME",
            "BASH_ENV",
            "IFS",
        ] {
            assert!(validate_variable(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(validate_variable(&"A".repeat(65)).is_err());
    }

    #[test]
    fn env_is_read_from_the_addons_table() {
        assert_eq!(read_env(None), Ok(Vec::new()));
        assert_eq!(read_env(Some(&json!({"packages": [{"name": "gh"}]}))), Ok(Vec::new()));
        assert_eq!(
            read_env(Some(&json!({"env": ["GH_TOKEN", " GH_HOST ", "GH_TOKEN"]}))),
            Ok(vec!["GH_TOKEN".to_owned(), "GH_HOST".to_owned()])
        );
    }

    #[test]
    fn a_bad_addons_entry_is_a_problem_naming_it() {
        let problem = |value: Value| read_env(Some(&value)).unwrap_err().to_string();
        assert_eq!(
            problem(json!({"env": ["LD_PRELOAD"]})),
            "invalid addons: `addons.env` entry \"LD_PRELOAD\": it changes how commands run and is never set by a skill"
        );
        assert!(problem(json!({"env": ["gh_token"]})).contains("only uppercase letters"));
        assert!(problem(json!({"env": "GH_TOKEN"})).contains("must be a list"));
        assert!(problem(json!({"env": [1]})).contains("must be a list"));
        assert!(problem(json!(["GH_TOKEN"])).contains("must be a table"));
    }
}
