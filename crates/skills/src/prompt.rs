//! The skills part of the system prompt: a `<skills>` XML block listing every skill
//! (name, description, location, availability, what is missing), then the whole body of
//! each available `always` skill. `SkillSections` serves it through core's
//! `PromptSections` port, rendering it again only when the skills or the note above them
//! changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use squidbot_core::BoxFuture;
use squidbot_core::context::{PER_FILE_CAP, Prompt, PromptSection, PromptSections, cap_file};
use squidbot_core::sync::lock;
use squidbot_core::workspace::WorkspaceFiles;

use crate::catalog::{ContextSkills, Discovery, SharedDiscovery, Skill, SkillCatalog};

/// The note above the block; `prompts/skills.md` in the workspace overrides it.
pub const SKILLS_PROMPT: Prompt = Prompt { name: "skills.md", default: include_str!("../prompts/skills.md") };

/// Characters the `<skills>` block may take; skills past it are counted, not listed.
pub const MAX_BLOCK_CHARS: usize = 30_000;

/// Characters all `always` bodies together may take.
pub const MAX_ALWAYS_CHARS: usize = 40_000;

/// Title of the section holding the block.
pub const SKILLS_TITLE: &str = "Skills";

/// Escapes text for XML element content and attribute values; drops control characters
/// XML 1.0 can't carry.
pub fn escape_xml(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\n' | '\t' => escaped.push(character),
            '\r' => {}
            control if control.is_control() => escaped.push(' '),
            other => escaped.push(other),
        }
    }
    escaped
}

fn skill_entry(skill: &Skill) -> String {
    let mut entry = format!(
        "  <skill available=\"{}\">\n    <name>{}</name>\n    <description>{}</description>\n    <location>{}</location>\n",
        skill.available(),
        escape_xml(skill.name()),
        escape_xml(&skill.manifest.description),
        escape_xml(&skill.directory.display().to_string()),
    );
    if !skill.available() {
        entry.push_str(&format!("    <requires>{}</requires>\n", escape_xml(&skill.missing.describe())));
    }
    entry.push_str("  </skill>\n");
    entry
}

/// True when the skill's body goes into the prompt instead of a block entry.
fn injected(skill: &Skill) -> bool {
    skill.manifest.always && skill.available()
}

/// The `<skills>` block of every skill not injected whole; empty when there is none.
pub fn skills_block(skills: &[Skill]) -> String {
    let listed: Vec<&Skill> = skills.iter().filter(|skill| !injected(skill)).collect();
    if listed.is_empty() {
        return String::new();
    }
    let mut block = String::from("<skills>\n");
    for (index, skill) in listed.iter().enumerate() {
        let entry = skill_entry(skill);
        if block.len() + entry.len() > MAX_BLOCK_CHARS {
            let rest = listed.len() - index;
            block.push_str(&format!("  <!-- {rest} more skills not listed: the list is capped -->\n"));
            break;
        }
        block.push_str(&entry);
    }
    block.push_str("</skills>");
    block
}

/// The prompt sections for a discovery: the block under [`SKILLS_TITLE`] with
/// `preamble` above it, then one section per available `always` skill.
pub fn prompt_sections(discovery: &Discovery, preamble: &str) -> Vec<PromptSection> {
    let mut sections = Vec::new();
    let block = skills_block(&discovery.skills);
    if !block.is_empty() {
        sections.push(PromptSection { title: SKILLS_TITLE.into(), body: format!("{}\n\n{block}", preamble.trim()) });
    }
    let mut budget = MAX_ALWAYS_CHARS;
    for skill in discovery.skills.iter().filter(|skill| injected(skill)) {
        let body = skill.manifest.body.trim();
        if body.is_empty() {
            continue;
        }
        if budget == 0 {
            tracing::warn!(
                name = skill.name(),
                "always-on skill left out: the always-on skills exceed {MAX_ALWAYS_CHARS} characters"
            );
            continue;
        }
        let kept = cap_file(&skill.file().display().to_string(), body, PER_FILE_CAP.min(budget));
        budget = budget.saturating_sub(kept.len());
        sections.push(PromptSection {
            title: format!("Skill: {} (always on; its files are in {})", skill.name(), skill.directory.display()),
            body: kept,
        });
    }
    sections
}

/// Workspace prompt overrides read straight from a directory.
struct DirectoryFiles<'a>(&'a Path);

impl WorkspaceFiles for DirectoryFiles<'_> {
    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.0.join(name)).ok()
    }
}

/// Maps a context id to its group's skills directory (`None`: not a group).
pub type GroupDirectories = Arc<dyn Fn(&str) -> Option<PathBuf> + Send + Sync>;

/// Maps a context id to its own skill directories (a group's, a person's, its
/// workspace's); the default for a context with none of its own (the owner).
pub type ContextDirectories = Arc<dyn Fn(&str) -> ContextSkills + Send + Sync>;

/// Most `stat` calls the async port makes on the calling task to find the latest
/// discovery unchanged: about a microsecond each when the kernel has the entries cached,
/// so the task keeps its worker well under the 100 µs or so an async task should run
/// between yields. A catalog with more skills is checked on the blocking pool.
const INLINE_STATS: usize = 64;

