//! Command-line interface definition.

use clap::{Args, Parser, Subcommand};

/// squidbot: a self-hosted AI assistant.
///
/// Chat with it in the terminal (`squidbot agent`), or run the gateway (`squidbot
/// gateway`) to reach it from the web UI, Telegram, Discord, Slack, Matrix, email,
/// webhooks, and OpenClaw or OpenAI-API clients. It works with files and a sandboxed
/// shell, remembers what matters, and runs scheduled jobs and heartbeats.
#[derive(Debug, Parser)]
#[command(
    name = "squidbot",
    version,
    propagate_version = true,
    after_help = "Start with `squidbot onboard`, then `squidbot agent`. Files live in ~/.squidbot ($SQUIDBOT_HOME)."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Set up squidbot: pick a provider and model, write config.toml and the workspace
    /// files that shape the assistant.
    Onboard(OnboardArgs),
    /// Chat with the assistant in the terminal, or send one message with -m and print the
    /// reply.
    Agent(AgentArgs),
    /// Run the assistant as a server until Ctrl-C: the web UI, the chat channels,
    /// scheduled jobs and heartbeats, the OpenClaw and OpenAI-compatible APIs, health and
    /// metrics, all on one port.
    Gateway(GatewayArgs),
    /// Show the model, providers and whether their keys are found, the workspace, the
    /// prompt size and memory.
    Status(JsonFlag),
    /// Check the installation (config, database, workspace) and report which sandbox
    /// runs commands and why.
    Doctor(JsonFlag),
    /// Show, locate or check the configuration.
    Config {
        /// Which config action.
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// List, read and archive conversations (sessions).
    Sessions {
        /// Which sessions action.
        #[command(subcommand)]
        action: SessionsAction,
    },
    /// See and change what the assistant remembers: memories and memory.md.
    Memory {
        /// Which memory action.
        #[command(subcommand)]
        action: MemoryAction,
    },
    /// Run squidbot's housekeeping now: expire memories, archive idle sessions, delete old
    /// job runs, refresh the memory bulletin, embed memories that have no vector. The
    /// gateway and the REPL run it on their own.
    Maintenance,
    /// Send a message to an agent over the agent bus: through the running gateway, or
    /// into the target's trigger file when no gateway answers.
    Send(SendArgs),
    /// List or stop the assistant's sub-agents in the running gateway.
    Workers {
        /// Which workers action.
        #[command(subcommand)]
        action: WorkersAction,
    },
    /// Add, list, pause, resume, remove or run scheduled jobs; works whether or not a
    /// gateway runs.
    Cron {
        /// Which cron action.
        #[command(subcommand)]
        action: CronAction,
    },
    /// List, inspect and install skills.
    Skills {
        /// Which skills action.
        #[command(subcommand)]
        action: SkillsAction,
    },
    /// Decide who may talk to the assistant on the chat channels: approved senders and
    /// pairing codes waiting for approval.
    Users {
        /// Which users action.
        #[command(subcommand)]
        action: UsersAction,
    },
}

/// `squidbot users …`.
#[derive(Debug, Subcommand)]
pub enum UsersAction {
    /// List approved senders and the pairing codes waiting for approval.
    List(JsonFlag),
    /// Let in the sender a pairing code was given to (the code works once, within an hour).
    Approve {
        /// The code the sender received, e.g. `K7MPQ2`.
        code: String,
    },
    /// Withdraw an approval.
    Revoke {
        /// `CHANNEL:SENDER_ID`, as `squidbot users list` shows it.
        sender: String,
    },
}

/// `squidbot workers …`.
#[derive(Debug, Subcommand)]
pub enum WorkersAction {
    /// List sub-agents: id, role, state, priority, age, session and last status line.
    List(JsonFlag),
    /// Stop a running sub-agent; its owner session gets the cancelled result.
    Cancel {
        /// The worker's id (from `squidbot workers list`).
        id: String,
    },
}

/// `squidbot cron …`.
#[derive(Debug, Subcommand)]
pub enum CronAction {
    /// List jobs: id, name, schedule, timezone, next run, last run, status, failures.
    List(JsonFlag),
    /// Add a job: a message the assistant runs on a schedule, its reply delivered to you.
    Add(CronAddArgs),
    /// Delete a job.
    Remove {
        /// The job's id (from `squidbot cron list`).
        id: String,
    },
    /// Stop a job from running until it is resumed.
    Pause {
        /// The job's id.
        id: String,
    },
    /// Schedule a paused job again, counting its next run from now.
    Resume {
        /// The job's id.
        id: String,
    },
    /// Run a job now, whatever its schedule: inside the running gateway (its reply goes
    /// where the job's replies go), or here when no gateway runs (the reply is printed).
    Run {
        /// The job's id.
        id: String,
    },
}

