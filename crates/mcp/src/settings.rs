//! `[mcp.servers.<name>]` checked and turned into what a server needs to start: the
//! transport, the allowlist and the timeouts. Every problem names its config key.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use squidbot_types::config::{McpConfig, McpServerConfig};

use crate::environment;

/// Longest server name; leaves room for the tool's own name within 64 characters.
pub const MAX_SERVER_NAME_CHARS: usize = 32;

/// Separator between the server name and the tool name in the names the model sees.
pub const NAME_SEPARATOR: &str = "__";

/// Headers the MCP transport sets itself and configuration may not override.
const RESERVED_HEADERS: [&str; 5] =
    ["accept", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id"];

/// One configuration problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfigIssue {
    /// Dotted key, such as `mcp.servers.files.env.OPENAI_API_KEY`.
    pub key: String,
    /// What is wrong.
    pub problem: String,
}

impl fmt::Display for McpConfigIssue {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.key, self.problem)
    }
}

/// How squidbot reaches a server.
#[derive(Debug, Clone)]
pub enum Transport {
    /// A child process speaking JSON-RPC over stdin and stdout.
    Stdio {
        /// Program to run.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Configured variables (already checked), added to the safe set.
        env: BTreeMap<String, String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: Vec<(HeaderName, HeaderValue)>,
    },
}

impl Transport {
    /// `stdio` or `http`, as `squidbot status` shows it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
        }
    }

    /// The command line or URL, for status output (header values never appear).
    pub fn target(&self) -> String {
        match self {
            Self::Stdio { command, args, .. } => {
                std::iter::once(command.as_str()).chain(args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
            }
            Self::Http { url, .. } => url.clone(),
        }
    }
}

/// A checked server configuration.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Name from `[mcp.servers.<name>]`.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// Tools the model may use; empty means all.
    pub allow: BTreeSet<String>,
    /// Limit of one call.
    pub call_timeout: Duration,
    /// Limit of starting and listing tools.
    pub startup_timeout: Duration,
    /// False keeps the server unused.
    pub enabled: bool,
}

/// Checks every server of `[mcp]`, returning the settings or every problem found.
pub fn check(config: &McpConfig) -> Result<Vec<ServerSettings>, Vec<McpConfigIssue>> {
    let mut servers = Vec::new();
    let mut issues = Vec::new();
    for (name, server) in &config.servers {
        match ServerSettings::from_config(name, server) {
            Ok(settings) => servers.push(settings),
            Err(mut found) => issues.append(&mut found),
        }
    }
    if issues.is_empty() { Ok(servers) } else { Err(issues) }
}

/// True for names made of `[a-z0-9_-]`, at most [`MAX_SERVER_NAME_CHARS`] long, without `__`.
pub fn is_valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER_NAME_CHARS
        && name.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_' || byte == b'-')
        && !name.contains(NAME_SEPARATOR)
}

