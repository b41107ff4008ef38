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
    /// The rule itself.
    pub rule: Rule,
}

impl Refusal {
    /// A refusal by `rule`, triggered by `matched`.
    pub fn new(matched: impl Into<String>, rule: Rule) -> Self {
        Self { matched: matched.into(), reason: rule.reason().to_owned(), rule }
    }
}

/// The rules of the policy. A sandbox that makes a rule pointless (commands that can't
/// see the gateway's environment may dump their own) lets [`CommandPolicy::check_allowing`]
/// skip it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `sudo`, `su`, `chown` and friends.
    PrivilegeEscalation,
    /// `docker`, `podman` and other container CLIs.
    ContainerCli,
    /// `curl`, `wget`, `ssh` and other network clients.
    NetworkTool,
    /// `printenv`, bare `env`, `export -p`, `/proc/*/environ`.
    EnvironmentDump,
    /// `shutdown`, `reboot`, `systemctl poweroff`.
    SystemShutdown,
    /// `mkfs`, `mkswap`, `wipefs`.
    DiskFormat,
    /// `fdisk`, `parted`.
    DiskPartitioning,
    /// Recursive deletion of the root, a top-level directory or the home directory.
    DestructiveDelete,
    /// Writing to a disk device.
    RawDiskWrite,
    /// `chmod +s`.
    SetuidBit,
    /// `del /f`.
    ForcedDelete,
    /// `rmdir /s`.
    RecursiveDelete,
    /// A function piping itself into itself.
    ForkBomb,
    /// `curl … | sh`.
    DownloadIntoShell,
    /// A `tools.exec.blocked_patterns` entry.
    BlockedPattern,
    /// `sh -c` nested past what the checker follows.
    NestedTooDeeply,
}

impl Rule {
    /// The reason shown to the model.
    pub fn reason(self) -> &'static str {
        match self {
            Self::PrivilegeEscalation => "privilege escalation",
            Self::ContainerCli => "container CLI",
            Self::NetworkTool => "network tool",
            Self::EnvironmentDump => "environment dump",
            Self::SystemShutdown => "system shutdown",
            Self::DiskFormat => "disk format",
            Self::DiskPartitioning => "disk partitioning",
            Self::DestructiveDelete => "destructive delete",
            Self::RawDiskWrite => "raw disk write",
            Self::SetuidBit => "setuid bit",
            Self::ForcedDelete => "forced delete",
            Self::RecursiveDelete => "recursive delete",
            Self::ForkBomb => "fork bomb",
            Self::DownloadIntoShell => "download piped to a shell",
            Self::BlockedPattern => "matches a blocked pattern",
            Self::NestedTooDeeply => "nested too deeply to check",
        }
    }
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
        self.check_allowing(command, &[])
    }

    /// Like [`CommandPolicy::check`], but the rules in `allowed` never refuse; every
    /// other rule is still checked everywhere in the line.
    pub fn check_allowing(&self, command: &str, allowed: &[Rule]) -> Result<(), Refusal> {
        Checker { policy: self, allowed }.line(command, 0)
    }
}

/// One check of one command line against a policy, minus the allowed rules.
struct Checker<'a> {
    policy: &'a CommandPolicy,
    allowed: &'a [Rule],
}

impl Checker<'_> {
    /// Passes a refusal by an allowed rule.
    fn gate(&self, outcome: Result<(), Refusal>) -> Result<(), Refusal> {
        match outcome {
            Err(refusal) if self.allowed.contains(&refusal.rule) => Ok(()),
            other => other,
        }
    }

    fn line(&self, line: &str, depth: usize) -> Result<(), Refusal> {
        if depth > MAX_NESTING {
            return Err(Refusal::new("sh -c", Rule::NestedTooDeeply));
        }
        self.extra_patterns(line)?;
        self.gate(rules::fork_bomb(line, &self.policy.function_definition))?;
        let commands = shell::split(line);
        self.gate(rules::download_into_shell(&commands))?;
        let mut location = Location::Elsewhere;
        for command in &commands {
            self.extra_patterns(&command.words.join(" "))?;
            self.gate(rules::raw_disk_targets(&command.output_targets))?;
            self.gate(rules::environment_files(&command.words))?;
            // `tr '\0' '\n' < /proc/1/environ` reads it as surely as `cat` does.
            self.gate(rules::environment_files(&command.input_sources))?;
            self.words(&command.words, &command.heredocs, &mut location, depth)?;
        }
        Ok(())
    }

    fn words(
        &self,
        words: &[String],
        here_documents: &[String],
        location: &mut Location,
        depth: usize,
    ) -> Result<(), Refusal> {
        let index = match head(words) {
            Head::Nothing => return Ok(()),
            Head::EnvironmentDump(wrapper) => {
                return self.gate(Err(Refusal::new(wrapper, Rule::EnvironmentDump)));
            }
            Head::Command(index) => index,
        };
        let name = basename(&words[index]);
        let arguments = &words[index + 1..];
        self.gate(rules::check_command(&name, arguments, location))?;
        for code in nested(&name, arguments) {
            match code {
                Nested::Script(script) => self.line(&script, depth + 1)?,
                Nested::Words(inner) => {
                    self.extra_patterns(&inner.join(" "))?;
                    self.gate(rules::environment_files(inner))?;
                    self.words(inner, &[], &mut Location::Elsewhere, depth + 1)?;
                }
                Nested::StandardInput => {
                    for body in here_documents {
                        self.line(body, depth + 1)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Configured patterns are never allowed away.
    fn extra_patterns(&self, text: &str) -> Result<(), Refusal> {
        match self.policy.extra_patterns.iter().find(|pattern| pattern.is_match(text)) {
            Some(pattern) => Err(Refusal::new(pattern.as_str(), Rule::BlockedPattern)),
            None => Ok(()),
        }
    }
}
