//! Trigger files: the fallback path when no live route takes a message. Each target has
//! `<triggers>/<target>.txt` holding one JSON message per line.
//!
//! Writers append a whole line with one `O_APPEND` write and fsync it. A reader claims the
//! file by renaming it to `<target>.processing` (so writers start a fresh `.txt`), delivers
//! the lines, moves malformed ones to `<target>.bad`, and removes the claimed file only
//! when every line is delivered or quarantined; lines it could not deliver stay in it for
//! the next poll. A writer that finds its file renamed away after writing appends the
//! line again to the new file, and readers skip message ids they already delivered, so a
//! rename racing a write neither loses nor doubles a message.
//!
//! A `.txt` whose last line has no newline yet and was modified within
//! [`WRITE_GRACE`] is left alone: someone is still writing it. After that the unfinished
//! line counts as malformed.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::envelope::Priority;
use crate::message::BusMessage;
use crate::targets::normalize;

/// How long a trigger file whose last line is unfinished is left to its writer.
pub const WRITE_GRACE: Duration = Duration::from_secs(3);

/// Suffix of pending messages.
const PENDING: &str = "txt";
/// Suffix of a file a reader has claimed.
const CLAIMED: &str = "processing";
/// Suffix of quarantined lines.
const QUARANTINE: &str = "bad";

/// Why a trigger file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    /// The target name is not a safe file name.
    #[error("can't use {0:?} as a trigger file name")]
    BadTarget(String),
    /// Reading or writing failed.
    #[error("can't {action} {path}: {source}")]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> TriggerError + 'a {
    move |source| TriggerError::Io { action, path: path.to_path_buf(), source }
}

/// A line as read back: only `from` and `body` are required, so people can append lines
/// by hand; the reader fills in the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerLine {
    /// Message id; a fresh one when missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The sender's id.
    pub from: String,
    /// The sender's role; `from` when missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The target (the file name decides; kept for people reading the file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The sender's sequence number; the reader numbers lines without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The tag; `normal` when missing.
    #[serde(default)]
    pub priority: Priority,
    /// The text.
    pub body: String,
    /// The correlation id; a fresh one when missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// When it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<jiff::Timestamp>,
    /// The sender's conversation (see [`BusMessage::session`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl From<&BusMessage> for TriggerLine {
    fn from(message: &BusMessage) -> Self {
        Self {
            id: Some(message.id.clone()),
            from: message.from.clone(),
            role: Some(message.role.clone()),
            target: Some(message.target.clone()),
            seq: Some(message.seq),
            priority: message.priority,
            body: message.body.clone(),
            correlation_id: Some(message.correlation_id.clone()),
            time: Some(message.time),
            session: message.session.clone(),
        }
    }
}

/// One line of a claimed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedLine {
    /// The line as written (without its newline).
    pub raw: String,
    /// What it says.
    pub line: TriggerLine,
}

/// What a reader took from a target's trigger files.
#[derive(Debug, Default)]
pub struct Claim {
    /// The claimed file, `None` when there was nothing to claim.
    file: Option<PathBuf>,
    /// Lines to deliver, oldest first.
    pub lines: Vec<ClaimedLine>,
    /// Lines moved to `<target>.bad` while claiming.
    pub quarantined: usize,
    /// True when the pending file was left to a writer that is still writing.
    pub writer_busy: bool,
}

/// The trigger directory.
#[derive(Debug, Clone)]
pub struct TriggerFiles {
    directory: PathBuf,
}

impl TriggerFiles {
    /// Trigger files under `directory` (`$SQUIDBOT_HOME/triggers`), created on first write.
    pub fn new(directory: impl Into<PathBuf>) -> Self {
        Self { directory: directory.into() }
    }

    /// The directory.
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    fn path(&self, target: &str, suffix: &str) -> Result<PathBuf, TriggerError> {
        let name = normalize(target).map_err(|_| TriggerError::BadTarget(target.to_owned()))?;
        Ok(self.directory.join(format!("{name}.{suffix}")))
    }

    /// `<target>.txt`.
    pub fn pending_file(&self, target: &str) -> Result<PathBuf, TriggerError> {
        self.path(target, PENDING)
    }

    /// `<target>.bad`.
    pub fn quarantine_file(&self, target: &str) -> Result<PathBuf, TriggerError> {
        self.path(target, QUARANTINE)
    }

