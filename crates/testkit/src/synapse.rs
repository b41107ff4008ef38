//! A real Synapse homeserver for the tests: generated config in a temporary directory
//! (free port, SQLite, no federation, rate limits out of the way), started once,
//! users registered through the shared-secret admin API, killed on drop.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a test server that fails loudly on any setup problem")]

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha1::{Digest, Sha1};

/// The variable naming the Python interpreter of the Synapse virtual environment.
const PYTHON_VARIABLE: &str = "SQUIDBOT_TEST_SYNAPSE_PYTHON";
const SHARED_SECRET: &str = "squidbot-test-registration-secret";

/// A running Synapse.
pub struct Synapse {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    directory: tempfile::TempDir,
    http: reqwest::Client,
}

/// A registered account.
#[derive(Debug, Clone)]
pub struct Account {
    pub user_id: String,
    pub password: String,
    pub access_token: String,
}

impl Synapse {
    /// Generates a config and starts Synapse, waiting until it answers.
    pub async fn start() -> Synapse {
        let python = std::env::var(PYTHON_VARIABLE).unwrap_or_else(|_unset| {
            panic!(
                "{PYTHON_VARIABLE} is not set: the Matrix tests run against a real Synapse. \
                 Run scripts/install-synapse and set {PYTHON_VARIABLE}=<repo>/target/test-synapse/bin/python"
            )
        });
        let directory = tempfile::tempdir().unwrap();
        let config = directory.path().join("homeserver.yaml");
        let generated = Command::new(&python)
            .current_dir(directory.path())
            .args(["-m", "synapse.app.homeserver", "--server-name", "localhost", "--config-path"])
            .arg(&config)
            .args(["--generate-config", "--report-stats=no"])
            .output()
            .unwrap_or_else(|error| panic!("can't run {python} ({PYTHON_VARIABLE}): {error}"));
        assert!(
            generated.status.success(),
            "can't generate the Synapse config: {}",
            String::from_utf8_lossy(&generated.stderr)
        );
        let port = free_port();
        write_config(&config, directory.path(), port);
        let log = std::fs::File::create(directory.path().join("synapse.out")).unwrap();
        let child = Command::new(&python)
            .current_dir(directory.path())
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut synapse =
            Synapse { child, base_url: format!("http://127.0.0.1:{port}"), directory, http: reqwest::Client::new() };
        synapse.wait_until_ready().await;
        synapse
    }

