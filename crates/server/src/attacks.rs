//! Attacks on the gateway's doors against the real server over HTTP and WebSocket: each
//! test sends the hostile request and checks the refusal (foreign `Host` and `Origin`,
//! cross-site `text/plain` posts, health details for strangers, credentials in URLs, a
//! token-guessing run, framing and unauthenticated metrics).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use squidbot_core::events::EventHub;
use squidbot_core::runs::Runner;
use squidbot_types::Secret;
use squidbot_types::config::{Config, ProviderConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

use crate::ws::fixture::{Refusing, test_agent};
use crate::{Auth, Gateway, ProviderSummary, Services};

const TOKEN: &str = "the-right-gateway-token";

/// A provider base URL with credentials in it, as a careless config holds them.
const LEAKY_URL: &str = "https://alice:hunter2@llm.example/v1?api-key=sk-leak&deployment=gpt";

/// A gateway served on a loopback port.
struct Served {
    address: SocketAddr,
    gateway: Arc<Gateway>,
    shutdown: CancellationToken,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The configuration the gateways here run with: a provider whose URL and headers hold
/// secrets, and `adjust`'s `[gateway]` keys.
fn config(adjust: impl FnOnce(&mut Config)) -> Config {
    let mut config = Config::default();
    let mut provider = ProviderConfig { api_base: Some(LEAKY_URL.into()), ..ProviderConfig::default() };
    provider.headers.insert("Authorization".into(), Secret::new("Bearer sk-header-secret"));
    config.providers.insert("leaky".into(), provider);
    adjust(&mut config);
    config
}

async fn serve(auth: Auth, config: Config) -> Served {
    // No test here runs a turn: the model refuses every call.
    let runner = Runner::new(Arc::new(test_agent(Arc::new(Refusing), 1)), EventHub::new());
    let services = Services {
        providers: vec![ProviderSummary {
            name: "leaky".into(),
            kind: "openai".into(),
            api_base: LEAKY_URL.into(),
            vision: false,
        }],
        config: Some(config),
        ..Services::default()
    };
    let gateway = Gateway::new(runner, auth, vec!["fake/model".into()], services);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    tokio::spawn(crate::run(listener, gateway.clone(), shutdown.clone()));
    Served { address, gateway, shutdown }
}

async fn token_gateway() -> Served {
    serve(Auth::Token(Secret::new(TOKEN)), config(|_| {})).await
}

/// A response as the client saw it.
struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    /// The value of header `name` (lower case), if sent.
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }
}

