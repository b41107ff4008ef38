//! The built-in roles and the tools each holds unless configured otherwise. Tool names
//! here are the ones the model sees; [`MCP_TOOLS`] stands for every MCP server tool.

/// The role that talks to the user.
pub const ASSISTANT: &str = "assistant";
/// General-purpose sub-agent; user-defined roles start from its defaults.
pub const WORKER: &str = "worker";
/// Read-and-search sub-agent.
pub const RESEARCHER: &str = "researcher";
/// Code sub-agent.
pub const CODER: &str = "coder";
/// Memory upkeep sub-agent.
pub const MEMORY: &str = "memory";
/// Proactive check sub-agent.
pub const HEARTBEAT: &str = "heartbeat";

/// Roles that exist without configuration, the assistant first.
pub const BUILT_IN: [&str; 6] = [ASSISTANT, WORKER, RESEARCHER, CODER, MEMORY, HEARTBEAT];

/// An allowlist entry meaning "every tool of every MCP server".
pub const MCP_TOOLS: &str = "mcp";

/// The assistant's hand-over tools.
pub const DELEGATE: &str = "delegate";
/// The direct-mode child agent tool.
pub const SPAWN: &str = "spawn";
/// Stops a sub-agent.
pub const CANCEL_WORKER: &str = "cancel_worker";
/// Sub-agents' progress and outcome tool; every sub-agent holds it.
pub const SET_STATUS: &str = "set_status";
/// The agent bus's message tool.
pub const SEND: &str = "send";
/// Hands a file to the people of the conversation; the assistant's, since only it talks
/// to them.
pub const SEND_FILE: &str = "send_file";

/// Tools only the assistant may hold (a sub-agent never starts sub-agents).
pub const ASSISTANT_ONLY: [&str; 3] = [DELEGATE, SPAWN, CANCEL_WORKER];

/// File tools that only read.
pub const READ_FILES: [&str; 4] = ["read_file", "list_dir", "grep", "find"];
/// File tools that write.
pub const WRITE_FILES: [&str; 2] = ["write_file", "edit_file"];
/// The shell.
pub const EXEC: &str = "exec";
/// Web tools.
pub const WEB: [&str; 2] = ["web_fetch", "web_search"];
/// Long-term memory tools.
pub const MEMORY_TOOLS: [&str; 4] = ["memory_save", "memory_recall", "memory_delete", "memory_write"];
/// Scheduled-job tools: the assistant's in direct mode; in delegate mode the worker's, so
/// the assistant delegates "remind me …" and its own prompt stays lean.
pub const CRON_TOOLS: [&str; 5] = ["cron_add", "cron_list", "cron_remove", "cron_pause", "cron_resume"];

/// Every tool name a role's allowlist may use besides `<server>__<tool>` MCP names.
pub fn known_tools() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    names.extend(READ_FILES);
    names.extend(WRITE_FILES);
    names.push(EXEC);
    names.extend(WEB);
    names.extend(MEMORY_TOOLS);
    names.extend(CRON_TOOLS);
    names.extend(ASSISTANT_ONLY);
    names.push(SET_STATUS);
    names.push(SEND);
    names.push(SEND_FILE);
    names.push(MCP_TOOLS);
    names
}

/// Every real tool (what the assistant holds in direct mode, and `worker` minus memory).
fn everything() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    names.extend(READ_FILES);
    names.extend(WRITE_FILES);
    names.push(EXEC);
    names.extend(WEB);
    names.extend(MEMORY_TOOLS);
    names.push(MCP_TOOLS);
    names
}

