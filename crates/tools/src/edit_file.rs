//! `edit_file`: replaces one exact, unique occurrence of a text in a file, atomically.

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use crate::atomic::write_atomically;
use crate::path_guard::PathGuard;
use crate::{io_refusal, join_failure, parse, schema};

/// Replace one exact, unique occurrence of old_text in a file.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditFileArguments {
    /// File path.
    pub path: String,
    /// Exact text to replace; must occur once.
    pub old_text: String,
    /// Replacement text.
    pub new_text: String,
}

/// The `edit_file` tool.
#[derive(Debug, Clone)]
pub struct EditFileTool {
    guard: PathGuard,
}

impl EditFileTool {
    /// An `edit_file` tool resolving paths through `guard`.
    pub fn new(guard: PathGuard) -> Self {
        Self { guard }
    }

    async fn edit(&self, arguments: EditFileArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let shown = arguments.path.as_str();
        let refuse = |reason: String| ToolError::RespondToModel(format!("can't edit {shown}: {reason}"));
        if arguments.old_text.is_empty() {
            return Err(refuse("old_text is empty; use write_file to replace a whole file".to_owned()));
        }
        let path = self.guard.resolve(shown, &context.workspace, "edit")?;
        let bytes = tokio::fs::read(&path).await.map_err(|error| io_refusal("edit", shown, &error))?;
        let original = String::from_utf8(bytes).map_err(|_| refuse("it is not UTF-8 text".to_owned()))?;
        let replaced = replace_unique(&original, &arguments.old_text, &arguments.new_text)
            .map_err(|failure| refuse(failure.to_string()))?;
        let target = path.clone();
        tokio::task::spawn_blocking(move || write_atomically(&target, replaced.as_bytes()))
            .await
            .map_err(|error| join_failure("edit a file", &error))?
            .map_err(|error| io_refusal("edit", shown, &error))?;
        Ok(ToolOutput::text(format!(
            "edited {shown}: replaced {} line(s) with {}",
            arguments.old_text.lines().count().max(1),
            arguments.new_text.lines().count()
        )))
    }
}

/// Why a replacement could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum EditFailure {
    #[error("no match for old_text; re-read the file and copy the text exactly")]
    NoMatch,
    #[error("found {0} matches; add surrounding lines to make old_text unique")]
    Ambiguous(usize),
}

/// Replaces the single occurrence of `old` in `text`. A file with Windows line endings
/// also matches an `old` written with `\n`, so the model need not reproduce `\r`.
fn replace_unique(text: &str, old: &str, new: &str) -> Result<String, EditFailure> {
    match text.matches(old).count() {
        1 => return Ok(text.replacen(old, new, 1)),
        0 => {}
        count => return Err(EditFailure::Ambiguous(count)),
    }
    if text.contains("\r\n") && old.contains('\n') && !old.contains('\r') {
        let old_crlf = old.replace('\n', "\r\n");
        let new_crlf = new.replace("\r\n", "\n").replace('\n', "\r\n");
        return match text.matches(&old_crlf).count() {
            1 => Ok(text.replacen(&old_crlf, &new_crlf, 1)),
            0 => Err(EditFailure::NoMatch),
            count => Err(EditFailure::Ambiguous(count)),
        };
    }
    Err(EditFailure::NoMatch)
}

impl Tool for EditFileTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<EditFileArguments>("edit_file")
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.edit(parse(arguments)?, context).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_match_is_replaced() {
        assert_eq!(replace_unique("a b c", "b", "x"), Ok("a x c".to_owned()));
    }

    #[test]
    fn missing_and_repeated_matches_are_refused() {
        assert_eq!(replace_unique("a b c", "z", "x"), Err(EditFailure::NoMatch));
        assert_eq!(replace_unique("b b b", "b", "x"), Err(EditFailure::Ambiguous(3)));
    }

    #[test]
    fn crlf_files_match_lf_text() {
        assert_eq!(replace_unique("one\r\ntwo\r\nthree\r\n", "one\ntwo", "1\n2"), Ok("1\r\n2\r\nthree\r\n".to_owned()));
    }
}
