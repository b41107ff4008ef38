//! Builds the running pieces from configuration: provider router, tools, session
//! store, workspace and the assistant agent.

use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use squidbot_core::agent::{Agent, AgentSettings};
use squidbot_core::clock::SystemClock;
use squidbot_core::context::RuntimeInfo;
use squidbot_core::tool::ToolRegistry;
use squidbot_llm::Router;
use squidbot_store::{FsWorkspace, JsonlSessionStore};
use squidbot_types::config::{Config, DEFAULT_MAX_TURNS};

use crate::config::{self as config_loader, LoadedConfig};
use crate::logging;
use crate::paths::Paths;

/// Role name of the agent that talks to the user.
pub const ASSISTANT_ROLE: &str = "assistant";

/// Context id of the single owner.
pub const OWNER_CONTEXT: &str = "owner";

/// Everything a command needs, loaded once.
#[derive(Debug)]
pub struct Environment {
    /// Resolved paths.
    pub paths: Paths,
    /// Loaded configuration.
    pub loaded: LoadedConfig,
}

impl Environment {
    /// Resolves paths and loads the config; logging starts here with secrets scrubbed.
    pub fn load() -> Result<Self> {
        let paths = Paths::from_env()?;
        let loaded = config_loader::load(&paths.config)?;
        logging::init(&loaded.config.logging, config_loader::secret_values(&loaded.config));
        Ok(Self { paths, loaded })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.loaded.config
    }

    /// The workspace directory.
    pub fn workspace(&self) -> std::path::PathBuf {
        self.paths.workspace(self.config().workspace.path.as_deref())
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

    /// The tool set of the assistant.
    pub fn tools(&self) -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        for tool in squidbot_tools::builtin_tools(&self.config().tools) {
            registry.register(tool);
        }
        registry
    }

    /// Wires the assistant agent.
    pub fn assistant(&self, override_model: Option<&str>, stream: bool, channel: &str) -> Result<Agent> {
        let config = self.config();
        let model = self.assistant_model(override_model)?;
        let router = self.router()?;
        // Fail before anything is written to the session: unknown provider, missing key.
        router.check_model(&model)?;
        let context_window = router.context_window(&model).unwrap_or(config.llm.context_window);
        let workspace = self.workspace();
        std::fs::create_dir_all(&workspace)
            .with_context(|| format!("can't create the workspace {}", workspace.display()))?;
        let max_turns =
            config.agents.get(ASSISTANT_ROLE).and_then(|agent| agent.max_turns).unwrap_or(DEFAULT_MAX_TURNS);
        let settings = AgentSettings {
            model,
            max_turns,
            max_tokens: config.llm.max_tokens,
            temperature: config.llm.temperature,
            context_window,
            stream,
            workspace: workspace.clone(),
            runtime: RuntimeInfo {
                name: assistant_name(&workspace),
                workspace: workspace.display().to_string(),
                date: today(),
                os: std::env::consts::OS.to_owned(),
                model: String::new(),
                channel: channel.to_owned(),
            },
            context: OWNER_CONTEXT.to_owned(),
        };
        Ok(Agent::new(
            Arc::new(router),
            self.tools(),
            Arc::new(JsonlSessionStore::new(self.paths.sessions())),
            Arc::new(FsWorkspace::new(workspace)),
            Arc::new(SystemClock),
            settings,
        ))
    }
}

/// Today's date in the local zone.
pub fn today() -> String {
    jiff::Zoned::now().date().to_string()
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
