//! Parsing HEARTBEAT.md (text in, data out, no IO) in its two formats, and the content
//! hash that tells the scheduler when a changed file must regenerate its heartbeat jobs.
//!
//! **Checklist format** (squidbot): the whole file is one standing prompt, run on every
//! heartbeat tick. A file that is *effectively empty* skips the tick, saving a model
//! call. Effectively empty means every line is one of: blank, an ATX heading (`#` …
//! `######`), inside an HTML comment block, an empty list item (`-`, `*`, `+`, optionally
//! with an unchecked or checked box `[ ]`/`[x]`), or a horizontal rule (`---`). Headings
//! and blank lines come from the design; the rest are there because a template file
//! ("add your checks below") is made of exactly those, and none of them asks for anything.
//! Code blocks count as content.
//!
//! **Sections format** (baaaht): each `## Name` heading starts one heartbeat, with
//! fields written `Key: value`, case-insensitive, optionally as a list item (`- `, `* `,
//! `+ `) and optionally bold (`**Cadence:**` or `**Cadence**:`):
//! - `Cadence:` (required): `hourly`, `daily`, `weekly`, `biweekly` (or `bi-weekly`),
//!   `monthly`; backticks, bold and a trailing full stop around the value are tolerated.
//! - `Prompt:` (required): the rest of that line plus every following line up to the next
//!   `#` or `##` heading, trimmed at both ends, with inner blank lines, list markers,
//!   `###` subheadings and code blocks kept as written.
//! - `Context:` (optional): `session`, `isolated` or `silent` (the job's context mode).
//! - `Active hours:` (optional, also `active_hours`): `HH:MM-HH:MM` in the owner's
//!   timezone, the per-heartbeat form of the design's active-hours window.
//!
//! Fields must come before `Prompt:`. Other text before it is a note and is ignored; an
//! unknown `Key:` there gets a warning (likely a typo) but the section still runs. A
//! section that cannot run (see [`HeartbeatProblem::skips_section`]) is dropped with a
//! warning per problem and the others still run. HTML comment blocks are ignored
//! everywhere, so commenting a section out switches it off. A file is in the sections
//! format as soon as any line outside code and comments is a `Cadence:` field; otherwise
//! it is a checklist. Setext headings (underlined with `===`/`---`) are not recognised.

mod fields;
mod jobs;
mod lines;
mod sections;
mod warning;

pub use crate::jobs::ContextMode;
pub use crate::schedule::Cadence;
pub use fields::{ActiveHours, context_mode};
pub use jobs::{
    HEARTBEAT_OK, HeartbeatDefaults, HeartbeatJobs, HeartbeatJobsError, heartbeat_jobs, heartbeat_task, is_heartbeat_ok,
};
pub use warning::{HeartbeatProblem, HeartbeatWarning};

/// Largest HEARTBEAT.md accepted. The file becomes a prompt on every tick, so anything
/// near this size is a mistake (a pasted log, a runaway agent edit) rather than a list of
/// checks, and refusing it bounds the work and the model bill.
pub const MAX_FILE_BYTES: usize = 256 * 1024;

/// Why a HEARTBEAT.md could not be parsed at all (problems with single sections are
/// [`HeartbeatWarning`]s instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeartbeatError {
    #[error("can't parse HEARTBEAT.md: it is {bytes} bytes, over the {limit}-byte limit")]
    TooLarge { bytes: usize, limit: usize },
}

/// The parsed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatFile {
    Checklist(Checklist),
    Sections(SectionsFile),
}

/// Which of the two formats a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeartbeatFormat {
    Checklist,
    Sections,
}

impl HeartbeatFile {
    pub fn format(&self) -> HeartbeatFormat {
        match self {
            Self::Checklist(_) => HeartbeatFormat::Checklist,
            Self::Sections(_) => HeartbeatFormat::Sections,
        }
    }

    /// Warnings to log; a checklist has none, since any text is a valid checklist.
    pub fn warnings(&self) -> &[HeartbeatWarning] {
        match self {
            Self::Checklist(_) => &[],
            Self::Sections(file) => &file.warnings,
        }
    }
}

/// A checklist-format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checklist {
    /// Nothing to ask: skip the tick without calling the model.
    Empty,
    /// The whole file (byte order mark removed, line endings normalised to `\n`,
    /// trimmed), to send as the heartbeat prompt.
    Prompt(String),
}

/// A sections-format file: the heartbeats that can run, and what was wrong with the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionsFile {
    /// In file order; names are unique ignoring case.
    pub sections: Vec<HeartbeatSection>,
    /// In line order.
    pub warnings: Vec<HeartbeatWarning>,
}

/// One heartbeat from a `## ` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatSection {
    /// The heading's text with whitespace runs collapsed; identifies the job.
    pub name: String,
    /// Line of the `## ` heading, from 1.
    pub line: usize,
    pub cadence: Cadence,
    /// Never empty.
    pub prompt: String,
    /// `None` leaves the choice to the scheduler's default.
    pub context: Option<ContextMode>,
    /// `None` means any time of day (or the configured default window).
    pub active_hours: Option<ActiveHours>,
}

/// Parses HEARTBEAT.md. Never panics on any text; the only error is a file over
/// [`MAX_FILE_BYTES`]. Non-UTF-8 bytes are the caller's to handle (lossily or by refusing).
pub fn parse(text: &str) -> Result<HeartbeatFile, HeartbeatError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(HeartbeatError::TooLarge { bytes: text.len(), limit: MAX_FILE_BYTES });
    }
    let text = strip_byte_order_mark(text);
    let lines = lines::classify(text);
    if sections::uses_sections(&lines) {
        return Ok(HeartbeatFile::Sections(sections::parse(&lines)));
    }
    if lines.lines.iter().all(says_nothing) {
        return Ok(HeartbeatFile::Checklist(Checklist::Empty));
    }
    Ok(HeartbeatFile::Checklist(Checklist::Prompt(text.replace("\r\n", "\n").trim().to_owned())))
}

fn says_nothing(line: &lines::Line<'_>) -> bool {
    match line.kind {
        lines::LineKind::Blank | lines::LineKind::Heading { .. } | lines::LineKind::Comment => true,
        lines::LineKind::Fenced => false,
        lines::LineKind::Text => is_empty_list_item_or_rule(line.text),
    }
}

fn is_empty_list_item_or_rule(text: &str) -> bool {
    let text = text.trim();
    let Some(rest) = text.strip_prefix(['-', '*', '+']) else {
        return crate::text::is_thematic_break(text);
    };
    matches!(rest.trim(), "" | "[]" | "[ ]" | "[x]" | "[X]") || crate::text::is_thematic_break(text)
}

fn strip_byte_order_mark(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// A stable fingerprint of the file, `fnv1a64:` and 16 hex digits, to store beside the
/// generated jobs and compare on the next read. Insensitive to what an editor changes
/// without changing content: a byte order mark, `\r\n` versus `\n`, and trailing
/// whitespace at the end of the file. FNV-1a is written out here because std's hasher
/// may change between releases, which would regenerate every job (re-rolling its jitter)
/// after an upgrade; collisions only matter against accidental edits, not adversaries.
pub fn content_hash(text: &str) -> String {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let bytes = strip_byte_order_mark(text).trim_end().as_bytes();
    let mut hash = OFFSET_BASIS;
    for (index, byte) in bytes.iter().enumerate() {
        if *byte == b'\r' && bytes.get(index + 1) == Some(&b'\n') {
            continue;
        }
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(PRIME);
    }
    format!("fnv1a64:{hash:016x}")
}

#[cfg(test)]
mod tests;
