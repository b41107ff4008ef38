//! `read_file`: a text file's lines, numbered like `cat -n`, a window at a time.

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::text::floor_char_boundary;
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::path_guard::PathGuard;
use crate::scan::{BINARY_SNIFF_BYTES, looks_binary};
use crate::{io_refusal, parse, schema};

/// Lines returned when the model gives no `limit`.
pub const DEFAULT_LINE_LIMIT: usize = 2000;
/// Characters of output at most; the note says how to read on.
pub const MAX_OUTPUT_CHARS: usize = 50_000;
/// Characters kept of a single very long line.
pub const MAX_LINE_CHARS: usize = 2000;

/// Read a text file; lines come numbered.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArguments {
    /// File path.
    pub path: String,
    /// First line to read, 1-based.
    pub offset: Option<usize>,
    /// Max lines (default 2000).
    pub limit: Option<usize>,
}

/// The `read_file` tool.
#[derive(Debug, Clone)]
pub struct ReadFileTool {
    guard: PathGuard,
}

impl ReadFileTool {
    /// A `read_file` tool resolving paths through `guard`.
    pub fn new(guard: PathGuard) -> Self {
        Self { guard }
    }

    async fn read(&self, arguments: ReadFileArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let shown = arguments.path.as_str();
        let path = self.guard.resolve_for_reading(shown, &context.workspace, "read")?;
        let metadata = tokio::fs::metadata(&path).await.map_err(|error| io_refusal("read", shown, &error))?;
        if metadata.is_dir() {
            return Err(ToolError::RespondToModel(format!("can't read {shown}: it is a directory; use list_dir")));
        }
        let mut file = tokio::fs::File::open(&path).await.map_err(|error| io_refusal("read", shown, &error))?;
        let mut prefix = Vec::with_capacity(BINARY_SNIFF_BYTES);
        (&mut file)
            .take(BINARY_SNIFF_BYTES as u64)
            .read_to_end(&mut prefix)
            .await
            .map_err(|error| io_refusal("read", shown, &error))?;
        if looks_binary(&prefix) {
            return Err(ToolError::RespondToModel(format!(
                "can't read {shown}: it is a binary file ({} bytes)",
                metadata.len()
            )));
        }
        let first_line = arguments.offset.unwrap_or(1).max(1);
        let limit = arguments.limit.unwrap_or(DEFAULT_LINE_LIMIT).max(1);
        let mut reader = BufReader::new(std::io::Cursor::new(prefix).chain(file));
        let mut output = String::new();
        let mut line = Vec::new();
        let mut line_number = 0;
        let mut shown_lines = 0;
        let mut stop = Stop::EndOfFile;
        loop {
            line.clear();
            let read = reader.read_until(b'\n', &mut line).await.map_err(|error| io_refusal("read", shown, &error))?;
            if read == 0 {
                break;
            }
            line_number += 1;
            if line_number < first_line {
                continue;
            }
            if shown_lines == limit {
                stop = Stop::LineLimit;
                break;
            }
            let entry = numbered_line(line_number, &line);
            if output.len() + entry.len() > MAX_OUTPUT_CHARS {
                stop = Stop::CharacterCap;
                break;
            }
            output.push_str(&entry);
            shown_lines += 1;
        }
        if shown_lines == 0 && stop == Stop::EndOfFile {
            if line_number == 0 {
                return Ok(ToolOutput::text("(empty file)"));
            }
            return Err(ToolError::RespondToModel(format!(
                "can't read {shown}: offset {first_line} is past the end (the file has {line_number} lines)"
            )));
        }
        let next = first_line + shown_lines;
        match stop {
            Stop::EndOfFile => {}
            Stop::LineLimit => {
                output.push_str(&format!("[more lines follow; read_file with offset={next} to continue]"))
            }
            Stop::CharacterCap => output.push_str(&format!(
                "[output cut at {MAX_OUTPUT_CHARS} characters; read_file with offset={next} to continue]"
            )),
        }
        note_skill_in_use(&path, context).await;
        Ok(ToolOutput::text(output))
    }
}

/// The file every skill directory holds; reading it puts the skill in use for the turn.
const SKILL_FILE: &str = "SKILL.md";

/// Notes the skill whose `SKILL.md` `path` is as in use for the turn (its `addons.env`
/// variables reach the turn's commands when the skill is one of the context's).
async fn note_skill_in_use(path: &std::path::Path, context: &ToolContext) {
    if path.file_name().is_none_or(|name| name != SKILL_FILE) {
        return;
    }
    let Some(directory) = path.parent() else { return };
    match tokio::fs::canonicalize(directory).await {
        Ok(canonical) => context.skills_in_use.record(&canonical),
        Err(error) => tracing::debug!(%error, directory = %directory.display(), "can't note a skill in use"),
    }
}

/// Why reading stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    EndOfFile,
    LineLimit,
    CharacterCap,
}

/// One line as `cat -n` prints it: the number right-aligned in six columns, a tab, the text.
fn numbered_line(number: usize, raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let text = text.trim_end_matches(['\n', '\r']);
    if text.len() > MAX_LINE_CHARS {
        let cut = floor_char_boundary(text, MAX_LINE_CHARS);
        format!("{number:>6}\t{} [line cut: {} more characters]\n", &text[..cut], text.len() - cut)
    } else {
        format!("{number:>6}\t{text}\n")
    }
}

impl Tool for ReadFileTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<ReadFileArguments>("read_file")
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.read(parse(arguments)?, context).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_like_cat() {
        assert_eq!(numbered_line(7, b"hello\r\n"), "     7\thello\n");
    }

    #[tokio::test]
    async fn reading_a_skill_md_puts_its_skill_in_use_for_the_turn() {
        let workspace = tempfile::tempdir().unwrap();
        let skills = tempfile::tempdir().unwrap();
        let skill = skills.path().join("github");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(skill.join("SKILL.md"), "---\nname: github\n---\n").unwrap();
        std::fs::write(skill.join("notes.md"), "notes\n").unwrap();
        let tool =
            ReadFileTool::new(PathGuard::restricted_to_workspace().with_read_roots(vec![skills.path().to_path_buf()]));
        let context = ToolContext {
            workspace: workspace.path().to_path_buf(),
            session_key: "cli:local".into(),
            context: "owner".into(),
            cancel: tokio_util::sync::CancellationToken::new(),
            correlation_id: String::new(),
            actor: None,
            skills_in_use: Default::default(),
        };
        let read = |path: std::path::PathBuf| {
            let (tool, context) = (&tool, &context);
            async move { tool.call(serde_json::json!({"path": path.display().to_string()}), context).await }
        };
        read(skill.join("notes.md")).await.unwrap();
        read(skill.join("missing").join("SKILL.md")).await.unwrap_err();
        assert!(context.skills_in_use.is_empty(), "only a SKILL.md read counts");
        read(skill.join("SKILL.md")).await.unwrap();
        assert_eq!(context.skills_in_use.directories(), [skill.canonicalize().unwrap()]);
    }

    #[test]
    fn very_long_lines_are_cut() {
        let line = numbered_line(1, "x".repeat(MAX_LINE_CHARS + 10).as_bytes());
        assert!(line.ends_with("[line cut: 10 more characters]\n"), "{line}");
    }
}
