//! The aiosmtpd server of smtp_server.py (embedded, written beside its output): STARTTLS-then-AUTH
//! submission and implicit TLS, recording every accepted mail to a directory.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::{BOT, Certificates, PASSWORD, PATIENCE};

/// The server's source, run by the Python that has aiosmtpd.
const SCRIPT: &str = include_str!("smtp_server.py");

/// A running aiosmtpd, killed on drop.
pub struct SmtpServer {
    _child: Child,
    output: PathBuf,
    /// Submission: STARTTLS required before AUTH.
    pub starttls_port: u16,
    /// Implicit TLS.
    pub tls_port: u16,
}

/// A mail the server accepted.
#[derive(Debug)]
pub struct SentMail {
    /// The bytes received after DATA.
    pub raw: Vec<u8>,
    /// The envelope recipients.
    pub recipients: Vec<String>,
    /// The envelope sender.
    pub envelope_from: String,
    /// Whether the client logged in.
    pub authenticated: bool,
    /// Whether the session was encrypted.
    pub encrypted: bool,
}

impl SmtpServer {
    /// Starts the server on free ports of 127.0.0.1; `parent` holds its output.
    pub async fn start(python: &Path, parent: &Path, certificates: &Certificates) -> Self {
        let output = parent.join("smtp-out");
        std::fs::create_dir_all(&output).unwrap();
        let script = parent.join("smtp_server.py");
        std::fs::write(&script, SCRIPT).unwrap();
        let mut child = Command::new(python)
            .arg(&script)
            .arg("--out")
            .arg(&output)
            .arg("--cert")
            .arg(&certificates.certificate)
            .arg("--key")
            .arg(&certificates.key)
            .args(["--user", BOT, "--password", PASSWORD])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| {
                panic!("can't run {}: {error}; run scripts/install-mail-servers", python.display())
            });
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        tokio::time::timeout(PATIENCE, BufReader::new(stdout).read_line(&mut line))
            .await
            .expect("the SMTP server did not start")
            .unwrap();
        let ports: Vec<u16> = line
            .trim()
            .strip_prefix("ports ")
            .unwrap_or_else(|| panic!("SMTP server said {line:?}"))
            .split(' ')
            .map(|port| port.parse().unwrap())
            .collect();
        Self { _child: child, output, starttls_port: ports[0], tls_port: ports[1] }
    }

    /// Every mail accepted so far, oldest first.
    pub fn sent(&self) -> Vec<SentMail> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&self.output)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
            .collect();
        names.sort();
        names
            .iter()
            .map(|meta| {
                let envelope: serde_json::Value = serde_json::from_slice(&std::fs::read(meta).unwrap()).unwrap();
                SentMail {
                    raw: std::fs::read(meta.with_extension("eml")).unwrap(),
                    recipients: envelope["rcpt_tos"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|recipient| recipient.as_str().unwrap().to_owned())
                        .collect(),
                    envelope_from: envelope["mail_from"].as_str().unwrap().to_owned(),
                    authenticated: envelope["authenticated"].as_bool().unwrap(),
                    encrypted: envelope["encrypted"].as_bool().unwrap(),
                }
            })
            .collect()
    }

    /// Waits until `count` mails were accepted and returns them.
    pub async fn wait_for(&self, count: usize) -> Vec<SentMail> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let sent = self.sent();
            if sent.len() >= count {
                return sent;
            }
            assert!(Instant::now() < deadline, "only {} of {count} mails arrived", sent.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
