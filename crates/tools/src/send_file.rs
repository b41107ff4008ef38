//! `send_file`: hands a file to the people of the conversation. Chat channels send it as
//! an attachment with the reply; the terminal and gateway clients are told where it is.
//! Paths go through the same guard as `read_file`.

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::tool::{SharedFile, Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use crate::path_guard::PathGuard;
use crate::{io_refusal, parse, schema};

/// Largest file sent (most chat platforms refuse bigger uploads from bots).
pub const MAX_SEND_BYTES: u64 = 20 * 1024 * 1024;

/// Send a file to the user with your reply.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendFileArguments {
    /// File path.
    pub path: String,
}

/// The `send_file` tool.
#[derive(Debug, Clone)]
pub struct SendFileTool {
    guard: PathGuard,
}

impl SendFileTool {
    /// A `send_file` tool resolving paths through `guard`.
    pub fn new(guard: PathGuard) -> Self {
        Self { guard }
    }

    async fn share(&self, arguments: SendFileArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let shown = arguments.path.as_str();
        let path = self.guard.resolve_for_reading(shown, &context.workspace, "send")?;
        let metadata = tokio::fs::metadata(&path).await.map_err(|error| io_refusal("send", shown, &error))?;
        if !metadata.is_file() {
            return Err(ToolError::RespondToModel(format!("can't send {shown}: it is not a regular file")));
        }
        if metadata.len() > MAX_SEND_BYTES {
            return Err(ToolError::RespondToModel(format!(
                "can't send {shown}: it is {} bytes, over the {MAX_SEND_BYTES}-byte limit; compress or split it",
                metadata.len()
            )));
        }
        let name = path.file_name().map_or_else(|| "file".to_owned(), |name| name.to_string_lossy().into_owned());
        let mime = media_type(&name).to_owned();
        let size = metadata.len();
        let content = format!("{name} ({mime}, {size} bytes) goes out with your reply");
        Ok(ToolOutput::text(content).with_file(SharedFile { path, name, mime }))
    }
}

impl Tool for SendFileTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<SendFileArguments>("send_file")
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call<'a>(
        &'a self,
        arguments: serde_json::Value,
        context: &'a ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.share(parse(arguments)?, context).await
    }
}

/// The media type of a file by its extension; `application/octet-stream` when unknown.
pub fn media_type(name: &str) -> &'static str {
    let extension = name.rsplit_once('.').map(|(_, extension)| extension.to_ascii_lowercase()).unwrap_or_default();
    match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "zip" => "application/zip",
        "gz" | "tgz" => "application/gzip",
        "mp3" => "audio/mpeg",
        "ogg" | "oga" => "audio/ogg",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use tokio_util::sync::CancellationToken;

    use super::*;

    fn context(workspace: &Path) -> ToolContext {
        ToolContext {
            workspace: workspace.to_path_buf(),
            session_key: "telegram:1".into(),
            context: "owner".into(),
            cancel: CancellationToken::new(),
            correlation_id: String::new(),
            actor: None,
            skills_in_use: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_workspace_file_is_shared_with_its_name_and_type() {
        let workspace = tempfile::tempdir().unwrap();
        std::fs::create_dir(workspace.path().join("out")).unwrap();
        std::fs::write(workspace.path().join("out/report.PDF"), b"%PDF-1.7").unwrap();
        let tool = SendFileTool::new(PathGuard::restricted_to_workspace());
        let output =
            tool.call(serde_json::json!({"path": "out/report.PDF"}), &context(workspace.path())).await.unwrap();
        assert_eq!(output.content, "report.PDF (application/pdf, 8 bytes) goes out with your reply");
        assert_eq!(output.files.len(), 1);
        assert_eq!(output.files[0].name, "report.PDF");
        assert_eq!(output.files[0].mime, "application/pdf");
        assert_eq!(std::fs::read(&output.files[0].path).unwrap(), b"%PDF-1.7");
    }

    #[tokio::test]
    async fn missing_outside_oversized_and_directory_paths_are_refused() {
        let workspace = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), b"no").unwrap();
        let big = std::fs::File::create(workspace.path().join("big.bin")).unwrap();
        big.set_len(MAX_SEND_BYTES + 1).unwrap();
        let tool = SendFileTool::new(PathGuard::restricted_to_workspace());
        let refusal = |path: String| {
            let tool = tool.clone();
            let workspace = workspace.path().to_path_buf();
            async move {
                match tool.call(serde_json::json!({ "path": path }), &context(&workspace)).await {
                    Err(ToolError::RespondToModel(message)) => message,
                    other => panic!("{other:?}"),
                }
            }
        };
        assert!(refusal("nothing.txt".into()).await.contains("no such file"));
        assert!(refusal(".".into()).await.contains("not a regular file"));
        assert!(refusal("big.bin".into()).await.contains("over the 20971520-byte limit"));
        let escaped = refusal(outside.path().join("secret.txt").to_string_lossy().into_owned()).await;
        assert!(escaped.contains("escapes the workspace"), "{escaped}");
    }

    #[test]
    fn media_types_come_from_the_extension() {
        assert_eq!(media_type("chart.PNG"), "image/png");
        assert_eq!(media_type("notes.md"), "text/markdown");
        assert_eq!(media_type("archive.tar.gz"), "application/gzip");
        assert_eq!(media_type("Makefile"), "application/octet-stream");
    }
}
