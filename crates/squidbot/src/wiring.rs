//! Builds the running pieces from configuration: provider router, tools, session
//! store, workspace and the assistant agent.

use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result, anyhow, bail};
use squidbot_core::agent::{Agent, AgentSettings, CompactionSettings};
use squidbot_core::clock::SystemClock;
use squidbot_core::compactor::CompactionPolicy;
use squidbot_core::context::{ChainedSections, DELEGATION_PROMPT, PromptSections, RuntimeInfo, SPAWN_PROMPT};
use squidbot_core::delegation::{
    CancelWorkerTool, DelegateTool, Delegator, RoleAgent, SetStatusTool, SpawnTool, WorkerPool, roles,
};
use squidbot_core::duration::{BareNumber, parse_duration};
use squidbot_core::housekeeping::Housekeeping;
use squidbot_core::memory::{DynEmbedder, Memories, MemoryDocuments, MemorySections};
use squidbot_core::store::DynSessionStore;
use squidbot_core::tool::{ToolFilter, ToolRegistry};
use squidbot_core::workspace::ContextWorkspaces;
use squidbot_llm::Router;
use squidbot_mcp::McpManager;
use squidbot_sandbox::{LinuxSandbox, SandboxSettings};
use squidbot_skills::{ContextSkills, SkillCatalog, SkillRoots, SkillSections};
use squidbot_store::{
    BulletinCache, Database, FsMemoryDocuments, FsWorkspace, IndexedSessionStore, JsonlSessionStore,
    SessionSearchIndex, SqliteJobStore, SqliteMemoryStore, SqliteSessionIndex,
};
use squidbot_types::config::{Config, RoleSandbox};

use crate::config::{self as config_loader, LoadedConfig};
use crate::logging;
use crate::paths::Paths;

/// Role name of the agent that talks to the user.
pub const ASSISTANT_ROLE: &str = "assistant";

/// Context id of the single owner.
pub const OWNER_CONTEXT: &str = "owner";

/// Role whose model does memory work (extraction, bulletins); `llm.model` when unset.
pub const MEMORY_ROLE: &str = "memory";

/// Everything a command needs, loaded once.
#[derive(Debug)]
pub struct Environment {
    /// Resolved paths.
    pub paths: Paths,
    /// Loaded configuration.
    pub loaded: LoadedConfig,
    database: OnceLock<Database>,
    sandbox: OnceLock<Arc<LinuxSandbox>>,
    bus: OnceLock<Arc<squidbot_bus::Bus>>,
    people: OnceLock<Arc<squidbot_core::people::People>>,
    people_database: OnceLock<crate::people::PeopleDatabase>,
    leaks: OnceLock<squidbot_core::leaks::LeakScanner>,
}

impl Environment {
    /// Resolves paths and loads the config; logging starts here with secrets scrubbed.
    pub fn load() -> Result<Self> {
        let paths = Paths::from_env()?;
        let loaded = config_loader::load(&paths.config)?;
        logging::init(&loaded.config.logging, config_loader::secret_values(&loaded.config));
        Ok(Self {
            paths,
            loaded,
            database: OnceLock::new(),
            sandbox: OnceLock::new(),
            bus: OnceLock::new(),
            people: OnceLock::new(),
            leaks: OnceLock::new(),
            people_database: OnceLock::new(),
        })
    }

    /// The database, opened once per process.
    pub fn database(&self) -> Result<Database> {
        if let Some(database) = self.database.get() {
            return Ok(database.clone());
        }
        let database = Database::open(&self.paths.database())?;
        Ok(self.database.get_or_init(|| database).clone())
    }

    /// The agent bus, built once per process (the gateway registers its routes on it).
    pub fn bus(&self) -> Result<Arc<squidbot_bus::Bus>> {
        if let Some(bus) = self.bus.get() {
            return Ok(bus.clone());
        }
        let journal = Arc::new(squidbot_store::SqliteBusJournal::new(self.database()?));
        let bus = crate::bus::build(self.config(), self.paths.triggers(), journal)?;
        Ok(self.bus.get_or_init(|| bus).clone())
    }

