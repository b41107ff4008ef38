//! Context assembly: the system prompt built from embedded prompts and the workspace's
//! bootstrap files, with per-file and total size caps.

use crate::text::truncate_middle;
use crate::workspace::{GROUP_FILE, USER_FILE, WorkspaceFiles};

/// Bootstrap files of the main agent, in the order they appear in the prompt. A group
/// chat's `GROUP.md` follows `USER.md` in every list that has `USER.md` (see
/// [`bootstrap_names`]).
pub const BOOTSTRAP_FILES: [&str; 7] =
    ["SOUL.md", "IDENTITY.md", "AGENTS.md", "USER.md", "TOOLS.md", "ENVIRONMENT.md", "MEMORY.md"];

/// Injected after the others, and only on the first run.
pub const FIRST_RUN_FILE: &str = "BOOTSTRAP.md";

/// Characters kept of one bootstrap file.
pub const PER_FILE_CAP: usize = 20_000;

/// Characters kept of all bootstrap files together.
pub const TOTAL_CAP: usize = 100_000;

/// Below this many characters of remaining budget a file is omitted rather than cut
/// to a useless sliver.
const MINIMUM_SLICE: usize = 1_000;

/// Share of a truncated file kept from its start.
const HEAD_SHARE: f64 = 0.7;
/// Share of a truncated file kept from its end (the last 10 % is the marker's room).
const TAIL_SHARE: f64 = 0.2;

/// A prompt file embedded at build time; the workspace may override it with
/// `prompts/<name>` at run time.
#[derive(Debug, Clone, Copy)]
pub struct Prompt {
    /// File name under `prompts/`.
    pub name: &'static str,
    /// The embedded default text.
    pub default: &'static str,
}

/// The base instructions.
pub const SYSTEM_PROMPT: Prompt = Prompt { name: "system.md", default: include_str!("../prompts/system.md") };
/// The runtime line (date, OS, model, channel).
pub const RUNTIME_PROMPT: Prompt = Prompt { name: "runtime.md", default: include_str!("../prompts/runtime.md") };
/// The note added on the first run.
pub const FIRST_RUN_PROMPT: Prompt = Prompt { name: "first_run.md", default: include_str!("../prompts/first_run.md") };
/// The base instructions of sub-agents (workers, researchers, coders, ...).
pub const WORKER_PROMPT: Prompt = Prompt { name: "worker.md", default: include_str!("../prompts/worker.md") };
/// How the assistant hands work to sub-agents (delegate mode).
pub const DELEGATION_PROMPT: Prompt =
    Prompt { name: "delegation.md", default: include_str!("../prompts/delegation.md") };
/// The one reminder a sub-agent gets when a turn ends with no answer at all.
pub const WORKER_NUDGE_PROMPT: Prompt =
    Prompt { name: "worker_nudge.md", default: include_str!("../prompts/worker_nudge.md") };
/// How the assistant may start a child agent (direct mode).
pub const SPAWN_PROMPT: Prompt = Prompt { name: "spawn.md", default: include_str!("../prompts/spawn.md") };

/// Bootstrap files of sub-agents unless their role says otherwise: operating
/// instructions and local setup, no personality or user context.
pub const SUB_AGENT_BOOTSTRAP_FILES: [&str; 2] = ["AGENTS.md", "ENVIRONMENT.md"];

/// What one role's system prompt is made of.
#[derive(Debug, Clone)]
pub struct PromptProfile {
    /// The base instructions.
    pub base: Prompt,
    /// Workspace files included after the base, in order.
    pub bootstrap: Vec<String>,
    /// Embedded notes after the bootstrap files (how delegation works).
    pub notes: Vec<Prompt>,
    /// Text after the notes: the role's `system_prompt_file`, then its `system_prompt`.
    pub appended: Vec<String>,
    /// Value of `{{role}}`.
    pub role: String,
    /// Value of `{{roles}}`: the roles work may be handed to, one per line.
    pub roles: String,
    /// Whether `BOOTSTRAP.md` is read on the first run.
    pub first_run: bool,
}

impl Default for PromptProfile {
    /// The assistant's prompt: every bootstrap file, `BOOTSTRAP.md` on the first run.
    fn default() -> Self {
        Self {
            base: SYSTEM_PROMPT,
            bootstrap: BOOTSTRAP_FILES.iter().map(|name| (*name).to_owned()).collect(),
            notes: Vec::new(),
            appended: Vec::new(),
            role: "assistant".into(),
            roles: String::new(),
            first_run: true,
        }
    }
}