/// `squidbot cron add`.
#[derive(Debug, Args)]
pub struct CronAddArgs {
    /// A name for people.
    #[arg(long)]
    pub name: String,
    /// When: `"0 9 * * 1"` (cron), `"every 5m"`, `"at 2026-12-01T09:00:00Z"`,
    /// `"daily 09:00"` or `"weekly mon 09:00"`.
    #[arg(long)]
    pub schedule: String,
    /// The prompt the job's turn starts with.
    #[arg(long)]
    pub message: String,
    /// Where replies go (default: the preferred or last active channel).
    #[arg(long)]
    pub channel: Option<String>,
    /// IANA time zone the schedule's wall-clock times are read in (default `scheduler.timezone`,
    /// which is the machine's zone unless set).
    #[arg(long)]
    pub tz: Option<String>,
    /// Print the job as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `squidbot skills …`.
#[derive(Debug, Subcommand)]
pub enum SkillsAction {
    /// List skills: name, source, availability, missing requirements, location.
    List(JsonFlag),
    /// Print a skill's frontmatter summary and its body.
    Show {
        /// The skill's name.
        name: String,
    },
    /// Install a skill into $SQUIDBOT_HOME/skills from a local directory, a local git
    /// repository or a git URL (`file://`, `https://`, `ssh://`, `git://`, `git@host:path`).
    Install {
        /// Where the skill is.
        source: String,
        /// Replace an installed skill of the same name.
        #[arg(long)]
        force: bool,
    },
}

/// `squidbot memory …`.
#[derive(Debug, Subcommand)]
pub enum MemoryAction {
    /// List memories, most recently updated first.
    List {
        /// Only this type (fact, preference, decision, identity, event, observation, todo).
        #[arg(long = "type")]
        kind: Option<String>,
        /// Maximum rows.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Find memories for a query (full-text, plus vectors when memory.embedding_model is
    /// set).
    Search {
        /// What to look for.
        query: String,
        /// Maximum results.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Save a memory.
    Add {
        /// What to remember.
        text: String,
        /// Its type.
        #[arg(long = "type", default_value = "fact")]
        kind: String,
        /// 0 to 1.
        #[arg(long, default_value_t = 0.5)]
        importance: f32,
        /// Comma-separated tags.
        #[arg(long, value_delimiter = ',')]
        tags: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Import memories from a JSON Lines file: one object per line with `content` and
    /// optional `type`, `importance`, `tags`. Exact rewordings of stored memories merge.
    Import {
        /// The file (`-` reads standard input).
        file: String,
    },
    /// Delete a memory.
    Rm {
        /// Its id.
        id: i64,
    },
    /// Print memory.md.
    Doc {
        /// Print JSON with the path and the text.
        #[arg(long)]
        json: bool,
    },
}

/// `squidbot send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Who gets it: a role (assistant, worker, researcher, coder, memory, heartbeat, or
    /// one of [agents.*]), user, an alias such as main, or a running agent's name.
    pub target: String,
    /// The text; it arrives as `(USER #N): [TAG] text`.
    pub message: String,
    /// Priority tag: ack ([ACK REQUIRED]), urgent ([URGENT], interrupts the target's
    /// turn), fyi ([FYI]) or task ([TASK]).
    #[arg(long, value_parser = ["ack", "urgent", "fyi", "task", "normal"])]
    pub priority: Option<String>,
    /// Print the delivery result as JSON.
    #[arg(long)]
    pub json: bool,
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

/// `squidbot gateway`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GatewayArgs {
    /// A gateway helper instead of running the server.
    #[command(subcommand)]
    pub action: Option<GatewayAction>,
    /// Address to listen on (default: gateway.bind).
    #[arg(long)]
    pub bind: Option<String>,
    /// Port to listen on, 0 for any free one (default: gateway.port).
    #[arg(long)]
    pub port: Option<u16>,
}

/// `squidbot gateway …` helpers.
#[derive(Debug, Subcommand)]
pub enum GatewayAction {
    /// Read a password from standard input (one line) and print its argon2id hash for
    /// gateway.auth.password_hash.
    HashPassword,
}

/// `squidbot agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Send one message, print the reply, exit.
    #[arg(short, long)]
    pub message: Option<String>,
    /// The conversation to continue (its session key).
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
    /// List sessions, most recently active first.
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
    /// Extract memories from a session and archive it (it resumes when used again).
    Archive {
        /// Session key.
        key: String,
    },
}