    /// The embedder from `memory.embedding_model`, if configured.
    pub fn embedder(&self) -> Result<Option<Arc<dyn DynEmbedder>>> {
        let embedder =
            squidbot_llm::embedder_from_config(self.config(), &|name| std::env::var(name).ok()).map_err(|issues| {
                let lines: Vec<String> = issues.iter().map(ToString::to_string).collect();
                anyhow!("invalid config {}: {}", self.paths.config.display(), lines.join("; "))
            })?;
        Ok(embedder.map(|embedder| Arc::new(embedder) as Arc<dyn DynEmbedder>))
    }

    /// The memory service.
    pub fn memories(&self) -> Result<Memories> {
        let store = SqliteMemoryStore::new(self.database()?);
        Ok(Memories::new(Arc::new(store), self.embedder()?, Arc::new(SystemClock)))
    }

    /// The per-context memory.md files.
    pub fn documents(&self) -> Arc<dyn MemoryDocuments> {
        Arc::new(FsMemoryDocuments::new(self.paths.memory_documents()))
    }

    /// The model for memory work.
    pub fn memory_model(&self) -> Result<String> {
        match self.config().agents.get(MEMORY_ROLE).and_then(|agent| agent.model.clone()) {
            Some(model) => Ok(model),
            None => self.assistant_model(None),
        }
    }

    /// The session store: JSONL transcripts indexed in SQLite.
    pub fn session_store(&self) -> Result<IndexedSessionStore> {
        Ok(IndexedSessionStore::new(
            JsonlSessionStore::new(self.paths.sessions()),
            SqliteSessionIndex::new(self.database()?),
            Arc::new(SystemClock),
        )
        .with_search(self.session_search()?))
    }

    /// The full-text index of the transcripts.
    pub fn session_search(&self) -> Result<SessionSearchIndex> {
        Ok(SessionSearchIndex::new(self.database()?, self.paths.sessions()))
    }

    /// True when the session exists and is archived (using it resumes it).
    pub fn session_archived(&self, key: &str) -> Result<bool> {
        let entry = SqliteSessionIndex::new(self.database()?).get(key)?;
        Ok(entry.is_some_and(|entry| entry.status == squidbot_store::SessionStatus::Archived))
    }

    /// The system jobs.
    pub fn housekeeping(&self) -> Result<Housekeeping> {
        let config = self.config();
        let archive_after = parse_duration(&config.sessions.archive_after, BareNumber::Seconds).with_context(|| {
            format!("sessions.archive_after: {:?} is not a duration", config.sessions.archive_after)
        })?;
        let keep_job_runs = parse_duration(&config.sessions.keep_job_runs, BareNumber::Seconds).with_context(|| {
            format!("sessions.keep_job_runs: {:?} is not a duration", config.sessions.keep_job_runs)
        })?;
        let database = self.database()?;
        Ok(Housekeeping {
            memories: self.memories()?,
            index: Arc::new(SqliteSessionIndex::new(database.clone())),
            sessions: Arc::new(JsonlSessionStore::new(self.paths.sessions())),
            bulletins: Arc::new(BulletinCache::new(database)),
            provider: Arc::new(self.router()?),
            model: self.memory_model()?,
            workspace: Arc::new(FsWorkspace::new(self.workspace())),
            clock: Arc::new(SystemClock),
            archive_after,
            keep_job_runs,
            contexts: vec![OWNER_CONTEXT.to_owned()],
        })
    }