/// The default allowlist of `role` (`direct` applies to the assistant only).
pub fn default_tools(role: &str, direct: bool) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    match role {
        ASSISTANT if direct => {
            names = everything();
            names.extend(CRON_TOOLS);
            names.extend([SPAWN, SEND, SEND_FILE]);
        }
        ASSISTANT => {
            names.extend([DELEGATE, CANCEL_WORKER]);
            names.extend(MEMORY_TOOLS);
            names.extend([SEND, SEND_FILE]);
        }
        RESEARCHER => {
            names.extend(READ_FILES);
            names.extend(WEB);
            names.push("memory_recall");
        }
        CODER => {
            names.extend(READ_FILES);
            names.extend(WRITE_FILES);
            names.push(EXEC);
        }
        MEMORY => names.extend(MEMORY_TOOLS),
        HEARTBEAT => {
            names.extend(READ_FILES);
            names.extend(MEMORY_TOOLS);
            names.extend(WEB);
        }
        _ => {
            names.extend(READ_FILES);
            names.extend(WRITE_FILES);
            names.push(EXEC);
            names.extend(WEB);
            names.push(MCP_TOOLS);
            names.extend(CRON_TOOLS);
        }
    }
    names
}

/// One line about what `role` is for, shown to the assistant.
pub fn summary(role: &str) -> String {
    match role {
        WORKER => "general tasks with files, the shell, the web and MCP tools; adds, lists, pauses and removes scheduled jobs (reminders, recurring tasks)".into(),
        RESEARCHER => "looking things up: reads files and the web, recalls memories; changes nothing".into(),
        CODER => "code: reads, writes and edits files and runs commands".into(),
        MEMORY => "long-term memory: saves, finds, updates and forgets memories and memory.md".into(),
        HEARTBEAT => "routine checks: reads files, memories and the web".into(),
        ASSISTANT => "the assistant itself".into(),
        other => format!("the user-defined role {other}"),
    }
}

/// Whether `name` may appear in an allowlist: a known name, or `<server>__<tool>` of a
/// configured MCP server.
pub fn is_known_tool(name: &str, mcp_servers: &[&str]) -> bool {
    known_tools().contains(&name)
        || name.split_once("__").is_some_and(|(server, tool)| !tool.is_empty() && mcp_servers.contains(&server))
}

/// Whether an allowlist lets an agent see `tool` (MCP tools are `<server>__<tool>`).
pub fn allows(allowlist: &[String], tool: &str) -> bool {
    allowlist.iter().any(|entry| entry == tool || (entry == MCP_TOOLS && tool.contains("__")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_delegation_model() {
        assert_eq!(default_tools(ASSISTANT, false)[..2], [DELEGATE, CANCEL_WORKER]);
        assert!(!default_tools(ASSISTANT, false).contains(&EXEC));
        let direct = default_tools(ASSISTANT, true);
        assert!(direct.contains(&EXEC) && direct.contains(&SPAWN) && !direct.contains(&DELEGATE));
        let researcher = default_tools(RESEARCHER, false);
        assert!(!researcher.contains(&"write_file") && !researcher.contains(&EXEC));
        assert_eq!(default_tools("translator", false), default_tools(WORKER, false));
        for role in BUILT_IN.iter().filter(|role| **role != ASSISTANT) {
            assert!(default_tools(role, false).iter().all(|tool| !ASSISTANT_ONLY.contains(tool)), "{role}");
            let schedules = default_tools(role, false).iter().any(|tool| CRON_TOOLS.contains(tool));
            assert_eq!(schedules, *role == WORKER, "{role}");
        }
        assert!(CRON_TOOLS.iter().all(|tool| default_tools(ASSISTANT, true).contains(tool)), "direct mode");
        assert!(CRON_TOOLS.iter().all(|tool| !default_tools(ASSISTANT, false).contains(tool)), "delegated");
        assert!(CRON_TOOLS.iter().all(|tool| default_tools(WORKER, false).contains(tool)), "the worker schedules");
    }

    #[test]
    fn allowlists_know_mcp_names() {
        assert!(is_known_tool("read_file", &[]));
        assert!(is_known_tool("files__read_text_file", &["files"]));
        assert!(!is_known_tool("other__x", &["files"]));
        assert!(!is_known_tool("rm_rf", &[]));
        let allow = vec!["mcp".to_owned(), "read_file".to_owned()];
        assert!(allows(&allow, "files__read_text_file") && allows(&allow, "read_file") && !allows(&allow, "exec"));
    }
}