impl ServerSettings {
    /// Checks one `[mcp.servers.<name>]` table.
    pub fn from_config(name: &str, config: &McpServerConfig) -> Result<Self, Vec<McpConfigIssue>> {
        let prefix = format!("mcp.servers.{name}");
        let mut issues = Vec::new();
        let mut issue = |key: &str, problem: String| {
            let key = if key.is_empty() { prefix.clone() } else { format!("{prefix}.{key}") };
            issues.push(McpConfigIssue { key, problem });
        };
        if !is_valid_server_name(name) {
            issue(
                "",
                format!(
                    "server names use only a-z, 0-9, `_` and `-`, at most {MAX_SERVER_NAME_CHARS} characters, and never `__`"
                ),
            );
        }
        if config.timeout_secs == 0 {
            issue("timeout_secs", "must be at least 1".into());
        }
        if config.startup_timeout_secs == 0 {
            issue("startup_timeout_secs", "must be at least 1".into());
        }
        for (index, tool) in config.allow.iter().enumerate() {
            if tool.trim().is_empty() {
                issue(&format!("allow[{index}]"), "is empty".into());
            }
        }
        let transport = match (&config.command, &config.url) {
            (Some(command), None) => {
                if command.trim().is_empty() {
                    issue("command", "is empty".into());
                }
                if !config.headers.is_empty() {
                    issue("headers", "only applies to `url` servers; stdio servers take `env`".into());
                }
                for variable in config.env.keys() {
                    if let Some(reason) = environment::refusal(variable) {
                        issue(&format!("env.{variable}"), format!("refused: {variable} {reason}"));
                    }
                }
                Some(Transport::Stdio { command: command.clone(), args: config.args.clone(), env: config.env.clone() })
            }
            (None, Some(url)) => {
                if !config.args.is_empty() || !config.env.is_empty() {
                    issue("url", "`args` and `env` only apply to `command` servers".into());
                }
                match reqwest_rmcp::Url::parse(url) {
                    Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => {}
                    Ok(_) => issue("url", format!("{url:?} is not an http:// or https:// URL")),
                    Err(error) => issue("url", format!("{url:?} is not a URL: {error}")),
                }
                let mut headers = Vec::new();
                for (header, value) in &config.headers {
                    let key = format!("headers.{header}");
                    match (HeaderName::from_bytes(header.as_bytes()), HeaderValue::from_str(value.expose())) {
                        (Ok(header_name), Ok(mut header_value)) => {
                            if RESERVED_HEADERS.contains(&header_name.as_str()) {
                                issue(&key, "is set by the MCP transport itself".into());
                            }
                            header_value.set_sensitive(true);
                            headers.push((header_name, header_value));
                        }
                        (Err(_), _) => issue(&key, "is not a valid HTTP header name".into()),
                        (_, Err(_)) => issue(&key, "has a value that can't be sent in an HTTP header".into()),
                    }
                }
                Some(Transport::Http { url: url.clone(), headers })
            }
            (Some(_), Some(_)) => {
                issue("", "set either `command` (stdio) or `url` (streamable HTTP), not both".into());
                None
            }
            (None, None) => {
                issue("", "set `command` (stdio server) or `url` (streamable HTTP server)".into());
                None
            }
        };
        match transport {
            Some(transport) if issues.is_empty() => Ok(Self {
                name: name.to_owned(),
                transport,
                allow: config.allow.iter().map(|tool| tool.trim().to_owned()).collect(),
                call_timeout: Duration::from_secs(config.timeout_secs),
                startup_timeout: Duration::from_secs(config.startup_timeout_secs),
                enabled: config.enabled,
            }),
            _ => Err(issues),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squidbot_types::Secret;

    fn stdio(command: &str) -> McpServerConfig {
        McpServerConfig { command: Some(command.to_owned()), ..McpServerConfig::default() }
    }

    #[test]
    fn server_names_are_checked() {
        for name in ["files", "my-server", "a_1"] {
            assert!(is_valid_server_name(name), "{name}");
        }
        for name in ["", "Files", "a__b", "with space", "dots.no", &"x".repeat(33)] {
            assert!(!is_valid_server_name(name), "{name}");
        }
        let issues = ServerSettings::from_config("bad__name", &stdio("npx")).unwrap_err();
        assert_eq!(issues[0].key, "mcp.servers.bad__name");
    }

    #[test]
    fn secrets_in_env_are_a_config_error() {
        let mut config = stdio("npx");
        config.env.insert("OPENAI_API_KEY".into(), "sk-x".into());
        config.env.insert("LD_PRELOAD".into(), "/tmp/x.so".into());
        config.env.insert("ROOT".into(), "/srv".into());
        let issues = ServerSettings::from_config("files", &config).unwrap_err();
        let keys: Vec<&str> = issues.iter().map(|issue| issue.key.as_str()).collect();
        assert_eq!(keys, ["mcp.servers.files.env.LD_PRELOAD", "mcp.servers.files.env.OPENAI_API_KEY"]);
        assert!(issues[1].to_string().contains("looks like a credential"), "{}", issues[1]);
    }

    #[test]
    fn exactly_one_transport() {
        let both = McpServerConfig { url: Some("http://127.0.0.1:1/mcp".into()), ..stdio("npx") };
        assert!(ServerSettings::from_config("x", &both).unwrap_err()[0].problem.contains("not both"));
        assert!(ServerSettings::from_config("x", &McpServerConfig::default()).is_err());
        let ftp = McpServerConfig { url: Some("ftp://example.invalid/".into()), ..McpServerConfig::default() };
        assert_eq!(ServerSettings::from_config("x", &ftp).unwrap_err()[0].key, "mcp.servers.x.url");
    }

    #[test]
    fn http_headers_are_checked_and_kept_secret() {
        let mut config =
            McpServerConfig { url: Some("https://mcp.example.invalid/mcp".into()), ..McpServerConfig::default() };
        config.headers.insert("Authorization".into(), Secret::new("Bearer abc"));
        let settings = ServerSettings::from_config("remote", &config).unwrap();
        assert_eq!(settings.transport.kind(), "http");
        let Transport::Http { headers, .. } = &settings.transport else { panic!("http") };
        assert!(headers[0].1.is_sensitive());
        config.headers.insert("Mcp-Session-Id".into(), Secret::new("x"));
        let issues = ServerSettings::from_config("remote", &config).unwrap_err();
        assert_eq!(issues[0].key, "mcp.servers.remote.headers.Mcp-Session-Id");
    }

    #[test]
    fn zero_timeouts_are_refused() {
        let config = McpServerConfig { timeout_secs: 0, startup_timeout_secs: 0, ..stdio("npx") };
        assert_eq!(ServerSettings::from_config("x", &config).unwrap_err().len(), 2);
    }
}