    /// How many sessions a long-running runner keeps loaded, and for how long (`[sessions]`).
    pub fn open_session_limits(&self) -> squidbot_core::runs::OpenSessionLimits {
        let sessions = &self.config().sessions;
        let defaults = squidbot_core::runs::OpenSessionLimits::default();
        squidbot_core::runs::OpenSessionLimits {
            max_open: sessions.max_open.max(1),
            idle: parse_duration(&sessions.unload_after, BareNumber::Seconds)
                .ok()
                .filter(|idle| !idle.is_zero())
                .unwrap_or(defaults.idle),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.loaded.config
    }

    /// The IANA zone of jobs added without one, of heartbeats and of active hours
    /// (`scheduler.timezone`, `local` resolved to the machine's zone).
    pub fn job_zone(&self) -> String {
        squidbot_core::schedule::configured_zone_name(&self.config().scheduler.timezone)
    }

    /// The workspace directory.
    pub fn workspace(&self) -> std::path::PathBuf {
        self.paths.workspace(self.config().workspace.path.as_deref())
    }

    /// The skill catalog: bundled skills, `skills.extra_dirs` (`~/` expanded, relative
    /// ones under `$SQUIDBOT_HOME`), the user's skills and `<workspace>/skills`.
    pub fn skill_catalog(&self) -> SkillCatalog {
        let extra = self
            .config()
            .skills
            .extra_dirs
            .iter()
            .map(|directory| match directory.to_str() {
                Some(text) => self.paths.home.join(crate::paths::expand_tilde(text)),
                None => self.paths.home.join(directory),
            })
            .collect();
        SkillCatalog::new(SkillRoots {
            bundled: Some(self.paths.bundled_skills()),
            extra,
            user: Some(self.paths.user_skills()),
            workspace: Some(self.workspace().join("skills")),
        })
    }

    /// The model the assistant uses, honouring an override.
    pub fn assistant_model(&self, override_model: Option<&str>) -> Result<String> {
        let config = self.config();
        let model = override_model
            .map(str::to_owned)
            .or_else(|| config.agents.get(ASSISTANT_ROLE).and_then(|agent| agent.model.clone()))
            .unwrap_or_else(|| config.llm.model.clone());
        if model.is_empty() {
            if !self.loaded.file_exists {
                bail!(
                    "no config at {}: run `squidbot onboard` first (or set SQUIDBOT_CONFIG)",
                    self.paths.config.display()
                );
            }
            bail!("llm.model is not set in {}: set it to provider/model", self.paths.config.display());
        }
        Ok(model)
    }

    /// Builds the provider router, failing with every config problem listed.
    pub fn router(&self) -> Result<Router> {
        Router::from_config(self.config(), &|name| std::env::var(name).ok()).map_err(|issues| {
            let lines: Vec<String> = issues.iter().map(ToString::to_string).collect();
            anyhow!("invalid config {}: {}", self.paths.config.display(), lines.join("; "))
        })
    }

    /// Skill directories outside the workspace that the reading file tools may reach:
    /// the catalog's, and the people's and groups' own (`users/<id>/skills`,
    /// `groups/<id>/skills`) that exist now, for every context alike (the tools' read
    /// roots are fixed when they are made).
    pub fn skill_read_roots(&self) -> Vec<std::path::PathBuf> {
        let catalog = self.skill_catalog();
        let roots = catalog.roots();
        let mut read_roots: Vec<std::path::PathBuf> =
            roots.bundled.iter().chain(&roots.extra).chain(&roots.user).cloned().collect();
        read_roots.extend(squidbot_store::context_skill_directories(&self.paths.home));
        read_roots
    }

    /// Each context's own skill directories for its prompt's `<skills>` block: a
    /// group's or a person's (`groups/<id>/skills`, `users/<id>/skills`) and the skills
    /// of its own workspace; the owner's are the catalog's.
    fn context_skill_directories(&self) -> squidbot_skills::ContextDirectories {
        let home = self.paths.home.clone();
        Arc::new(move |context: &str| {
            squidbot_store::context_skill_paths(&home, context)
                .map(|paths| ContextSkills::of(paths.kind, paths.own, paths.workspace))
                .unwrap_or_default()
        })
    }

    /// The scanner that knows every secret of the config and the vault, built once per
    /// process (its needles are shared by every clone).
    pub fn leak_scanner(&self) -> squidbot_core::leaks::LeakScanner {
        self.leaks
            .get_or_init(|| squidbot_core::leaks::LeakScanner::new(crate::config::secret_values(self.config())))
            .clone()
    }

    /// The tool set of the assistant: files, shell, memory, cron, web and `send`, plus the tools
    /// of the MCP servers, which start on the first turn that needs them.
    pub fn tools(&self, memories: &Memories) -> Result<ToolRegistry> {
        let mut registry = ToolRegistry::new();
        let memory_tools = squidbot_tools::memory_tools(
            memories.clone(),
            self.documents(),
            self.config().memory.document_cap,
            self.leak_scanner(),
        );
        let web_tools =
            squidbot_web::web_tools(&self.config().tools.web, &|name| std::env::var(name).ok(), self.leak_scanner())?;
        let builtin = squidbot_tools::builtin_tools_for_people(
            &self.config().tools,
            self.sandbox(),
            self.skill_read_roots(),
            self.people_role_sandboxes(),
            self.command_environment(),
        );
        let cron_tools = squidbot_tools::cron_tools(Arc::new(SqliteJobStore::new(self.database()?)), self.job_zone());
        for tool in builtin.into_iter().chain(memory_tools).chain(cron_tools).chain(web_tools) {
            registry.register(tool);
        }
        let sender = squidbot_bus::Sender::role(ASSISTANT_ROLE);
        let leaks = self.leak_scanner();
        registry.register(Arc::new(squidbot_tools::SendTool::new(self.bus()?, sender).with_leak_scanner(leaks)));
        if let Some(mcp) = self.mcp()? {
            registry.add_source(mcp);
        }
        Ok(registry)
    }

    /// What `exec` withholds from its commands' environment (any variable carrying a
    /// secret) and adds to it: the `addons.env` variables of the skills a turn read, each
    /// the vault secret of its name, when skills are enabled.
    fn command_environment(&self) -> squidbot_tools::CommandEnvironment {
        let config = self.config();
        let skills = config.skills.enabled.then(|| {
            let known = crate::config::vault::known_secrets(config.vault.key);
            let values: squidbot_skills::VariableValues = Arc::new(move |name: &str| known.get(name).cloned());
            let environment = squidbot_skills::SkillAddonEnvironment::new(Arc::new(self.skill_catalog()), values)
                .with_context_directories(self.context_skill_directories());
            Arc::new(environment) as Arc<dyn squidbot_core::skill_use::SkillEnvironment>
        });
        squidbot_tools::CommandEnvironment { withheld: self.leak_scanner(), skills }
    }

    /// The sandbox commands run in, from `[sandbox]`: this binary re-executed as the
    /// helper; the backend is probed on first use, once per process. Commands see the
    /// skill directories read-only and nothing else of `$SQUIDBOT_HOME` but the workspace.
    pub fn sandbox(&self) -> Arc<LinuxSandbox> {
        let sandbox = self.sandbox.get_or_init(|| self.new_sandbox(self.config().sandbox.clone()));
        Arc::clone(sandbox)
    }

    /// A sandbox enforcing `policy` instead of `[sandbox]` (a role's own policy).
    fn new_sandbox(&self, policy: squidbot_types::sandbox::SandboxConfig) -> Arc<LinuxSandbox> {
        {
            let helper = std::env::current_exe().unwrap_or_else(|_| std::path::PathBuf::from("/proc/self/exe"));
            let mut skills = vec![self.paths.bundled_skills(), self.paths.user_skills()];
            skills.extend(self.config().skills.extra_dirs.iter().map(|directory| match directory.to_str() {
                Some(text) => self.paths.home.join(crate::paths::expand_tilde(text)),
                None => self.paths.home.join(directory),
            }));
            skills.extend(squidbot_store::context_skill_directories(&self.paths.home));
            Arc::new(LinuxSandbox::new(SandboxSettings {
                config: policy,
                squidbot_home: self.paths.home.clone(),
                private_files: vec![self.paths.config.clone()],
                user_home: std::env::var_os("HOME").filter(|home| !home.is_empty()).map(std::path::PathBuf::from),
                extra_read_only: skills,
                helper,
            }))
        }
    }

    /// The `[[hooks]]`, run through the sandbox; empty when there are none.
    pub fn hooks(&self) -> Result<Vec<Arc<dyn squidbot_core::hooks::Hook>>> {
        let config = &self.config().hooks;
        if config.is_empty() {
            return Ok(Vec::new());
        }
        let hooks = squidbot_tools::hooks::ExecutableHooks::new(config, self.sandbox())?;
        Ok(vec![Arc::new(hooks)])
    }

    /// The sandboxes of the people's roles that have their own backend.
    fn people_role_sandboxes(&self) -> Vec<(String, Arc<dyn squidbot_core::sandbox::Sandbox>)> {
        let book = squidbot_core::people::RoleBook::new(&self.config().user_roles);
        book.names()
            .filter_map(|name| book.policy(name).sandbox.map(|backend| (name.to_owned(), backend)))
            .map(|(name, backend)| {
                let sandbox: Arc<dyn squidbot_core::sandbox::Sandbox> =
                    self.role_sandbox(&RoleSandbox::Backend(backend));
                (name, sandbox)
            })
            .collect()
    }

    /// The people's policy over the database (users, usage, approvals, audit), built
    /// once per process; the first admin is made on first use when there is none.
    pub fn people(&self) -> Result<Arc<squidbot_core::people::People>> {
        if let Some(people) = self.people.get() {
            return Ok(people.clone());
        }
        let database = self.people_database()?;
        let people = database.policy(self.config());
        let hooks = self.hooks()?;
        if !hooks.is_empty() {
            people.set_hooks(Arc::new(squidbot_core::hooks::HookBus::new(hooks)));
        }
        if let Some(owner) = database.ensure_owner(self.config(), &people)? {
            tracing::info!(user = %owner.id, "made the first admin from the owner");
        }
        Ok(self.people.get_or_init(|| Arc::new(people)).clone())
    }

    /// The people's stores over the database and the audit key, opened once per process.
    pub fn people_database(&self) -> Result<crate::people::PeopleDatabase> {
        if let Some(database) = self.people_database.get() {
            return Ok(database.clone());
        }
        let database = crate::people::open(self)?;
        Ok(self.people_database.get_or_init(|| database).clone())
    }

    /// `catalogue` with the built-in tools confined by a role's own sandbox, if it has one.
    fn with_role_sandbox(&self, catalogue: &ToolRegistry, policy: Option<&RoleSandbox>) -> ToolRegistry {
        let mut tools = catalogue.clone();
        if let Some(policy) = policy {
            let sandbox = self.role_sandbox(policy);
            let environment = self.command_environment();
            for tool in squidbot_tools::builtin_tools_for_people(
                &self.config().tools,
                sandbox,
                Vec::new(),
                Vec::new(),
                environment,
            ) {
                tools.register(tool);
            }
        }
        tools
    }

    /// The sandbox a role's commands run in.
    fn role_sandbox(&self, policy: &RoleSandbox) -> Arc<LinuxSandbox> {
        match policy {
            RoleSandbox::Backend(backend) => {
                let mut config = self.config().sandbox.clone();
                config.backend = *backend;
                self.new_sandbox(config)
            }
            RoleSandbox::Policy(config) => self.new_sandbox(config.clone()),
        }
    }

    /// The servers of `[mcp]`, checked but not started; `None` when none is enabled.
    pub fn mcp(&self) -> Result<Option<Arc<McpManager>>> {
        let leaks = self.leak_scanner();
        let manager = McpManager::from_config(&self.config().mcp)
            .map(|manager| manager.with_leak_scanner(leaks))
            .map_err(|issues| {
                let lines: Vec<String> = issues.iter().map(ToString::to_string).collect();
                anyhow!("invalid config {}: {}", self.paths.config.display(), lines.join("; "))
            })?;
        Ok((!manager.is_empty()).then(|| Arc::new(manager)))
    }

    /// Wires the assistant agent for a conversation, failing before anything is written
    /// to a session when the model can't be called (unknown provider, missing key).
    pub fn ready_assistant(&self, override_model: Option<&str>, stream: bool, channel: &str) -> Result<Agent> {
        let model = self.assistant_model(override_model)?;
        let router = self.router()?;
        router.check_model(&model)?;
        for (role, agent) in &self.config().agents {
            if let Some(model) = agent.model.as_deref().filter(|_| role != ASSISTANT_ROLE) {
                router.check_model(model).with_context(|| format!("agents.{role}.model"))?;
            }
        }
        self.assistant(override_model, stream, channel)
    }

    /// Wires the assistant agent.
    pub fn assistant(&self, override_model: Option<&str>, stream: bool, channel: &str) -> Result<Agent> {
        let config = self.config();
        let model = self.assistant_model(override_model)?;
        let router = self.router()?;
        let context_window = router.context_window(&model).unwrap_or(config.llm.context_window);
        let workspace = self.workspace();
        std::fs::create_dir_all(&workspace)
            .with_context(|| format!("can't create the workspace {}", workspace.display()))?;
        let mut problems = crate::agents::issues(config);
        problems.extend(crate::agents::prompt_file_issues(config, &workspace));
        if !problems.is_empty() {
            let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
            bail!("invalid config {}: {}", self.paths.config.display(), lines.join("; "));
        }
        let role = crate::agents::resolve(config, ASSISTANT_ROLE, &workspace)?;
        let settings = AgentSettings {
            model,
            max_turns: role.max_turns,
            max_tokens: config.llm.max_tokens,
            temperature: config.llm.temperature,
            context_window,
            stream,
            workspace: workspace.clone(),
            runtime: runtime_info(&workspace, channel.to_owned()),
            context: OWNER_CONTEXT.to_owned(),
        };
        let memories = self.memories()?;
        let memory = &config.memory;
        let compaction = CompactionSettings {
            policy: CompactionPolicy {
                compact_at: memory.compact_at,
                aggressive_at: memory.aggressive_at,
                emergency_at: memory.emergency_at,
            },
            model: self.memory_model()?,
            memories: Some(memories.clone()),
        };
        let memory_sections = MemorySections::new(self.documents(), Arc::new(BulletinCache::new(self.database()?)));
        let sections: Arc<dyn PromptSections> = if config.skills.enabled {
            let skills = SkillSections::new(Arc::new(self.skill_catalog()))
                .with_prompt_overrides(workspace.clone())
                .with_context_directories(self.context_skill_directories());
            Arc::new(ChainedSections::new(vec![Arc::new(memory_sections), Arc::new(skills)]))
        } else {
            Arc::new(memory_sections)
        };
        let router = Arc::new(router);
        let store: Arc<dyn DynSessionStore> = Arc::new(self.session_store()?);
        let catalogue = self.tools(&memories)?;
        let contexts: Arc<dyn ContextWorkspaces> =
            Arc::new(squidbot_store::ContextDirectories::new(&self.paths.home, &workspace));
        let delegator = self.delegator(&router, &store, &catalogue, &contexts, channel)?;
        let mut tools = allowed_tools(&self.with_role_sandbox(&catalogue, role.sandbox.as_ref()), &role.tools);
        let mut profile = role.profile;
        let allowed = |tool: &str| role.tools.iter().any(|name| name == tool);
        if allowed(roles::DELEGATE) {
            tools.register(Arc::new(DelegateTool::new(delegator.clone())));
            profile.notes.push(DELEGATION_PROMPT);
            profile.roles = delegator.roles_prompt();
        }
        if allowed(roles::SPAWN) {
            tools.register(Arc::new(SpawnTool::new(delegator.clone(), roles::WORKER)));
            profile.notes.push(SPAWN_PROMPT);
        }
        if allowed(roles::CANCEL_WORKER) {
            tools.register(Arc::new(CancelWorkerTool::new(delegator.clone())));
        }
        let agent =
            Agent::new(router, tools, store, Arc::new(FsWorkspace::new(workspace)), Arc::new(SystemClock), settings);
        Ok(agent
            .with_hooks(self.hooks()?)
            .with_context_workspaces(contexts)
            .with_compaction(compaction)
            .with_sections(sections)
            .with_prompt_profile(profile)
            .with_delegation(delegator)
            .with_people(self.people()?)
            .with_leak_scanner(self.leak_scanner()))
    }

    /// The sub-agent roles (every role but the assistant), each an agent with its model,
    /// its allowlisted tools plus `set_status`, its prompt and timeout, sharing the
    /// assistant's provider router, session store, tool instances (so MCP servers start
    /// once) and contexts' workspaces (a sub-agent working for a person or a group, their
    /// heartbeats included, works in theirs). The worker pool lives as long as the
    /// assistant.
    fn delegator(
        &self,
        router: &Arc<Router>,
        store: &Arc<dyn DynSessionStore>,
        catalogue: &ToolRegistry,
        contexts: &Arc<dyn ContextWorkspaces>,
        channel: &str,
    ) -> Result<Arc<Delegator>> {
        let config = self.config();
        let workspace = self.workspace();
        let files = Arc::new(FsWorkspace::new(workspace.clone()));
        let leaks = self.leak_scanner();
        let pool = Arc::new(WorkerPool::new());
        let people = self.people()?;
        let hooks = self.hooks()?;
        let mut delegator = Delegator::new(pool.clone(), crate::agents::max_workers(config));
        let runtime = runtime_info(&workspace, format!("{channel} (delegated)"));
        for name in crate::agents::names(config).into_iter().filter(|name| name != ASSISTANT_ROLE) {
            let model = config
                .agents
                .get(&name)
                .and_then(|agent| agent.model.clone())
                .unwrap_or_else(|| config.llm.model.clone());
            let role = crate::agents::resolve(config, &name, &workspace)?;
            let mut tools = allowed_tools(&self.with_role_sandbox(catalogue, role.sandbox.as_ref()), &role.tools);
            tools.register(Arc::new(SetStatusTool::new(pool.clone())));
            if role.tools.iter().any(|tool| tool == roles::SEND) {
                // A sub-agent sends as itself (`(CODER #1):`), not with the assistant's tool.
                let send = squidbot_tools::SendTool::for_workers(self.bus()?, pool.clone());
                tools.register(Arc::new(send.with_leak_scanner(leaks.clone())));
            }
            tracing::debug!(role = %name, tools = ?tools, "sub-agent role");
            let settings = AgentSettings {
                context_window: router.context_window(&model).unwrap_or(config.llm.context_window),
                model,
                max_turns: role.max_turns,
                max_tokens: config.llm.max_tokens,
                temperature: config.llm.temperature,
                stream: false,
                workspace: workspace.clone(),
                runtime: runtime.clone(),
                context: OWNER_CONTEXT.to_owned(),
            };
            let agent =
                Agent::new(router.clone(), tools, store.clone(), files.clone(), Arc::new(SystemClock), settings)
                    .with_context_workspaces(contexts.clone())
                    .with_prompt_profile(role.profile)
                    .with_people(people.clone())
                    .with_leak_scanner(leaks.clone())
                    .with_hooks(hooks.clone());
            let summary = roles::summary(&name);
            delegator = delegator.with_role(name, RoleAgent { agent: Arc::new(agent), timeout: role.timeout, summary });
        }
        Ok(Arc::new(delegator))
    }
}

/// The tools of `catalogue` an allowlist admits (`mcp` admits every MCP tool). Without
/// an MCP entry the MCP servers are left out altogether, so they never start for it.
fn allowed_tools(catalogue: &ToolRegistry, names: &[String]) -> ToolRegistry {
    let wants_mcp = names.iter().any(|name| name == roles::MCP_TOOLS || name.contains("__"));
    let names = names.to_vec();
    let filter: ToolFilter = Arc::new(move |tool: &str| roles::allows(&names, tool));
    if wants_mcp { catalogue.filtered(filter) } else { catalogue.without_sources().filtered(filter) }
}

/// Today's date in the local zone.
pub fn today() -> String {
    jiff::Zoned::now().date().to_string()
}

/// What the prompt's runtime line tells the model about where it runs.
fn runtime_info(workspace: &std::path::Path, channel: String) -> RuntimeInfo {
    RuntimeInfo {
        name: assistant_name(workspace),
        workspace: workspace.display().to_string(),
        date: today(),
        os: std::env::consts::OS.to_owned(),
        model: String::new(),
        channel,
    }
}

/// The `Name:` line of IDENTITY.md, else "Squid".
fn assistant_name(workspace: &std::path::Path) -> String {
    std::fs::read_to_string(workspace.join("IDENTITY.md"))
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                line.trim().strip_prefix("Name:").map(|name| name.trim().to_owned()).filter(|name| !name.is_empty())
            })
        })
        .unwrap_or_else(|| "Squid".to_owned())
}