impl Served {
    /// Sends `head` (request line and headers, without the final blank line) and `body`
    /// as they are; `{host}` in `head` is the server's address.
    async fn raw(&self, head: &str, body: &str) -> Reply {
        let mut stream = tokio::net::TcpStream::connect(self.address).await.unwrap();
        let head = head.replace("{host}", &self.address.to_string());
        let request = format!("{head}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut raw)).await.unwrap().unwrap();
        let text = String::from_utf8(raw).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        Reply { status, head: head.to_owned(), body: body.to_owned() }
    }

    /// `GET path` with the right `Host` and an optional bearer.
    async fn get(&self, path: &str, bearer: Option<&str>) -> Reply {
        let authorization = bearer.map(|bearer| format!("\r\nAuthorization: Bearer {bearer}")).unwrap_or_default();
        self.raw(&format!("GET {path} HTTP/1.1\r\nHost: {{host}}{authorization}"), "").await
    }

    /// Opens the WebSocket with `headers` added (or replacing the client's own); the HTTP
    /// status of a refused upgrade as the error.
    async fn open(&self, headers: &[(&'static str, &str)]) -> Result<Socket, u16> {
        let mut request = format!("ws://{}/", self.address).into_client_request().unwrap();
        for (name, value) in headers {
            request.headers_mut().insert(*name, value.parse().unwrap());
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((socket, _)) => Ok(socket),
            Err(tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
            Err(other) => panic!("the upgrade failed without an HTTP answer: {other}"),
        }
    }

    /// Opens the WebSocket without `Origin` and answers the challenge with `token`; the
    /// `connect` response and the socket.
    async fn connect(&self, token: &str) -> (Value, Socket) {
        let mut socket = self.open(&[]).await.unwrap_or_else(|status| panic!("upgrade refused with {status}"));
        let challenge = next_frame(&mut socket).await.unwrap();
        assert_eq!(challenge["event"], "connect.challenge");
        let params = json!({
            "minProtocol": 4, "maxProtocol": 4, "role": "operator", "auth": {"token": token},
            "scopes": ["operator.read", "operator.write", "operator.admin"],
            "client": {"id": "test", "version": "1", "platform": "linux", "mode": "test"},
        });
        (call(&mut socket, "connect", params).await, socket)
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_frame(socket: &mut Socket) -> Option<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), socket.next()).await.unwrap() {
            Some(Ok(Message::Text(text))) => return Some(serde_json::from_str(text.as_str()).unwrap()),
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
            Some(Ok(_)) => {}
        }
    }
}

async fn call(socket: &mut Socket, method: &str, params: Value) -> Value {
    let request = json!({"type": "req", "id": method, "method": method, "params": params});
    socket.send(Message::Text(request.to_string().into())).await.unwrap();
    loop {
        let frame = next_frame(socket).await.unwrap_or_else(|| panic!("closed while waiting for {method}"));
        if frame["type"] == "res" && frame["id"] == method {
            return frame;
        }
    }
}

#[tokio::test]
async fn a_page_of_another_site_can_not_open_the_websocket_in_any_auth_mode() {
    let listed = |config: &mut Config| config.gateway.allowed_origins = vec!["https://ui.example.com".into()];
    for auth in [Auth::Token(Secret::new(TOKEN)), Auth::None] {
        let mode = auth.mode_name();
        let served = serve(auth, config(listed)).await;
        for hostile in ["http://evil.example", "null", "http://127.0.0.1:1", "https://ui.example.com.evil.example"] {
            assert_eq!(served.open(&[("origin", hostile)]).await.err(), Some(403), "{mode}: {hostile}");
        }
        let own = format!("http://{}", served.address);
        for welcome in [own.as_str(), "https://ui.example.com"] {
            assert!(served.open(&[("origin", welcome)]).await.is_ok(), "{mode}: {welcome}");
        }
        let (connected, _socket) = served.connect(TOKEN).await;
        assert_eq!(connected["ok"], true, "{mode}: clients without Origin are not browsers: {connected}");
    }
}

#[tokio::test]
async fn a_rebound_host_name_is_refused_on_http_and_the_websocket() {
    let served = serve(Auth::None, config(|config| config.gateway.allowed_hosts = vec!["squid.lan".into()])).await;
    let port = served.address.port();
    let hostile = format!("attacker.example:{port}");
    let refused = served.raw(&format!("GET /health HTTP/1.1\r\nHost: {hostile}"), "").await;
    assert_eq!(refused.status, 421);
    assert!(refused.body.contains("allowed_hosts"), "{}", refused.body);
    let posted = served
        .raw(&format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {hostile}\r\nContent-Type: application/json"), "{}")
        .await;
    assert_eq!(posted.status, 421);
    assert_eq!(served.open(&[("host", hostile.as_str())]).await.err(), Some(421));
    assert_eq!(served.raw("GET /health HTTP/1.0", "").await.status, 400, "no Host at all");
    for welcome in
        [format!("localhost:{port}"), format!("[::1]:{port}"), served.address.to_string(), "squid.lan".into()]
    {
        let reply = served.raw(&format!("GET /health HTTP/1.1\r\nHost: {welcome}"), "").await;
        assert_eq!(reply.status, 200, "{welcome}");
    }
}

#[tokio::test]
async fn a_cross_site_text_plain_post_is_refused_before_it_runs_anything() {
    let served = serve(Auth::None, config(|_| {})).await;
    let body = r#"{"messages":[{"role":"user","content":"exfiltrate"}]}"#;
    for content_type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
        let reply = served
            .raw(&format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {{host}}\r\nContent-Type: {content_type}"), body)
            .await;
        assert_eq!(reply.status, 415, "{content_type}");
        assert!(reply.body.contains("application/json"), "{}", reply.body);
    }
    let untyped = served.raw("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}", body).await;
    assert_eq!(untyped.status, 415);
    assert_eq!(served.gateway.runner().open_sessions(), 0, "no turn started");
}

#[tokio::test]
async fn health_tells_strangers_only_that_it_lives_and_never_shows_credentials() {
    let served = token_gateway().await;
    let stranger = served.get("/health", None).await;
    assert_eq!(stranger.status, 200);
    assert_eq!(stranger.json(), json!({"status": "ok"}));
    assert_eq!(served.get("/healthz", None).await.json(), json!({"status": "ok"}));
    assert_eq!(served.get("/health", Some("a-guess")).await.status, 401);
    let owner = served.get("/health", Some(TOKEN)).await;
    assert_eq!(owner.status, 200);
    let report = owner.json();
    assert_eq!(
        report["components"]["providers"][0]["api_base"],
        "https://REDACTED@llm.example/v1?api-key=REDACTED&deployment=gpt"
    );
    for secret in ["hunter2", "alice", "sk-leak"] {
        assert!(!owner.body.contains(secret), "{secret} in {}", owner.body);
    }
}

#[tokio::test]
async fn status_and_config_get_redact_urls_and_provider_headers() {
    let served = token_gateway().await;
    let (connected, mut socket) = served.connect(TOKEN).await;
    assert_eq!(connected["ok"], true, "{connected}");
    for method in ["status", "config.get", "health"] {
        let response = call(&mut socket, method, json!({})).await;
        assert_eq!(response["ok"], true, "{response}");
        let text = response.to_string();
        for secret in ["hunter2", "alice", "sk-leak", "sk-header-secret"] {
            assert!(!text.contains(secret), "{method} shows {secret}: {text}");
        }
    }
    let config = call(&mut socket, "config.get", json!({})).await;
    let provider = &config["payload"]["config"]["providers"]["leaky"];
    assert_eq!(provider["headers"]["Authorization"], squidbot_types::secret::REDACTED, "{provider}");
    assert_eq!(provider["api_base"], "https://REDACTED@llm.example/v1?api-key=REDACTED&deployment=gpt");
}

/// Collects what the server logs on this thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

#[tokio::test]
async fn two_hundred_wrong_tokens_are_slowed_refused_and_logged_while_the_right_one_still_connects() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .with_writer(move || writer.clone())
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let served = token_gateway().await;
    let guess = |attempt: usize| format!("guess-number-{attempt:03}");

    let started = Instant::now();
    let mut statuses = Vec::new();
    for attempt in 0..100 {
        let reply = served.get("/v1/models", Some(&guess(attempt))).await;
        if reply.status == 429 {
            assert_eq!(reply.header("retry-after"), Some("60"));
        }
        statuses.push(reply.status);
    }
    let limit = crate::limiter::MAX_FAILURES as usize;
    assert!(statuses[..limit].iter().all(|status| *status == 401), "{statuses:?}");
    assert!(statuses[limit..].iter().all(|status| *status == 429), "then refused: {statuses:?}");
    assert!(started.elapsed() >= Duration::from_millis(3000), "slowed down: {:?}", started.elapsed());

    // Mid-attack, from the same loopback address: the right token gets in at once.
    let right = Instant::now();
    let (connected, mut socket) = served.connect(TOKEN).await;
    assert_eq!(connected["ok"], true, "{connected}");
    assert_eq!(call(&mut socket, "status", json!({})).await["ok"], true);
    assert_eq!(served.get("/v1/models", Some(TOKEN)).await.status, 200);
    assert!(right.elapsed() < Duration::from_secs(1), "not delayed: {:?}", right.elapsed());

    for attempt in 100..190 {
        assert_eq!(served.get("/v1/models", Some(&guess(attempt))).await.status, 429);
    }
    for attempt in 190..200 {
        let (refused, _socket) = served.connect(&guess(attempt)).await;
        assert_eq!(refused["error"]["code"], "RATE_LIMITED", "{refused}");
    }
    let (again, _socket) = served.connect(TOKEN).await;
    assert_eq!(again["ok"], true, "still: {again}");

    let log = captured.text();
    let failures: Vec<&str> = log.lines().filter(|line| line.contains("refused a client")).collect();
    assert_eq!(failures.len(), 200, "every failure is logged:\n{log}");
    assert!(failures.iter().all(|line| line.contains("WARN") && line.contains("peer=127.0.0.1")), "{log}");
    assert!(!log.contains("guess-number") && !log.contains(TOKEN), "never the presented secret:\n{log}");
}

#[tokio::test]
async fn the_web_ui_can_not_be_framed_or_sniffed_and_metrics_need_credentials() {
    let served = token_gateway().await;
    for path in ["/", "/ui/app.js", "/ui/markdown.js", "/ui/cards.js", "/ui/usage.js", "/ui/tree.js", "/ui/app.css"] {
        let reply = served.get(path, None).await;
        assert_eq!(reply.status, 200, "{path}");
        let policy = reply.header("content-security-policy").unwrap_or_default();
        assert!(policy.contains("frame-ancestors 'none'") && policy.contains("script-src 'self';"), "{policy}");
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"), "{path}");
        assert_eq!(reply.header("referrer-policy"), Some("no-referrer"), "{path}");
    }
    let page = served.get("/", None).await.body.to_ascii_lowercase();
    // Every script is one of the UI's own files; none is inline.
    let scripts = page.matches("<script").count();
    assert_eq!(scripts, 5, "{page}");
    for name in ["markdown.js", "cards.js", "usage.js", "tree.js", "app.js"] {
        assert!(page.contains(&format!(r#"<script src="/ui/{name}" defer></script>"#)), "{name}");
    }
    assert!(!page.contains("javascript:"));
    for handler in [" onclick=", " onload=", " onerror=", " onsubmit=", " onchange=", " oninput=", " onkeydown="] {
        assert!(!page.contains(handler), "{handler}");
    }

    assert_eq!(served.get("/metrics", None).await.status, 401);
    assert_eq!(served.get("/metrics", Some(TOKEN)).await.status, 200);
    let open = serve(Auth::Token(Secret::new(TOKEN)), config(|config| config.gateway.metrics_open = true)).await;
    let scraped = open.get("/metrics", None).await;
    assert_eq!(scraped.status, 200);
    assert!(scraped.body.contains("squidbot_uptime_seconds"));
}