impl PromptProfile {
    /// A sub-agent's prompt: the worker instructions and [`SUB_AGENT_BOOTSTRAP_FILES`].
    pub fn sub_agent(role: &str) -> Self {
        Self {
            base: WORKER_PROMPT,
            bootstrap: SUB_AGENT_BOOTSTRAP_FILES.iter().map(|name| (*name).to_owned()).collect(),
            notes: Vec::new(),
            appended: Vec::new(),
            role: role.to_owned(),
            roles: String::new(),
            first_run: false,
        }
    }
}

impl Prompt {
    /// The workspace override if there is one, else the embedded text.
    pub fn load(&self, workspace: &dyn WorkspaceFiles) -> String {
        workspace.read(&format!("prompts/{}", self.name)).unwrap_or_else(|| self.default.to_owned())
    }
}

/// A per-context part of the prompt (memory.md, the memory bulletin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptSection {
    /// Heading shown to the model.
    pub title: String,
    /// The text.
    pub body: String,
}

/// Supplies the per-context prompt sections each turn.
pub trait PromptSections: Send + Sync {
    /// Sections for `context`, in prompt order.
    fn sections<'a>(&'a self, context: &'a str) -> crate::BoxFuture<'a, Vec<PromptSection>>;
}

/// Several section sources, in prompt order (memory first, then skills, as DESIGN.md
/// orders the context).
pub struct ChainedSections(Vec<std::sync::Arc<dyn PromptSections>>);

impl ChainedSections {
    /// Chains `sources`; their sections appear in this order.
    pub fn new(sources: Vec<std::sync::Arc<dyn PromptSections>>) -> Self {
        Self(sources)
    }
}

impl PromptSections for ChainedSections {
    fn sections<'a>(&'a self, context: &'a str) -> crate::BoxFuture<'a, Vec<PromptSection>> {
        Box::pin(async move {
            let mut sections = Vec::new();
            for source in &self.0 {
                sections.extend(source.sections(context).await);
            }
            sections
        })
    }
}

/// Facts about the run that the prompt mentions.
#[derive(Debug, Clone, Default)]
pub struct RuntimeInfo {
    /// Name the assistant goes by.
    pub name: String,
    /// Workspace directory as shown to the model.
    pub workspace: String,
    /// Today's date (day precision keeps provider prompt caches warm).
    pub date: String,
    /// Operating system.
    pub os: String,
    /// `provider/model` in use.
    pub model: String,
    /// Channel the conversation happens on (`cli`, `telegram`, …).
    pub channel: String,
}

/// How one bootstrap file made it into the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncludedFile {
    /// File name.
    pub name: String,
    /// Its size on disk in characters.
    pub original_chars: usize,
    /// Characters that made it into the prompt.
    pub included_chars: usize,
}

/// The assembled system prompt and a report of what went into it.
#[derive(Debug, Clone)]
pub struct SystemPrompt {
    /// The text sent to the model.
    pub text: String,
    /// Bootstrap files included, in order.
    pub files: Vec<IncludedFile>,
}

fn fill(template: &str, runtime: &RuntimeInfo, profile: &PromptProfile) -> String {
    template
        .replace("{{role}}", &profile.role)
        .replace("{{roles}}", &profile.roles)
        .replace("{{name}}", &runtime.name)
        .replace("{{workspace}}", &runtime.workspace)
        .replace("{{date}}", &runtime.date)
        .replace("{{os}}", &runtime.os)
        .replace("{{model}}", &runtime.model)
        .replace("{{channel}}", &runtime.channel)
}

/// Truncates one file to `cap` characters: 70 % head, 20 % tail, a marker between.
pub fn cap_file(name: &str, content: &str, cap: usize) -> String {
    truncate_middle(content, cap, HEAD_SHARE, TAIL_SHARE, |omitted| {
        format!("\n\n[... {omitted} characters of {name} omitted; read the file for the rest ...]\n\n")
    })
}

/// The files a bootstrap list reads, in order: the list, with `GROUP.md` right after
/// `USER.md` unless the list names it itself. Only a group chat's context has a
/// `GROUP.md` to read (see [`crate::workspace::PromptFiles`]).
pub fn bootstrap_names(bootstrap: &[String]) -> Vec<&str> {
    let names_group = bootstrap.iter().any(|name| name == GROUP_FILE);
    let mut names = Vec::with_capacity(bootstrap.len() + 1);
    for name in bootstrap {
        names.push(name.as_str());
        if name == USER_FILE && !names_group {
            names.push(GROUP_FILE);
        }
    }
    names
}

/// Builds the assistant's system prompt. Stable parts come first so provider prompt
/// caches hit: base instructions, then the bootstrap files, then the runtime line.
pub fn assemble(
    workspace: &dyn WorkspaceFiles,
    runtime: &RuntimeInfo,
    first_run: bool,
    sections: &[PromptSection],
) -> SystemPrompt {
    assemble_for(&PromptProfile::default(), workspace, runtime, first_run, sections)
}

