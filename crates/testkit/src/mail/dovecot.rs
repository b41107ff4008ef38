//! A Dovecot of the test's own: configuration, state, logs and the bot's Maildir in the
//! test's temporary directory; IMAPS and IMAP (STARTTLS) listeners on free ports of
//! 127.0.0.1; `bot@example.test` / `password` in a passwd-file.
//!
//! A Dovecot dropped with its test is killed (`kill_on_drop`); its processes notice
//! their master is gone and exit. [`Dovecot::stop`] stops it gracefully instead.
//!
//! As root, Dovecot's own unprivileged users run its processes and own the Maildir (the
//! package creates `dovecot` and `dovenull`); as any other user, everything runs as
//! that user.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

use super::{BOT, Certificates, PASSWORD, ServerOptions};

/// A running Dovecot, killed on drop.
pub struct Dovecot {
    binary: PathBuf,
    directory: PathBuf,
    config: PathBuf,
    child: Option<Child>,
    /// The implicit-TLS port.
    pub imaps_port: u16,
    /// The plain port, where STARTTLS is required before login.
    pub imap_port: u16,
}

impl Dovecot {
    /// Starts Dovecot with its files under `parent`/dovecot, retrying on port clashes.
    pub async fn start(binary: &Path, parent: &Path, certificates: &Certificates, options: ServerOptions) -> Self {
        let directory = parent.join("dovecot");
        std::fs::create_dir_all(directory.join("mail")).unwrap();
        // Dovecot's unprivileged processes must reach the files below the test's
        // private temporary directory.
        for path in [parent, &directory] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let (mail_uid, mail_gid, own_user) = mail_owner(&directory);
        std::os::unix::fs::chown(directory.join("mail"), Some(mail_uid), Some(mail_gid)).unwrap();
        std::fs::write(
            directory.join("users"),
            format!("{BOT}:{{PLAIN}}{PASSWORD}:{mail_uid}:{mail_gid}::{}\n", directory.join("mail").display()),
        )
        .unwrap();

        let mut last_failure = String::new();
        for _attempt in 0..5 {
            let imaps_port = free_port().await;
            let imap_port = free_port().await;
            let config = directory.join("dovecot.conf");
            std::fs::write(
                &config,
                configuration(&directory, certificates, imap_port, imaps_port, own_user.as_deref(), options),
            )
            .unwrap();
            let mut dovecot = Self {
                binary: binary.to_owned(),
                directory: directory.clone(),
                config,
                child: None,
                imaps_port,
                imap_port,
            };
            match dovecot.launch().await {
                Ok(()) => return dovecot,
                Err(failure) => last_failure = failure,
            }
        }
        panic!("can't start Dovecot: {last_failure}");
    }

    /// Starts the process and waits until both ports accept connections.
    async fn launch(&mut self) -> Result<(), String> {
        let stderr =
            std::fs::OpenOptions::new().create(true).append(true).open(self.directory.join("stderr.log")).unwrap();
        let mut child = Command::new(&self.binary)
            .arg("-F")
            .arg("-c")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("can't run {}: {error}", self.binary.display()))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Err(format!("Dovecot exited ({status}):\n{}", self.log()));
            }
            let imaps = TcpStream::connect(("127.0.0.1", self.imaps_port)).await;
            let imap = TcpStream::connect(("127.0.0.1", self.imap_port)).await;
            if imaps.is_ok() && imap.is_ok() {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("Dovecot did not listen within 10 s:\n{}", self.log()));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Stops Dovecot (SIGTERM, as an administrator would), dropping every connection.
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        if let Some(pid) = child.id() {
            let status = Command::new("kill").arg("-TERM").arg(pid.to_string()).status().await;
            assert!(status.is_ok_and(|status| status.success()), "can't signal Dovecot");
        }
        if tokio::time::timeout(Duration::from_secs(10), child.wait()).await.is_err() {
            child.kill().await.unwrap();
        }
        // The login processes go with the master; wait until the port is free again.
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.imaps_port)).await.is_ok() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Starts Dovecot again on the same ports with the same mail.
    pub async fn restart(&mut self) {
        let mut last_failure = String::new();
        for _attempt in 0..20 {
            match self.launch().await {
                Ok(()) => return,
                Err(failure) => last_failure = failure,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("can't restart Dovecot: {last_failure}");
    }

    /// Dovecot's standard error and log file.
    pub fn log(&self) -> String {
        let read = |name: &str| std::fs::read_to_string(self.directory.join(name)).unwrap_or_default();
        format!("{}{}", read("stderr.log"), read("dovecot.log"))
    }
}

/// Who owns the mail: Dovecot's own user when running as root, else ourselves (with
/// our user name, which then runs Dovecot's internal and login processes too).
fn mail_owner(directory: &Path) -> (u32, u32, Option<String>) {
    let probe = directory.join(".owner-probe");
    std::fs::write(&probe, b"").unwrap();
    let metadata = std::fs::metadata(&probe).unwrap();
    std::fs::remove_file(&probe).unwrap();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let entries: Vec<Vec<&str>> = passwd.lines().map(|line| line.split(':').collect()).collect();
    if metadata.uid() == 0 {
        let dovecot = entries
            .iter()
            .find(|fields| fields.first() == Some(&"dovecot"))
            .expect("no dovecot user: run scripts/install-mail-servers");
        return (dovecot[2].parse().unwrap(), dovecot[3].parse().unwrap(), None);
    }
    let own = entries
        .iter()
        .find(|fields| fields.get(2).and_then(|uid| uid.parse::<u32>().ok()) == Some(metadata.uid()))
        .map(|fields| fields[0].to_owned());
    (metadata.uid(), metadata.gid(), own)
}

async fn free_port() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    listener.local_addr().unwrap().port()
}

fn configuration(
    directory: &Path,
    certificates: &Certificates,
    imap_port: u16,
    imaps_port: u16,
    own_user: Option<&str>,
    options: ServerOptions,
) -> String {
    let directory = directory.display();
    let users = match own_user {
        Some(user) => format!("default_internal_user = {user}\ndefault_login_user = {user}\n"),
        None => String::new(),
    };
    let capability = if options.without_idle { "imap_capability = IMAP4rev1 LITERAL+ UIDPLUS\n" } else { "" };
    format!(
        "base_dir = {directory}/run
state_dir = {directory}/state
log_path = {directory}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = required
ssl_cert = <{certificate}
ssl_key = <{key}
disable_plaintext_auth = yes
auth_mechanisms = plain login
auth_failure_delay = 0
login_log_format_elements = user=<%u> method=%m rip=%r lip=%l lport=%{{local_port}} mpid=%e %c session=<%{{session}}>
first_valid_uid = 1
first_valid_gid = 1
mail_location = maildir:{directory}/mail/Maildir
{users}{capability}passdb {{
  driver = passwd-file
  args = {directory}/users
}}
userdb {{
  driver = passwd-file
  args = {directory}/users
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
}}
",
        certificate = certificates.certificate.display(),
        key = certificates.key.display(),
    )
}