    async fn wait_until_ready(&mut self) {
        let started = Instant::now();
        let versions = format!("{}/_matrix/client/versions", self.base_url);
        loop {
            if let Ok(response) = self.http.get(&versions).send().await
                && response.status().is_success()
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("Synapse exited with {status} before answering:\n{}", self.log_tail());
            }
            assert!(started.elapsed() < Duration::from_secs(60), "Synapse didn't answer in 60 s:\n{}", self.log_tail());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(self.directory.path().join("synapse.out")) {
            file.read_to_string(&mut text).unwrap_or_default();
        }
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Registers `localpart` (not an admin) and returns its account with a token.
    pub async fn register(&self, localpart: &str) -> Account {
        let url = format!("{}/_synapse/admin/v1/register", self.base_url);
        let nonce: Value = self.http.get(&url).send().await.unwrap().json().await.unwrap();
        let nonce = nonce["nonce"].as_str().unwrap().to_owned();
        let password = format!("{localpart}-password");
        let signed = [nonce.as_bytes(), localpart.as_bytes(), password.as_bytes(), b"notadmin"].join(&0u8);
        let mac = hex(&hmac_sha1(SHARED_SECRET.as_bytes(), &signed));
        let body = json!({"nonce": nonce, "username": localpart, "password": password, "admin": false, "mac": mac});
        let response = self.http.post(&url).json(&body).send().await.unwrap();
        let status = response.status();
        let answer: Value = response.json().await.unwrap();
        assert!(status.is_success(), "can't register {localpart}: {status} {answer}");
        Account {
            user_id: answer["user_id"].as_str().unwrap().to_owned(),
            password,
            access_token: answer["access_token"].as_str().unwrap().to_owned(),
        }
    }

    /// Logs `account` in again: a new device with a new access token.
    pub async fn log_in(&self, account: &Account) -> Account {
        let url = format!("{}/_matrix/client/v3/login", self.base_url);
        let body = json!({"type": "m.login.password", "identifier": {"type": "m.id.user", "user": account.user_id},
                          "password": account.password});
        let answer: Value = self.http.post(&url).json(&body).send().await.unwrap().json().await.unwrap();
        let access_token =
            answer["access_token"].as_str().unwrap_or_else(|| panic!("can't log in: {answer}")).to_owned();
        Account { access_token, ..account.clone() }
    }
}

impl Drop for Synapse {
    fn drop(&mut self) {
        if let Err(error) = self.child.kill() {
            eprintln!("can't stop Synapse: {error}");
        }
        if let Err(error) = self.child.wait() {
            eprintln!("can't reap Synapse: {error}");
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Keeps the generated secrets and signing key, replaces what the tests need.
fn write_config(config: &Path, directory: &Path, port: u16) {
    const REPLACED: [&str; 8] = [
        "listeners",
        "database",
        "log_config",
        "media_store_path",
        "registration_shared_secret",
        "trusted_key_servers",
        "pid_file",
        "report_stats",
    ];
    let generated = std::fs::read_to_string(config).unwrap();
    let mut kept = String::new();
    let mut skipping = false;
    for line in generated.lines() {
        let top_level = !line.starts_with([' ', '-', '#']) && line.contains(':');
        if top_level {
            let key = line.split(':').next().unwrap_or_default().trim();
            skipping = REPLACED.contains(&key);
        }
        if !skipping && !line.trim_start().starts_with('#') {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    let path = |name: &str| -> PathBuf { directory.join(name) };
    let limits = "{per_second: 10000, burst_count: 10000}";
    kept.push_str(&format!(
        r#"
pid_file: "{pid}"
report_stats: false
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{database}"
log_config: "{log_config}"
media_store_path: "{media}"
registration_shared_secret: "{SHARED_SECRET}"
enable_registration: false
# Password hashing at its cheapest: registrations and logins are test set-up.
bcrypt_rounds: 4
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
presence:
  enabled: false
url_preview_enabled: false
rc_message: {limits}
rc_registration: {limits}
rc_login:
  address: {limits}
  account: {limits}
  failed_attempts: {limits}
rc_joins:
  local: {limits}
  remote: {limits}
rc_joins_per_room: {limits}
rc_invites:
  per_room: {limits}
  per_user: {limits}
  per_issuer: {limits}
rc_room_creation: {limits}
rc_media_create: {limits}
rc_3pid_validation: {limits}
rc_admin_redaction: {limits}
"#,
        pid = path("homeserver.pid").display(),
        database = path("homeserver.db").display(),
        log_config = path("log.yaml").display(),
        media = path("media").display(),
    ));
    std::fs::write(config, kept).unwrap();
    std::fs::write(
        path("log.yaml"),
        "version: 1\nformatters:\n  plain:\n    format: '%(asctime)s %(name)s %(levelname)s %(message)s'\n\
         handlers:\n  console:\n    class: logging.StreamHandler\n    formatter: plain\n\
         root:\n  level: WARNING\n  handlers: [console]\ndisable_existing_loggers: false\n",
    )
    .unwrap();
}

fn hmac_sha1(key: &[u8], message: &[u8]) -> Vec<u8> {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..20].copy_from_slice(&Sha1::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let inner_pad: Vec<u8> = block.iter().map(|byte| byte ^ 0x36).collect();
    let outer_pad: Vec<u8> = block.iter().map(|byte| byte ^ 0x5c).collect();
    let inner = Sha1::new().chain_update(&inner_pad).chain_update(message).finalize();
    Sha1::new().chain_update(&outer_pad).chain_update(inner).finalize().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
#[test]
fn hmac_sha1_matches_the_rfc_2202_vectors() {
    assert_eq!(
        hex(&hmac_sha1(b"key", b"The quick brown fox jumps over the lazy dog")),
        "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9"
    );
    assert_eq!(
        hex(&hmac_sha1(&[0xaa; 80], b"Test Using Larger Than Block-Size Key - Hash Key First")),
        "aa4ae5e15272d00e95705637ce8a3b55ed402112"
    );
}
