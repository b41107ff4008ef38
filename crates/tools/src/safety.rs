//! The command safety policy `exec` applies before running anything: splits a command
//! line into simple commands (aware of quotes, operators, substitutions and wrappers)
//! and refuses destructive, privilege-raising, network and environment-dumping ones.
//! Defense in depth, not a sandbox: it stops accidents and naive attempts.

mod command_word;
mod rules;
mod shell;
#[cfg(test)]
mod tests;

use regex::Regex;

use command_word::{Head, Nested, basename, head, nested};
use rules::Location;

/// How deep `sh -c '…'` and friends are followed before giving up (and refusing).
const MAX_NESTING: usize = 8;

/// Why a command was refused: the rule's trigger and its reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("command refused by safety policy: `{matched}` ({reason})")]
pub struct Refusal {
    /// What triggered the rule (`sudo`, `rm -rf /`, a configured pattern).
    pub matched: String,
    /// The rule's reason (`privilege escalation`).
    pub reason: String,
}

/// A policy that can't be built from its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A `tools.exec.blocked_patterns` entry is not a valid regular expression.
    #[error("can't use blocked pattern `{pattern}`: {reason}")]
    InvalidPattern {
        /// The pattern as configured.
        pattern: String,
        /// The regex parser's complaint.
        reason: String,
    },
}

/// The built-in rules plus configured extra patterns.
#[derive(Debug, Clone)]
pub struct CommandPolicy {
    extra_patterns: Vec<Regex>,
    function_definition: Regex,
}

impl CommandPolicy {
    /// The built-in rules plus `blocked_patterns` (regexes matched against the whole
    /// command line and against each simple command in it).
    pub fn new(blocked_patterns: &[String]) -> Result<Self, PolicyError> {
        let extra_patterns = blocked_patterns
            .iter()
            .map(|pattern| {
                Regex::new(pattern).map_err(|error| PolicyError::InvalidPattern {
                    pattern: pattern.clone(),
                    reason: error.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let function_definition = Regex::new(rules::FUNCTION_DEFINITION).map_err(|error| {
            PolicyError::InvalidPattern { pattern: rules::FUNCTION_DEFINITION.to_owned(), reason: error.to_string() }
        })?;
        Ok(Self { extra_patterns, function_definition })
    }

    /// Refuses `command` when any rule matches it or any command inside it.
    pub fn check(&self, command: &str) -> Result<(), Refusal> {
        self.check_line(command, 0)
    }

    fn check_line(&self, line: &str, depth: usize) -> Result<(), Refusal> {
        if depth > MAX_NESTING {
            return Err(Refusal { matched: "sh -c".to_owned(), reason: "nested too deeply to check".to_owned() });
        }
        self.check_extra_patterns(line)?;
        rules::fork_bomb(line, &self.function_definition)?;
        let commands = shell::split(line);
        rules::download_into_shell(&commands)?;
        let mut location = Location::Elsewhere;
        for command in &commands {
            self.check_extra_patterns(&command.words.join(" "))?;
            rules::raw_disk_targets(&command.output_targets)?;
            rules::environment_files(&command.words)?;
            self.check_words(&command.words, &command.heredocs, &mut location, depth)?;
        }
        Ok(())
    }

    fn check_words(
        &self,
        words: &[String],
        here_documents: &[String],
        location: &mut Location,
        depth: usize,
    ) -> Result<(), Refusal> {
        let index = match head(words) {
            Head::Nothing => return Ok(()),
            Head::EnvironmentDump(wrapper) => {
                return Err(Refusal { matched: wrapper, reason: "environment dump".to_owned() });
            }
            Head::Command(index) => index,
        };
        let name = basename(&words[index]);
        let arguments = &words[index + 1..];
        rules::check_command(&name, arguments, location)?;
        for code in nested(&name, arguments) {
            match code {
                Nested::Script(script) => self.check_line(&script, depth + 1)?,
                Nested::Words(inner) => {
                    self.check_extra_patterns(&inner.join(" "))?;
                    rules::environment_files(inner)?;
                    self.check_words(inner, &[], &mut Location::Elsewhere, depth + 1)?;
                }
                Nested::StandardInput => {
                    for body in here_documents {
                        self.check_line(body, depth + 1)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn check_extra_patterns(&self, text: &str) -> Result<(), Refusal> {
        match self.extra_patterns.iter().find(|pattern| pattern.is_match(text)) {
            Some(pattern) => {
                Err(Refusal { matched: pattern.as_str().to_owned(), reason: "matches a blocked pattern".to_owned() })
            }
            None => Ok(()),
        }
    }
}
