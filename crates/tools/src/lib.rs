//! squidbot's built-in tools: reading, writing, editing and searching files, the shell,
//! long-term memory, scheduled jobs, and `send` on the agent bus.

mod atomic;
pub mod cron;
pub mod edit_file;
pub mod exec;
pub mod find;
pub mod grep;
pub mod hooks;
pub mod list_dir;
pub mod memory;
pub mod path_guard;
pub mod read_file;
pub mod safety;
mod scan;
mod schema;
pub mod send;
pub mod send_file;
pub mod write_file;

use std::sync::Arc;

use serde::de::DeserializeOwned;
use squidbot_core::sandbox::Sandbox;
use squidbot_core::tool::{DynTool, ToolError, parse_arguments};
use squidbot_types::config::ToolsConfig;

pub use cron::{CronAddTool, CronListTool, CronPauseTool, CronRemoveTool, CronResumeTool, cron_tools};
pub use edit_file::EditFileTool;
pub use exec::{CommandEnvironment, ExecTool};
pub use find::FindTool;
pub use grep::GrepTool;
pub use list_dir::ListDirTool;
pub use memory::{MemoryDeleteTool, MemoryRecallTool, MemorySaveTool, MemoryWriteTool, memory_tools};
pub use path_guard::PathGuard;
pub use read_file::ReadFileTool;
pub use safety::{CommandPolicy, PolicyError, Refusal, Rule};
pub use send::SendTool;
pub use send_file::SendFileTool;
pub use write_file::WriteFileTool;

/// The eight built-in tools (`read_file`, `write_file`, `edit_file`, `list_dir`, `grep`,
/// `find`, `exec`, `send_file`) configured from `[tools]`, with `exec` running commands
/// through `sandbox` (there is no default: running unconfined takes an explicit
/// `HostShell`).
pub fn builtin_tools(config: &ToolsConfig, sandbox: Arc<dyn Sandbox>) -> Vec<Arc<dyn DynTool>> {
    builtin_tools_reading(config, sandbox, Vec::new())
}

/// Like [`builtin_tools`], with directories outside the workspace that the reading tools
/// (`read_file`, `list_dir`, `grep`, `find`, `send_file`) may reach, e.g. the skills'
/// directories.
pub fn builtin_tools_reading(
    config: &ToolsConfig,
    sandbox: Arc<dyn Sandbox>,
    read_roots: Vec<std::path::PathBuf>,
) -> Vec<Arc<dyn DynTool>> {
    builtin_tools_for_people(config, sandbox, read_roots, Vec::new(), CommandEnvironment::default())
}

/// Like [`builtin_tools_reading`], with `exec` running the commands of people of some
/// people's roles through sandboxes of their own (`[user_roles.<role>] sandbox`), and
/// withholding and adding variables as `environment` says.
pub fn builtin_tools_for_people(
    config: &ToolsConfig,
    sandbox: Arc<dyn Sandbox>,
    read_roots: Vec<std::path::PathBuf>,
    role_sandboxes: Vec<(String, Arc<dyn Sandbox>)>,
    environment: CommandEnvironment,
) -> Vec<Arc<dyn DynTool>> {
    let guard = PathGuard::from_config(config).with_read_roots(read_roots);
    let exec = ExecTool::new(guard.clone(), &config.exec).with_sandbox(sandbox).with_environment(environment);
    let exec = role_sandboxes.into_iter().fold(exec, |exec, (role, sandbox)| exec.with_role_sandbox(&role, sandbox));
    vec![
        Arc::new(ReadFileTool::new(guard.clone())),
        Arc::new(WriteFileTool::new(guard.clone())),
        Arc::new(EditFileTool::new(guard.clone())),
        Arc::new(ListDirTool::new(guard.clone())),
        Arc::new(GrepTool::new(guard.clone())),
        Arc::new(FindTool::new(guard.clone())),
        Arc::new(SendFileTool::new(guard)),
        Arc::new(exec),
    ]
}

/// Characters the specs of `tools` add to every request, serialized as a JSON array.
pub fn tool_specs_size(tools: &[Arc<dyn DynTool>]) -> usize {
    let specs: Vec<_> = tools.iter().map(|tool| tool.spec()).collect();
    serde_json::to_string(&specs).map(|text| text.len()).unwrap_or(0)
}

/// Like [`parse_arguments`], but reads a missing (`null`) arguments value as `{}` so tools
/// whose fields are all optional accept it.
pub(crate) fn parse<T: DeserializeOwned>(arguments: serde_json::Value) -> Result<T, ToolError> {
    let arguments = match arguments {
        serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
        other => other,
    };
    parse_arguments(arguments)
}

/// Turns an IO failure on a model-supplied path into a message the model can act on.
pub(crate) fn io_refusal(action: &str, shown: &str, error: &std::io::Error) -> ToolError {
    let reason = match error.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        std::io::ErrorKind::IsADirectory => "it is a directory".to_owned(),
        std::io::ErrorKind::NotADirectory => "a parent of it is not a directory".to_owned(),
        _ => error.to_string(),
    };
    ToolError::RespondToModel(format!("can't {action} {shown}: {reason}"))
}

/// A failure of the blocking thread pool, which the model can't do anything about.
pub(crate) fn join_failure(action: &str, error: &tokio::task::JoinError) -> ToolError {
    ToolError::Fatal(format!("can't {action}: worker thread failed: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_eight_specs_fit_the_budget() {
        let tools = builtin_tools(&ToolsConfig::default(), Arc::new(squidbot_core::sandbox::HostShell));
        let size = tool_specs_size(&tools);
        for tool in &tools {
            let spec = tool.spec();
            println!(
                "{} ({} chars): {}",
                spec.name,
                spec.serialized_len(),
                serde_json::to_string(&spec).unwrap_or_default()
            );
        }
        println!("total tool spec size: {size} characters");
        assert_eq!(tools.len(), 8);
        assert!(size < 3_000, "tool specs take {size} characters");
    }

    #[test]
    fn only_writers_mutate() {
        let tools = builtin_tools(&ToolsConfig::default(), Arc::new(squidbot_core::sandbox::HostShell));
        let mutating: Vec<String> = tools.iter().filter(|tool| tool.mutates()).map(|tool| tool.spec().name).collect();
        assert_eq!(mutating, ["write_file", "edit_file", "exec"]);
    }

    #[test]
    fn null_arguments_read_as_an_empty_object() {
        #[derive(serde::Deserialize)]
        struct Empty {
            #[allow(dead_code)]
            path: Option<String>,
        }
        assert!(parse::<Empty>(serde_json::Value::Null).is_ok());
    }
}
