//! `find`: paths matching a glob, skipping vendored and build directories.

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;
use tokio_util::sync::CancellationToken;

use crate::path_guard::PathGuard;
use crate::scan::{Relativizer, walk};
use crate::{io_refusal, join_failure, parse, schema};

/// Paths reported at most.
pub const MAX_RESULTS: usize = 500;

/// Find files by glob: *.md matches names at any depth, src/**/*.rs matches paths.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FindArguments {
    /// Glob pattern.
    pub pattern: String,
    /// Directory to search (default: workspace).
    pub path: Option<String>,
}

/// The `find` tool.
#[derive(Debug, Clone)]
pub struct FindTool {
    guard: PathGuard,
}

impl FindTool {
    /// A `find` tool resolving paths through `guard`.
    pub fn new(guard: PathGuard) -> Self {
        Self { guard }
    }

    async fn find(&self, arguments: FindArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let matcher = GlobBuilder::new(&arguments.pattern)
            .literal_separator(true)
            .build()
            .map_err(|error| ToolError::RespondToModel(format!("can't find: invalid glob: {error}")))?
            .compile_matcher();
        let target = if arguments.pattern.contains('/') { MatchAgainst::RelativePath } else { MatchAgainst::Name };
        let shown = arguments.path.as_deref().unwrap_or(".");
        let root = self.guard.resolve_for_reading(shown, &context.workspace, "search")?;
        let metadata = tokio::fs::metadata(&root).await.map_err(|error| io_refusal("search", shown, &error))?;
        if !metadata.is_dir() {
            return Err(ToolError::RespondToModel(format!("can't search {shown}: it is not a directory")));
        }
        let relativizer = Relativizer::new(&context.workspace);
        let cancel = context.cancel.clone();
        let (found, total, cancelled) =
            tokio::task::spawn_blocking(move || collect(&root, &matcher, target, &relativizer, &cancel))
                .await
                .map_err(|error| join_failure("find files", &error))?;
        if found.is_empty() && !cancelled {
            return Ok(ToolOutput::text("no matches"));
        }
        let mut output = found.join("\n");
        if total > MAX_RESULTS {
            output.push_str(&format!("\n[{} more matches not shown; narrow the pattern or path]", total - MAX_RESULTS));
        }
        if cancelled {
            output.push_str("\n[search cancelled]");
        }
        Ok(ToolOutput::text(output))
    }
}

/// What a glob is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MatchAgainst {
    /// The entry's own name, at any depth (`*.md`).
    Name,
    /// The entry's path below the search root (`src/**/*.rs`).
    RelativePath,
}

/// Sorted matches (at most [`MAX_RESULTS`]), the total number of matches, and whether the
/// walk was cancelled.
fn collect(
    root: &Path,
    matcher: &GlobMatcher,
    target: MatchAgainst,
    relativizer: &Relativizer,
    cancel: &CancellationToken,
) -> (Vec<String>, usize, bool) {
    let mut found = Vec::new();
    let mut total = 0;
    for entry in walk(root).filter(|entry| entry.depth() > 0) {
        if cancel.is_cancelled() {
            return (found, total, true);
        }
        let matched = match target {
            MatchAgainst::Name => matcher.is_match(entry.file_name()),
            MatchAgainst::RelativePath => {
                entry.path().strip_prefix(root).is_ok_and(|relative| matcher.is_match(relative))
            }
        };
        if !matched {
            continue;
        }
        total += 1;
        if found.len() < MAX_RESULTS {
            let mut shown = relativizer.show(entry.path());
            if entry.file_type().is_dir() {
                shown.push('/');
            }
            found.push(shown);
        }
    }
    (found, total, false)
}

impl Tool for FindTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<FindArguments>("find")
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.find(parse(arguments)?, context).await
    }
}
