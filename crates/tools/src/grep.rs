//! `grep`: regex search over file contents, skipping vendored, build, binary and huge files.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::text::floor_char_boundary;
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;
use tokio_util::sync::CancellationToken;

use crate::path_guard::PathGuard;
use crate::scan::{Relativizer, looks_binary, walk};
use crate::{io_refusal, join_failure, parse, schema};

/// Matches reported at most.
pub const MAX_MATCHES: usize = 200;
/// Characters of a matching line shown.
pub const MAX_LINE_CHARS: usize = 300;
/// Files larger than this are not searched.
pub const MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;

/// Search file contents by regex; prints path:line: text.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepArguments {
    /// Regex (Rust syntax).
    pub pattern: String,
    /// File or directory (default: workspace).
    pub path: Option<String>,
    /// File name glob, e.g. *.rs.
    pub glob: Option<String>,
}

/// The `grep` tool.
#[derive(Debug, Clone)]
pub struct GrepTool {
    guard: PathGuard,
}

impl GrepTool {
    /// A `grep` tool resolving paths through `guard`.
    pub fn new(guard: PathGuard) -> Self {
        Self { guard }
    }

    async fn grep(&self, arguments: GrepArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let refuse = |reason: String| ToolError::RespondToModel(format!("can't search: {reason}"));
        let regex = RegexBuilder::new(&arguments.pattern)
            .size_limit(16 * 1024 * 1024)
            .build()
            .map_err(|error| refuse(format!("invalid regex: {error}")))?;
        let filter = match &arguments.glob {
            Some(glob) => Some(
                GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .map_err(|error| refuse(format!("invalid glob: {error}")))?
                    .compile_matcher(),
            ),
            None => None,
        };
        let shown = arguments.path.as_deref().unwrap_or(".");
        let root = self.guard.resolve_for_reading(shown, &context.workspace, "search")?;
        let metadata = tokio::fs::metadata(&root).await.map_err(|error| io_refusal("search", shown, &error))?;
        let search =
            Search { regex, filter, relativizer: Relativizer::new(&context.workspace), cancel: context.cancel.clone() };
        let single_file = !metadata.is_dir();
        let shown_owned = shown.to_owned();
        let outcome = tokio::task::spawn_blocking(move || {
            if single_file { search.single_file(&root, &shown_owned) } else { Ok(search.tree(&root)) }
        })
        .await
        .map_err(|error| join_failure("search", &error))??;
        Ok(ToolOutput::text(outcome.render()))
    }
}

/// One search, run on a blocking thread.
struct Search {
    regex: Regex,
    filter: Option<GlobMatcher>,
    relativizer: Relativizer,
    cancel: CancellationToken,
}

/// What a search found.
#[derive(Debug, Default)]
struct Outcome {
    lines: Vec<String>,
    cut: bool,
    cancelled: bool,
}

impl Outcome {
    fn render(self) -> String {
        if self.lines.is_empty() && !self.cancelled {
            return "no matches".to_owned();
        }
        let mut text = self.lines.join("\n");
        if self.cut {
            text.push_str(&format!("\n[results cut at {MAX_MATCHES} matches; narrow the pattern, path or glob]"));
        }
        if self.cancelled {
            text.push_str("\n[search cancelled]");
        }
        text
    }
}

impl Search {
    fn single_file(&self, path: &Path, shown: &str) -> Result<Outcome, ToolError> {
        let bytes = std::fs::read(path).map_err(|error| io_refusal("search", shown, &error))?;
        if looks_binary(&bytes) {
            return Err(ToolError::RespondToModel(format!("can't search {shown}: it is a binary file")));
        }
        let mut outcome = Outcome::default();
        self.search_text(&bytes, &self.relativizer.show(path), &mut outcome);
        Ok(outcome)
    }

    fn tree(&self, root: &Path) -> Outcome {
        let mut outcome = Outcome::default();
        for entry in walk(root) {
            if self.cancel.is_cancelled() {
                outcome.cancelled = true;
                break;
            }
            if !entry.file_type().is_file() || !self.passes_filter(root, entry.path()) {
                continue;
            }
            if entry.metadata().is_ok_and(|metadata| metadata.len() > MAX_FILE_BYTES) {
                continue;
            }
            let Ok(bytes) = std::fs::read(entry.path()) else {
                continue;
            };
            if looks_binary(&bytes) {
                continue;
            }
            self.search_text(&bytes, &self.relativizer.show(entry.path()), &mut outcome);
            if outcome.cut {
                break;
            }
        }
        outcome
    }

    /// True without a glob, else when the glob matches the file name or the path below `root`.
    fn passes_filter(&self, root: &Path, path: &Path) -> bool {
        let Some(filter) = &self.filter else {
            return true;
        };
        let relative: PathBuf = path.strip_prefix(root).unwrap_or(path).to_path_buf();
        path.file_name().is_some_and(|name| filter.is_match(name)) || filter.is_match(&relative)
    }

    fn search_text(&self, bytes: &[u8], shown: &str, outcome: &mut Outcome) {
        let text = String::from_utf8_lossy(bytes);
        for (index, line) in text.lines().enumerate() {
            if !self.regex.is_match(line) {
                continue;
            }
            if outcome.lines.len() == MAX_MATCHES {
                outcome.cut = true;
                return;
            }
            outcome.lines.push(format!("{shown}:{}: {}", index + 1, clip(line)));
        }
    }
}

/// A matching line without trailing whitespace, cut to [`MAX_LINE_CHARS`].
fn clip(line: &str) -> String {
    let line = line.trim_end();
    if line.len() > MAX_LINE_CHARS {
        format!("{}…", &line[..floor_char_boundary(line, MAX_LINE_CHARS)])
    } else {
        line.to_owned()
    }
}

impl Tool for GrepTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<GrepArguments>("grep")
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.grep(parse(arguments)?, context).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_clipped() {
        let clipped = clip(&"é".repeat(400));
        assert!(clipped.len() <= MAX_LINE_CHARS + "…".len());
        assert!(clipped.ends_with('…'));
    }
}
