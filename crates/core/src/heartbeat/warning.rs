//! Warnings about a sections-format HEARTBEAT.md: what was wrong, where, and whether it
//! cost the section its heartbeat.

use std::fmt;

/// One problem found while parsing, located by line (from 1) and section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatWarning {
    /// The line the problem is on: the offending field, or the section's heading.
    pub line: usize,
    /// The section's name, or `None` for problems outside any `## ` section.
    pub section: Option<String>,
    pub problem: HeartbeatProblem,
}

impl HeartbeatWarning {
    /// Whether the section was dropped because of this problem (otherwise it still runs).
    pub fn skips_section(&self) -> bool {
        self.problem.skips_section()
    }
}

impl fmt::Display for HeartbeatWarning {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.section {
            Some(section) => {
                write!(formatter, "HEARTBEAT.md line {}, section \"{section}\": {}", self.line, self.problem)
            }
            None => write!(formatter, "HEARTBEAT.md line {}: {}", self.line, self.problem),
        }
    }
}

/// What was wrong. Variants whose message starts with "skipped" drop the section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatProblem {
    /// A `##` heading with no title: there is nothing to name the job after.
    EmptyName,
    /// Another section with the same name (ignoring case) came first; the first one keeps
    /// the name whether or not it parsed, so a fix never silently swaps which one runs.
    DuplicateName {
        first_line: usize,
    },
    MissingCadence,
    InvalidCadence {
        value: String,
    },
    MissingPrompt,
    /// `Prompt:` present but nothing after it before the next heading.
    EmptyPrompt,
    /// A field given twice before the prompt; which one was meant is a guess.
    DuplicateField {
        field: String,
        first_line: usize,
    },
    /// A `Cadence:` line after `Prompt:`, which would otherwise be read as prompt text:
    /// fields in the wrong order, or several heartbeats under one `##` heading (for
    /// example one per `###` subheading).
    CadenceInPrompt,
    InvalidContext {
        value: String,
    },
    InvalidActiveHours {
        value: String,
    },
    /// A `Key:` line before the prompt whose key is not a known field (likely a typo).
    UnknownField {
        field: String,
    },
    /// A known field before the first `## ` heading or under a `# ` heading.
    FieldOutsideSection {
        field: String,
    },
    /// A code fence opened on this line never closes, so every heading after it is code.
    UnclosedCodeFence,
    /// An HTML comment opened on this line never closes, so the rest of the file is hidden.
    UnclosedComment,
}

impl HeartbeatProblem {
    /// Whether this problem drops the section it is in.
    pub fn skips_section(&self) -> bool {
        match self {
            Self::EmptyName
            | Self::DuplicateName { .. }
            | Self::MissingCadence
            | Self::InvalidCadence { .. }
            | Self::MissingPrompt
            | Self::EmptyPrompt
            | Self::DuplicateField { .. }
            | Self::CadenceInPrompt
            | Self::InvalidContext { .. }
            | Self::InvalidActiveHours { .. } => true,
            Self::UnknownField { .. }
            | Self::FieldOutsideSection { .. }
            | Self::UnclosedCodeFence
            | Self::UnclosedComment => false,
        }
    }
}

impl fmt::Display for HeartbeatProblem {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyName => formatter.write_str("skipped: the `##` heading has no name"),
            Self::DuplicateName { first_line } => {
                write!(formatter, "skipped: a section with this name already starts at line {first_line}")
            }
            Self::MissingCadence => formatter.write_str("skipped: no `Cadence:` field"),
            Self::InvalidCadence { value } => {
                write!(formatter, "skipped: cadence \"{value}\" is not one of hourly, daily, weekly, biweekly, monthly")
            }
            Self::MissingPrompt => formatter.write_str("skipped: no `Prompt:` field"),
            Self::EmptyPrompt => formatter.write_str("skipped: the prompt is empty"),
            Self::DuplicateField { field, first_line } => {
                write!(formatter, "skipped: `{field}:` is given again (first at line {first_line})")
            }
            Self::CadenceInPrompt => formatter.write_str(
                "skipped: a `Cadence:` line follows `Prompt:` and would be read as prompt text; \
                 put fields above `Prompt:` and give each heartbeat its own `## ` heading",
            ),
            Self::InvalidContext { value } => {
                write!(formatter, "skipped: context \"{value}\" is not one of session, isolated, silent")
            }
            Self::InvalidActiveHours { value } => {
                write!(formatter, "skipped: active hours \"{value}\" are not a window like 09:00-22:00")
            }
            Self::UnknownField { field } => write!(formatter, "ignored unknown field `{field}:`"),
            Self::FieldOutsideSection { field } => {
                write!(formatter, "ignored `{field}:` outside any `## ` section")
            }
            Self::UnclosedCodeFence => {
                formatter.write_str("a code fence opened here never closes; everything after it is read as code")
            }
            Self::UnclosedComment => {
                formatter.write_str("an HTML comment opened here never closes; everything after it is ignored")
            }
        }
    }
}