    fn create_directory(&self) -> Result<(), TriggerError> {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&self.directory).map_err(io("create the trigger directory", &self.directory))
    }

    /// Appends `message` to its target's file and syncs it to disk; returns the file.
    pub fn append(&self, message: &BusMessage) -> Result<PathBuf, TriggerError> {
        let path = self.pending_file(&message.target)?;
        let mut line = serde_json::to_string(&TriggerLine::from(message)).map_err(|error| TriggerError::Io {
            action: "encode a message for",
            path: path.clone(),
            source: std::io::Error::other(error),
        })?;
        line.push('\n');
        self.create_directory()?;
        // A reader may claim (rename) the file between our open and write; then the line
        // went into the claimed file, possibly after the reader read it. Writing it again
        // to the new file is safe: readers skip ids they already delivered.
        for _ in 0..3 {
            let file = append_line(&path, line.as_bytes())?;
            if still_at(&file, &path) {
                return Ok(path);
            }
        }
        Ok(path)
    }

    /// Appends a line that can't be delivered to `<target>.bad`, so nothing is lost silently.
    pub fn quarantine(&self, target: &str, raw: &str, reason: &str) -> Result<PathBuf, TriggerError> {
        let path = self.quarantine_file(target)?;
        tracing::warn!(target_name = target, file = %path.display(), reason, "moved a malformed trigger line aside");
        self.create_directory()?;
        let mut line = raw.trim_end_matches(['\n', '\r']).to_owned();
        line.push('\n');
        append_line(&path, line.as_bytes())?;
        Ok(path)
    }

    /// Claims what is waiting for `target`: a file left from an earlier claim first, else
    /// the pending file (unless a writer is still writing its last line; `now` decides).
    /// Lines that are not JSON messages go to `<target>.bad` right away.
    pub fn claim(&self, target: &str, now: SystemTime) -> Result<Claim, TriggerError> {
        let claimed = self.path(target, CLAIMED)?;
        let pending = self.pending_file(target)?;
        if !claimed.exists() {
            let Some(text) = read_if_exists(&pending)? else { return Ok(Claim::default()) };
            if text.is_empty() {
                return Ok(Claim::default());
            }
            if !text.ends_with('\n') && recently_modified(&pending, now) {
                return Ok(Claim { writer_busy: true, ..Claim::default() });
            }
            fs::rename(&pending, &claimed).map_err(io("claim", &pending))?;
        }
        let text = read_if_exists(&claimed)?.unwrap_or_default();
        let mut claim = Claim { file: Some(claimed), ..Claim::default() };
        for raw in text.split('\n').map(|line| line.trim_end_matches('\r')) {
            if raw.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<TriggerLine>(raw) {
                Ok(line) => claim.lines.push(ClaimedLine { raw: raw.to_owned(), line }),
                Err(error) => {
                    self.quarantine(target, raw, &format!("not a JSON message: {error}"))?;
                    claim.quarantined += 1;
                }
            }
        }
        Ok(claim)
    }

    /// Ends a claim: removes the claimed file when `left` is empty, else keeps exactly the
    /// `left` lines in it (replaced atomically) for the next poll.
    pub fn finish(&self, claim: Claim, left: &[ClaimedLine]) -> Result<(), TriggerError> {
        let Some(file) = claim.file else { return Ok(()) };
        if left.is_empty() {
            return match fs::remove_file(&file) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(io("remove", &file)(error)),
                _ => Ok(()),
            };
        }
        let mut text = String::new();
        for line in left {
            text.push_str(&line.raw);
            text.push('\n');
        }
        let temporary = file.with_extension("processing.tmp");
        let mut writer = File::create(&temporary).map_err(io("write", &temporary))?;
        writer.write_all(text.as_bytes()).map_err(io("write", &temporary))?;
        writer.sync_data().map_err(io("sync", &temporary))?;
        fs::rename(&temporary, &file).map_err(io("replace", &file))
    }

    /// Targets with messages waiting (pending or claimed files), sorted.
    pub fn waiting_targets(&self) -> Result<Vec<String>, TriggerError> {
        let entries = match fs::read_dir(&self.directory) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io("list", &self.directory)(error)),
        };
        let mut targets = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let waiting = matches!(path.extension().and_then(|suffix| suffix.to_str()), Some(PENDING | CLAIMED));
            let non_empty = entry.metadata().is_ok_and(|metadata| metadata.len() > 0);
            if let Some(stem) = path.file_stem().and_then(|stem| stem.to_str())
                && waiting
                && non_empty
                && let Ok(name) = normalize(stem)
            {
                targets.push(name);
            }
        }
        targets.sort();
        targets.dedup();
        Ok(targets)
    }
}

/// Appends `bytes` in one write and syncs; returns the open file.
fn append_line(path: &Path, bytes: &[u8]) -> Result<File, TriggerError> {
    let mut options = OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(io("open", path))?;
    file.write_all(bytes).map_err(io("append to", path))?;
    file.sync_data().map_err(io("sync", path))?;
    Ok(file)
}

/// True when `path` still names the open `file`.
fn still_at(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), fs::metadata(path)) {
            (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        true
    }
}

fn read_if_exists(path: &Path) -> Result<Option<String>, TriggerError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io("read", path)(error)),
    }
}

fn recently_modified(path: &Path, now: SystemTime) -> bool {
    match fs::metadata(path).and_then(|metadata| metadata.modified()) {
        Ok(modified) => now.duration_since(modified).map_or(true, |age| age < WRITE_GRACE),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests;