/// Most contexts whose sections are kept rendered.
const MAX_RENDERED: usize = 64;

/// Sections rendered from one discovery with one preamble.
struct Rendered {
    discovery: Arc<Discovery>,
    preamble: String,
    sections: Arc<[PromptSection]>,
}

/// Serves the skills sections of the prompt each turn from a shared catalog.
#[derive(Clone)]
pub struct SkillSections {
    catalog: Arc<SkillCatalog>,
    workspace: Option<PathBuf>,
    contexts: Option<ContextDirectories>,
    /// The sections last rendered for each context's directories, shared by the clones:
    /// rendering escapes every description, the most work a turn would do here.
    rendered: Arc<Mutex<HashMap<ContextSkills, Rendered>>>,
}

impl SkillSections {
    /// Sections from `catalog`.
    pub fn new(catalog: Arc<SkillCatalog>) -> Self {
        Self { catalog, workspace: None, contexts: None, rendered: Arc::default() }
    }

    /// Reads the `prompts/skills.md` override from this workspace.
    pub fn with_prompt_overrides(mut self, workspace: PathBuf) -> Self {
        self.workspace = Some(workspace);
        self
    }

    /// Adds each group context's own skills directory.
    pub fn with_group_directories(self, groups: GroupDirectories) -> Self {
        self.with_context_directories(Arc::new(move |context: &str| ContextSkills {
            group: groups(context),
            ..ContextSkills::default()
        }))
    }

    /// Adds each context's own skill directories: a group chat's, a person's, and its
    /// workspace's in place of the catalog's.
    pub fn with_context_directories(mut self, contexts: ContextDirectories) -> Self {
        self.contexts = Some(contexts);
        self
    }

    /// The sections for `context`, read synchronously; malformed skills found since the
    /// last call are logged as warnings naming the file.
    pub fn read(&self, context: &str) -> Vec<PromptSection> {
        self.read_shared(context).to_vec()
    }

    fn read_shared(&self, context: &str) -> Arc<[PromptSection]> {
        let directories = self.directories(context);
        let SharedDiscovery { discovery, new_problems } = self.catalog.shared(&directories);
        for problem in &new_problems {
            tracing::warn!(path = %problem.path.display(), problem = %problem.kind, "skipping a malformed skill");
        }
        let preamble = self.preamble();
        if let Some(sections) = self.rendered_before(&directories, &discovery, &preamble) {
            return sections;
        }
        let sections: Arc<[PromptSection]> = Arc::from(prompt_sections(&discovery, &preamble));
        let mut rendered = lock(&self.rendered);
        if rendered.len() >= MAX_RENDERED
            && !rendered.contains_key(&directories)
            && let Some(any) = rendered.keys().next().cloned()
        {
            rendered.remove(&any);
        }
        rendered.insert(directories, Rendered { discovery, preamble, sections: sections.clone() });
        sections
    }

    /// The sections for `context` when its discovery is unchanged and they were rendered
    /// from it already, found with a few `stat` calls and without waiting on a lock held
    /// through a discovery; `None` when reading them takes more.
    fn read_unchanged(&self, context: &str) -> Option<Arc<[PromptSection]>> {
        let directories = self.directories(context);
        let discovery = self.catalog.unchanged(&directories, INLINE_STATS)?;
        self.rendered_before(&directories, &discovery, &self.preamble())
    }

    fn directories(&self, context: &str) -> ContextSkills {
        self.contexts.as_ref().map(|contexts| contexts(context)).unwrap_or_default()
    }

    /// The note above the block: the workspace's override, read each time so an edit
    /// shows at the next turn (one failed `open` when there is none).
    fn preamble(&self) -> String {
        match &self.workspace {
            Some(workspace) => SKILLS_PROMPT.load(&DirectoryFiles(workspace)),
            None => SKILLS_PROMPT.default.to_owned(),
        }
    }

    fn rendered_before(
        &self,
        directories: &ContextSkills,
        discovery: &Arc<Discovery>,
        preamble: &str,
    ) -> Option<Arc<[PromptSection]>> {
        let rendered = lock(&self.rendered);
        rendered
            .get(directories)
            .filter(|before| Arc::ptr_eq(&before.discovery, discovery) && before.preamble == preamble)
            .map(|before| before.sections.clone())
    }
}

impl PromptSections for SkillSections {
    fn sections<'a>(&'a self, context: &'a str) -> BoxFuture<'a, Vec<PromptSection>> {
        Box::pin(async move {
            // Most turns find nothing changed: a few `stat` calls and opening the note's
            // override (one small file, or none) cost less here than handing the call to a
            // blocking thread and back. Parsing skills, rendering, or waiting for a
            // discovery another turn runs goes there.
            if let Some(sections) = self.read_unchanged(context) {
                return sections.to_vec();
            }
            let sections = self.clone();
            let context = context.to_owned();
            match tokio::task::spawn_blocking(move || sections.read_shared(&context)).await {
                Ok(sections) => sections.to_vec(),
                Err(error) => {
                    tracing::warn!(%error, "can't read the skills");
                    Vec::new()
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
