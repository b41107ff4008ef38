//! Command-line interface definition.

use clap::{Args, Parser, Subcommand};

/// squidbot: a self-hosted AI assistant gateway.
#[derive(Debug, Parser)]
#[command(name = "squidbot", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Set up config.toml and a default workspace.
    Onboard(OnboardArgs),
    /// Chat with the assistant (REPL), or send one message with -m.
    Agent(AgentArgs),
    /// Show configuration, providers, workspace and prompt size.
    Status(JsonFlag),
    /// Inspect the configuration.
    Config {
        /// Which config action.
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Inspect sessions.
    Sessions {
        /// Which sessions action.
        #[command(subcommand)]
        action: SessionsAction,
    },
}

/// `--json` for listings.
#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `squidbot onboard`.
#[derive(Debug, Args)]
pub struct OnboardArgs {
    /// Take every answer from flags; never prompt.
    #[arg(long)]
    pub non_interactive: bool,
    /// Provider name (a preset such as openai, anthropic, openrouter, ollama, or your own name).
    #[arg(long)]
    pub provider: Option<String>,
    /// Wire protocol: openai or anthropic (defaults to the preset's).
    #[arg(long)]
    pub kind: Option<String>,
    /// Base URL of the API (defaults to the preset's).
    #[arg(long)]
    pub api_base: Option<String>,
    /// Environment variable holding the API key.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Model id, `model` or `provider/model`.
    #[arg(long)]
    pub model: Option<String>,
    /// Replace an existing config.toml.
    #[arg(long)]
    pub force: bool,
}

/// `squidbot agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Send one message, print the reply, exit.
    #[arg(short, long)]
    pub message: Option<String>,
    /// Session key.
    #[arg(long, default_value = "cli:local")]
    pub session: String,
    /// Model to use instead of the configured one, `provider/model`.
    #[arg(long)]
    pub model: Option<String>,
}

/// `squidbot config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Print the effective configuration (secrets redacted).
    Show,
    /// Print the config file path.
    Path,
    /// Check the configuration and report every problem.
    Validate,
}

/// `squidbot sessions …`.
#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// List sessions.
    List(JsonFlag),
    /// Print a session's active branch.
    Show {
        /// Session key.
        key: String,
        /// Print the entries as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's whole tree.
    Tree {
        /// Session key.
        key: String,
    },
}