/// Builds the system prompt of the role `profile` describes: base instructions, bootstrap
/// files, role notes, the role's own prompt text, per-context sections, the runtime line.
pub fn assemble_for(
    profile: &PromptProfile,
    workspace: &dyn WorkspaceFiles,
    runtime: &RuntimeInfo,
    first_run: bool,
    sections: &[PromptSection],
) -> SystemPrompt {
    let first_run = first_run && profile.first_run;
    let mut text = fill(profile.base.load(workspace).trim_end(), runtime, profile);
    let mut files = Vec::new();
    let mut budget = TOTAL_CAP;
    let names = bootstrap_names(&profile.bootstrap).into_iter().chain(first_run.then_some(FIRST_RUN_FILE));
    for name in names {
        let Some(content) = workspace.read(name) else { continue };
        let content = content.trim();
        if content.is_empty() {
            continue;
        }
        if budget < MINIMUM_SLICE {
            text.push_str(&format!("\n\n# {name}\n[omitted: the workspace files exceed {TOTAL_CAP} characters]"));
            files.push(IncludedFile { name: name.to_owned(), original_chars: content.len(), included_chars: 0 });
            continue;
        }
        let kept = cap_file(name, content, PER_FILE_CAP.min(budget));
        budget = budget.saturating_sub(kept.len());
        text.push_str(&format!("\n\n# {name}\n\n{kept}"));
        files.push(IncludedFile { name: name.to_owned(), original_chars: content.len(), included_chars: kept.len() });
    }
    for note in &profile.notes {
        text.push_str("\n\n");
        text.push_str(&fill(note.load(workspace).trim_end(), runtime, profile));
    }
    for extra in profile.appended.iter().map(|extra| extra.trim()).filter(|extra| !extra.is_empty()) {
        text.push_str("\n\n");
        text.push_str(extra);
    }
    for section in sections.iter().filter(|section| !section.body.trim().is_empty()) {
        text.push_str(&format!("\n\n# {}\n\n{}", section.title, section.body.trim()));
    }
    if first_run && files.iter().any(|file| file.name == FIRST_RUN_FILE) {
        text.push_str("\n\n");
        text.push_str(&fill(FIRST_RUN_PROMPT.load(workspace).trim_end(), runtime, profile));
    }
    text.push_str("\n\n");
    text.push_str(&fill(RUNTIME_PROMPT.load(workspace).trim_end(), runtime, profile));
    text.push('\n');
    SystemPrompt { text, files }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::MemoryWorkspace;

    fn runtime() -> RuntimeInfo {
        RuntimeInfo {
            name: "Squid".into(),
            workspace: "/home/user/.squidbot/workspace".into(),
            date: "2026-11-21".into(),
            os: "linux".into(),
            model: "local/test-model".into(),
            channel: "cli".into(),
        }
    }

    #[test]
    fn files_appear_in_design_order_and_missing_ones_are_skipped() {
        let workspace =
            MemoryWorkspace::new().with("USER.md", "user facts").with("SOUL.md", "soul").with("AGENTS.md", "agents");
        let prompt = assemble(&workspace, &runtime(), false, &[]);
        let names: Vec<_> = prompt.files.iter().map(|file| file.name.as_str()).collect();
        assert_eq!(names, ["SOUL.md", "AGENTS.md", "USER.md"]);
        let soul = prompt.text.find("# SOUL.md").unwrap();
        let user = prompt.text.find("# USER.md").unwrap();
        assert!(soul < user);
    }

    #[test]
    fn group_md_follows_user_md_capped_like_the_others() {
        let workspace = MemoryWorkspace::new()
            .with("TOOLS.md", "tools")
            .with("GROUP.md", &"g".repeat(PER_FILE_CAP + 5_000))
            .with("USER.md", "user facts");
        let prompt = assemble(&workspace, &runtime(), false, &[]);
        let names: Vec<_> = prompt.files.iter().map(|file| file.name.as_str()).collect();
        assert_eq!(names, ["USER.md", "GROUP.md", "TOOLS.md"]);
        assert!(prompt.files[1].included_chars <= PER_FILE_CAP);
        assert!(prompt.text.contains("characters of GROUP.md omitted"));
        let sub_agent = PromptProfile::sub_agent("worker");
        assert!(
            bootstrap_names(&sub_agent.bootstrap).iter().all(|name| *name != "GROUP.md"),
            "no USER.md, no GROUP.md"
        );
    }

    #[test]
    fn bootstrap_file_only_on_first_run() {
        let workspace = MemoryWorkspace::new().with("BOOTSTRAP.md", "say hello");
        assert!(assemble(&workspace, &runtime(), true, &[]).text.contains("say hello"));
        assert!(!assemble(&workspace, &runtime(), false, &[]).text.contains("say hello"));
    }

    #[test]
    fn oversized_file_keeps_70_percent_head_and_20_percent_tail() {
        let content = format!("{}{}{}", "h".repeat(30_000), "m".repeat(10_000), "t".repeat(30_000));
        let kept = cap_file("AGENTS.md", &content, PER_FILE_CAP);
        assert!(kept.starts_with(&"h".repeat(14_000)));
        assert!(!kept.starts_with(&"h".repeat(14_001)));
        assert!(kept.ends_with(&"t".repeat(4_000)));
        assert!(!kept.ends_with(&"t".repeat(4_001)));
        assert!(kept.contains("characters of AGENTS.md omitted"));
        assert!(kept.len() <= PER_FILE_CAP);
    }

    #[test]
    fn total_cap_limits_all_files_together() {
        let mut workspace = MemoryWorkspace::new();
        for name in BOOTSTRAP_FILES {
            workspace = workspace.with(name, &"x".repeat(19_000));
        }
        let prompt = assemble(&workspace, &runtime(), false, &[]);
        let included: usize = prompt.files.iter().map(|file| file.included_chars).sum();
        assert!(included <= TOTAL_CAP, "{included}");
        assert_eq!(prompt.files.last().unwrap().included_chars, 0);
        assert!(prompt.text.contains("[omitted: the workspace files exceed"));
    }

    #[test]
    fn workspace_prompt_override_wins() {
        let workspace = MemoryWorkspace::new().with("prompts/system.md", "Custom base for {{name}}.");
        let prompt = assemble(&workspace, &runtime(), false, &[]);
        assert!(prompt.text.starts_with("Custom base for Squid."));
    }

    #[test]
    fn sections_follow_the_bootstrap_files() {
        let workspace = MemoryWorkspace::new().with("SOUL.md", "soul");
        let sections = [PromptSection { title: "Memory (memory.md)".into(), body: "- likes tea".into() }];
        let prompt = assemble(&workspace, &runtime(), false, &sections);
        let soul = prompt.text.find("# SOUL.md").unwrap();
        let memory = prompt.text.find("# Memory (memory.md)\n\n- likes tea").unwrap();
        let runtime_line = prompt.text.find("## Runtime").unwrap();
        assert!(soul < memory && memory < runtime_line);
    }

    #[test]
    fn sub_agents_read_only_their_bootstrap_files_then_their_own_prompt() {
        let workspace = MemoryWorkspace::new()
            .with("SOUL.md", "personality")
            .with("USER.md", "user facts")
            .with("AGENTS.md", "operating rules")
            .with("ENVIRONMENT.md", "hosts");
        let mut profile = PromptProfile::sub_agent("researcher");
        profile.appended = vec!["From RESEARCHER.md".into(), "Focus on primary sources.".into()];
        let prompt = assemble_for(&profile, &workspace, &runtime(), true, &[]);
        let names: Vec<_> = prompt.files.iter().map(|file| file.name.as_str()).collect();
        assert_eq!(names, ["AGENTS.md", "ENVIRONMENT.md"]);
        assert!(!prompt.text.contains("personality") && !prompt.text.contains("user facts"));
        assert!(prompt.text.contains("researcher"), "the role is named");
        let file = prompt.text.find("From RESEARCHER.md").unwrap();
        let inline = prompt.text.find("Focus on primary sources.").unwrap();
        let environment = prompt.text.find("# ENVIRONMENT.md").unwrap();
        assert!(environment < file && file < inline);
    }

    #[test]
    fn sub_agent_prompt_snapshot() {
        let workspace = MemoryWorkspace::new().with("SOUL.md", "personality").with("AGENTS.md", "Be careful.");
        let prompt = assemble_for(&PromptProfile::sub_agent("researcher"), &workspace, &runtime(), false, &[]);
        insta::assert_snapshot!(prompt.text);
    }

    #[test]
    fn delegating_assistant_prompt_snapshot() {
        let profile = PromptProfile {
            notes: vec![DELEGATION_PROMPT],
            roles: "- `researcher`: looking things up\n- `worker`: general tasks".into(),
            ..PromptProfile::default()
        };
        let sections = [PromptSection { title: "Workers".into(), body: "Running:\n- 1f2e3d4c researcher".into() }];
        let prompt = assemble_for(&profile, &MemoryWorkspace::new(), &runtime(), false, &sections);
        insta::assert_snapshot!(prompt.text);
    }

    #[test]
    fn default_prompt_snapshot() {
        let prompt = assemble(&MemoryWorkspace::new(), &runtime(), false, &[]);
        insta::assert_snapshot!(prompt.text);
    }
}
