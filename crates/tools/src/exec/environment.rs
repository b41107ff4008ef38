//! The filtered environment commands run with: a few safe variables plus configured
//! names, never anything that looks like a credential.

use std::ffi::OsString;

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

/// Current values of `names` (unset ones left out), with [`DEFAULT_PATH`] when `PATH` is unset.
pub fn values(names: &[String]) -> Vec<(String, OsString)> {
    let mut values: Vec<(String, OsString)> =
        names.iter().filter_map(|name| std::env::var_os(name).map(|value| (name.clone(), value))).collect();
    if !values.iter().any(|(name, _)| name == "PATH") {
        values.push(("PATH".to_owned(), OsString::from(DEFAULT_PATH)));
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
        let values = values(&["SQUIDBOT_SURELY_UNSET_VARIABLE".to_owned()]);
        assert!(values.iter().any(|(name, _)| name == "PATH"));
    }
}
