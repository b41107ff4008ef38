//! The validator as a process of its own: `squidbot __skill-validate <directory>` runs
//! [`validate_skill_dir`] (inside the sandbox) and prints a bounded JSON verdict; the
//! installer reads it back strictly, treating anything unexpected as a refusal.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

use super::validate_skill_dir;
use crate::manifest::validate_name;
use crate::problem::{ProblemKind, SkillProblem};

/// The hidden subcommand the validator answers to.
pub const VALIDATE_SUBCOMMAND: &str = "__skill-validate";

/// Largest verdict the installer reads; a longer one is a refusal.
pub const MAX_VERDICT_BYTES: usize = 64 * 1024;

/// Most problems a verdict lists (the rest are counted), so it stays under the cap.
const MAX_REPORTED_PROBLEMS: usize = 50;

/// Longest text of one reported problem or description.
const MAX_FIELD_CHARS: usize = 1024;

/// Exit code of a validator that found the skill valid.
const EXIT_VALID: u8 = 0;

/// Exit code of a validator that found problems (its verdict lists them).
const EXIT_INVALID: u8 = 1;

/// What the validator prints: the skill's identity and size, or what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// The skill's name, when valid.
    pub name: Option<String>,
    /// Its description, when valid.
    pub description: Option<String>,
    /// Regular files found.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
    /// What is wrong; empty when valid.
    pub problems: Vec<ReportedProblem>,
}

/// One problem as the validator reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportedProblem {
    /// The file at fault.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: String,
}

/// A verdict the installer accepts as valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The skill's name (checked again here: it becomes a directory name).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Regular files.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
}

fn bounded(text: &str) -> String {
    text.chars().take(MAX_FIELD_CHARS).collect()
}

impl Verdict {
    /// The verdict on `directory`, computed in this process.
    pub fn of(directory: &Path) -> Self {
        match validate_skill_dir(directory) {
            Ok(valid) => Self {
                name: Some(valid.manifest.name),
                description: Some(bounded(&valid.manifest.description)),
                files: valid.files,
                bytes: valid.bytes,
                problems: Vec::new(),
            },
            Err(problems) => {
                let total = problems.len();
                let mut reported: Vec<ReportedProblem> = problems
                    .into_iter()
                    .take(MAX_REPORTED_PROBLEMS)
                    .map(|problem| ReportedProblem { path: problem.path, problem: bounded(&problem.kind.to_string()) })
                    .collect();
                if total > MAX_REPORTED_PROBLEMS {
                    reported.push(ReportedProblem {
                        path: directory.to_path_buf(),
                        problem: format!("and {} more problems", total - MAX_REPORTED_PROBLEMS),
                    });
                }
                Self { name: None, description: None, files: 0, bytes: 0, problems: reported }
            }
        }
    }

    /// Reads the validator's output: `exit_code` and `stdout` must agree on a well-formed
    /// verdict, or the skill is refused with the reason.
    pub fn read(exit_code: Option<i32>, stdout: &[u8], directory: &Path) -> Result<Accepted, Vec<SkillProblem>> {
        let refuse = |reason: String| vec![SkillProblem::new(directory, ProblemKind::Reported(reason))];
        if stdout.len() > MAX_VERDICT_BYTES {
            return Err(refuse(format!("the validator said more than {MAX_VERDICT_BYTES} bytes")));
        }
        let verdict: Verdict = match (exit_code, serde_json::from_slice(stdout)) {
            (Some(code), Ok(verdict)) if code == i32::from(EXIT_VALID) || code == i32::from(EXIT_INVALID) => verdict,
            (Some(code), _) => return Err(refuse(format!("the validator failed (exit code {code})"))),
            (None, _) => return Err(refuse("the validator was killed".to_owned())),
        };
        let valid_exit = exit_code == Some(i32::from(EXIT_VALID));
        match verdict {
            Verdict { name: Some(name), description: Some(description), files, bytes, problems }
                if problems.is_empty() && valid_exit =>
            {
                validate_name(&name).map_err(|reason| {
                    vec![SkillProblem::new(directory, ProblemKind::InvalidName { name: name.clone(), reason })]
                })?;
                Ok(Accepted { name, description, files, bytes })
            }
            Verdict { problems, .. } if !problems.is_empty() && !valid_exit => Err(problems
                .into_iter()
                .map(|reported| SkillProblem::new(reported.path, ProblemKind::Reported(reported.problem)))
                .collect()),
            Verdict { .. } => Err(refuse("the validator's verdict contradicts itself".to_owned())),
        }
    }
}

/// Runs the validator when the process was started as one (`argv[1]` is
/// [`VALIDATE_SUBCOMMAND`]); `None` otherwise. Call it first thing in `main`.
pub fn run_validator_if_requested() -> Option<ExitCode> {
    let mut arguments = std::env::args_os().skip(1);
    if arguments.next().as_deref() != Some(OsStr::new(VALIDATE_SUBCOMMAND)) {
        return None;
    }
    let (Some(directory), None) = (arguments.next(), arguments.next()) else {
        eprintln!("usage: squidbot {VALIDATE_SUBCOMMAND} <directory>");
        return Some(ExitCode::from(2));
    };
    let verdict = Verdict::of(Path::new(&directory));
    let code = if verdict.problems.is_empty() { EXIT_VALID } else { EXIT_INVALID };
    let written = serde_json::to_string(&verdict).map_err(std::io::Error::other).and_then(|text| {
        let mut output = std::io::stdout().lock();
        output.write_all(text.as_bytes()).and_then(|()| output.flush())
    });
    match written {
        Ok(()) => Some(ExitCode::from(code)),
        Err(error) => {
            eprintln!("can't write the verdict: {error}");
            Some(ExitCode::from(2))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory() -> PathBuf {
        PathBuf::from("/staging/clone")
    }

    fn valid_json() -> String {
        r#"{"name":"tidy","description":"Tidies.","files":2,"bytes":40,"problems":[]}"#.to_owned()
    }

    #[test]
    fn a_valid_verdict_is_accepted_only_with_exit_code_zero() {
        let accepted = Verdict::read(Some(0), valid_json().as_bytes(), &directory()).unwrap();
        assert_eq!(accepted.name, "tidy");
        assert!(Verdict::read(Some(1), valid_json().as_bytes(), &directory()).is_err());
    }

    #[test]
    fn garbage_oversize_crashes_and_bad_names_are_refused() {
        let cases: [(Option<i32>, String); 7] = [
            (Some(0), "not json".to_owned()),
            (Some(0), valid_json().replace("\"problems\"", "\"extra\":1,\"problems\"")),
            (Some(0), format!("{}{}", valid_json(), " ".repeat(MAX_VERDICT_BYTES))),
            (Some(101), valid_json()),
            (None, valid_json()),
            (Some(0), valid_json().replace("tidy", "../../escape")),
            (Some(0), r#"{"name":null,"description":null,"files":0,"bytes":0,"problems":[]}"#.to_owned()),
        ];
        for (code, stdout) in cases {
            let refused = Verdict::read(code, stdout.as_bytes(), &directory());
            assert!(refused.is_err(), "{code:?} {stdout:.80}");
        }
    }

    #[test]
    fn reported_problems_come_back_with_their_paths() {
        let stdout = r#"{"name":null,"description":null,"files":0,"bytes":0,"problems":[{"path":"/staging/clone/link","problem":"symbolic links are not allowed in a skill"}]}"#;
        let problems = Verdict::read(Some(1), stdout.as_bytes(), &directory()).unwrap_err();
        assert_eq!(problems[0].to_string(), "/staging/clone/link: symbolic links are not allowed in a skill");
    }
}
