//! The filtered environment commands run with: a few safe variables plus configured
//! names, never anything that looks like a credential by its name or carries a known
//! secret in its value; then the variables of the skills the turn uses.

use std::ffi::OsString;

use squidbot_core::leaks::LeakScanner;
use squidbot_core::skill_use::SkillVariable;

/// Variables always passed through when set.
pub const SAFE_NAMES: [&str; 7] = ["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER"];

/// `PATH` given to commands when the gateway itself has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Name fragments that mark a variable as a credential; such variables are never passed.
pub const SECRET_MARKERS: [&str; 6] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// True when `name` looks like it holds a credential.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_uppercase();
    SECRET_MARKERS.iter().any(|marker| upper.contains(marker))
}

/// The names passed to commands: [`SAFE_NAMES`] plus `pass_env`, minus (with a warning)
/// any configured name that looks like a credential.
pub fn passed_names(pass_env: &[String]) -> Vec<String> {
    let mut names: Vec<String> = SAFE_NAMES.iter().map(|name| (*name).to_owned()).collect();
    for name in pass_env {
        if looks_secret(name) {
            tracing::warn!(
                variable = %name,
                "not passing tools.exec.pass_env entry to commands: its name looks like a credential"
            );
        } else if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

/// Current values of `names` (unset ones left out, and any whose value carries a secret
/// `withheld` knows, whatever its name), with [`DEFAULT_PATH`] when `PATH` is unset.
pub fn values(names: &[String], withheld: &LeakScanner) -> Vec<(String, OsString)> {
    let set = names.iter().filter_map(|name| std::env::var_os(name).map(|value| (name.clone(), value)));
    let mut values = withhold(set, withheld);
    if !values.iter().any(|(name, _)| name == "PATH") {
        values.push(("PATH".to_owned(), OsString::from(DEFAULT_PATH)));
    }
    values
}

/// `values` minus (with a warning naming it) every variable whose value carries a secret
/// `withheld` knows.
fn withhold(values: impl Iterator<Item = (String, OsString)>, withheld: &LeakScanner) -> Vec<(String, OsString)> {
    values
        .filter(|(name, value)| {
            let carries_secret = !withheld.scan(&value.to_string_lossy()).is_empty();
            if carries_secret {
                tracing::warn!(variable = %name, "not passing a variable to commands: its value carries a secret");
            }
            !carries_secret
        })
        .collect()
}

/// `values` with the variables of the skills in use added (after the filtering: they are
/// secrets on purpose), each replacing a variable of the same name.
pub fn with_skill_variables(
    mut values: Vec<(String, OsString)>,
    variables: Vec<SkillVariable>,
) -> Vec<(String, OsString)> {
    for variable in variables {
        values.retain(|(name, _)| *name != variable.name);
        values.push((variable.name, OsString::from(variable.value.expose())));
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_never_passed() {
        let names = passed_names(&[
            "CARGO_HOME".to_owned(),
            "OPENAI_API_KEY".to_owned(),
            "GITHUB_TOKEN".to_owned(),
            "db_password".to_owned(),
        ]);
        assert!(names.contains(&"CARGO_HOME".to_owned()));
        assert!(!names.iter().any(|name| looks_secret(name)));
    }

    #[test]
    fn path_always_has_a_value() {
        let values = values(&["SQUIDBOT_SURELY_UNSET_VARIABLE".to_owned()], &LeakScanner::default());
        assert!(values.iter().any(|(name, _)| name == "PATH"));
    }

    #[test]
    fn a_harmless_name_carrying_a_secret_value_is_not_passed() {
        // The gateway was started with `MY_NOTE=<vault value>` and passes `MY_NOTE` on.
        let vault_value = "correct-horse-battery-staple";
        let set = [
            ("MY_NOTE", vault_value.to_owned()),
            ("WRAPPED", format!("note: {vault_value}.")),
            ("LANG", "C.UTF-8".to_owned()),
        ]
        .map(|(name, value)| (name.to_owned(), OsString::from(value)));
        let withheld = LeakScanner::new([vault_value.to_owned()]);
        let passed = withhold(set.clone().into_iter(), &withheld);
        assert_eq!(passed, [("LANG".to_owned(), OsString::from("C.UTF-8"))]);
        assert_eq!(withhold(set.into_iter(), &LeakScanner::default()).len(), 3, "nothing known, nothing withheld");
    }

    #[test]
    fn skill_variables_come_after_the_filter_and_win_a_name_clash() {
        let variable = |name: &str, value: &str| SkillVariable {
            skill: "github".into(),
            name: name.into(),
            value: squidbot_types::Secret::new(value),
        };
        let base = vec![("PATH".to_owned(), OsString::from("/bin")), ("GH_TOKEN".to_owned(), OsString::from("old"))];
        let environment = with_skill_variables(base, vec![variable("GH_TOKEN", "ghp_new_value")]);
        assert_eq!(
            environment,
            [("PATH".to_owned(), OsString::from("/bin")), ("GH_TOKEN".to_owned(), OsString::from("ghp_new_value"))]
        );
    }
}
