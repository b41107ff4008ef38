//! Opening a connection to one server: spawning the child process (own process group,
//! filtered environment, stderr to the log) or preparing the HTTP client, then the MCP
//! handshake through rmcp.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use squidbot_core::leaks::LeakScanner;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio_util::task::AbortOnDropHandle;

use crate::environment::server_environment;
use crate::settings::{ServerSettings, Transport};

/// Longest stderr line logged; servers that dump megabytes on one line are cut.
const MAX_STDERR_LINE: usize = 4_096;

/// How long a TCP connection to an HTTP server may take to open.
const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Receives what the server sends on its own; squidbot only cares about tool list changes.
pub struct Handler {
    server: String,
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("squidbot", env!("CARGO_PKG_VERSION")))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "MCP server's tool list changed");
        self.tools_changed.store(true, Ordering::Release);
    }
}

/// A live connection. Dropping it closes the session and kills the process group.
pub struct Connection {
    /// The rmcp service; its peer sends requests.
    pub service: RunningService<RoleClient, Handler>,
    /// Set when the server announces a new tool list.
    pub tools_changed: Arc<AtomicBool>,
    /// Forwards the child's stderr to the log while the connection lives.
    _stderr: Option<AbortOnDropHandle<()>>,
}

impl Connection {
    /// True once the transport has closed (the process exited, the HTTP session ended).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }
}

/// Why a connection could not be opened.
pub type ConnectError = String;

/// Starts the server and performs the MCP handshake; a stdio server's inherited variables
/// carry none of the secrets `withheld` knows.
pub async fn connect(settings: &ServerSettings, withheld: &LeakScanner) -> Result<Connection, ConnectError> {
    let tools_changed = Arc::new(AtomicBool::new(false));
    let handler = Handler { server: settings.name.clone(), tools_changed: tools_changed.clone() };
    let (service, stderr) = match &settings.transport {
        Transport::Stdio { command, args, env } => {
            let mut process = tokio::process::Command::new(command);
            process.args(args).env_clear().envs(server_environment(command, env, std::env::vars_os(), withheld));
            let mut wrapped = CommandWrap::from(process);
            // Its own process group, so a server started through a wrapper (npx, a shell)
            // dies with all its children.
            wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
            let (transport, stderr) = TokioChildProcess::builder(wrapped)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|error| format!("can't start {command}: {error}"))?;
            let forwarder = stderr.map(|stderr| forward_stderr(settings.name.clone(), stderr));
            let service = handler.serve(transport).await.map_err(|error| short(&error.to_string()))?;
            (service, forwarder)
        }
        Transport::Http { url, headers } => {
            let client = http_client()?;
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(headers.iter().cloned().collect());
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let service = handler.serve(transport).await.map_err(|error| short(&error.to_string()))?;
            (service, None)
        }
    };
    Ok(Connection { service, tools_changed, _stderr: stderr })
}

/// An HTTP client with rustls on ring and the bundled web PKI roots; redirects are not
/// followed, so headers never travel to a host the configuration did not name.
fn http_client() -> Result<reqwest_rmcp::Client, ConnectError> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("can't set up TLS: {error}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest_rmcp::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest_rmcp::redirect::Policy::none())
        .connect_timeout(HTTP_CONNECT_TIMEOUT)
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|error| format!("can't set up the HTTP client: {error}"))
}

/// Logs each stderr line of the server at debug level until the pipe closes.
fn forward_stderr(server: String, stderr: ChildStderr) -> AbortOnDropHandle<()> {
    AbortOnDropHandle::new(tokio::spawn(async move {
        let mut lines = BufReader::new(stderr);
        let mut line = Vec::new();
        loop {
            line.clear();
            // A line longer than the limit is logged in pieces rather than buffered whole.
            match (&mut lines).take(MAX_STDERR_LINE as u64).read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line);
                    tracing::debug!(server = %server, "stderr: {}", text.trim_end());
                }
            }
        }
    }))
}

/// A failure message short enough for a log line and a tool result.
pub fn short(text: &str) -> String {
    const LIMIT: usize = 300;
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
