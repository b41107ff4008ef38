//! Idle memory of one gateway serving every chat channel at once: the release binary
//! with Telegram, Discord and Slack pointed at the testkit fakes, Matrix at a real
//! Synapse, email at real Dovecot and aiosmtpd servers, and a webhook. Waits until every
//! channel reports `running` in `/health`, lets it idle, then reads `VmRSS`; the same
//! gateway without channels is measured for comparison. Needs the servers of
//! `scripts/test` (`SQUIDBOT_TEST_SYNAPSE_PYTHON`, `SQUIDBOT_TEST_DOVECOT`,
//! `SQUIDBOT_TEST_MAIL_PYTHON`). Run: `scripts/bench-channels`.

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "a benchmark aborts loudly on any setup failure")]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use squidbot_testkit::fake_discord::FakeDiscord;
use squidbot_testkit::fake_slack::FakeSlack;
use squidbot_testkit::fake_telegram::FakeTelegram;
use squidbot_testkit::synapse::Synapse;
use squidbot_testkit::{Reply, ScriptedLlm};
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long the gateway idles before its memory is read.
const IDLE: Duration = Duration::from_secs(5);

fn binary() -> PathBuf {
    std::env::var_os("SQUIDBOT_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_squidbot")), PathBuf::from)
}

fn status_field(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find(|line| line.starts_with(field)).map(|line| line.trim().to_owned()).unwrap_or_default()
}

/// Starts the gateway in `home`, waits for every channel in `channels` to run, idles,
/// and prints its memory.
async fn measure(label: &str, home: &Path, channels: &[&str]) {
    let mut child = tokio::process::Command::new(binary())
        .args(["gateway", "--port", "0"])
        .env("SQUIDBOT_HOME", home)
        .env_remove("SQUIDBOT_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await.unwrap().unwrap().unwrap();
    let base = first.strip_prefix("listening on ").expect("the gateway started").to_owned();
    let http = reqwest::Client::new();
    for _ in 0..600 {
        let health: Value =
            http.get(format!("{base}/health")).bearer_auth("bench-token").send().await.unwrap().json().await.unwrap();
        let running =
            channels.iter().all(|name| health["components"]["channels"][name]["status"].as_str() == Some("running"));
        if running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(IDLE).await;
    let health: Value =
        http.get(format!("{base}/health")).bearer_auth("bench-token").send().await.unwrap().json().await.unwrap();
    for name in channels {
        assert_eq!(health["components"]["channels"][name]["status"], "running", "{name}: {health}");
    }
    let pid = child.id().unwrap();
    println!(
        "{label:<40} {}  {}  {}  {}",
        status_field(pid, "VmRSS"),
        status_field(pid, "RssAnon"),
        status_field(pid, "RssFile"),
        status_field(pid, "Threads")
    );
    child.kill().await.unwrap();
}

fn write_config(home: &Path, llm: &ScriptedLlm, channels: &str) {
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[llm]\nmodel = \"local/test-model\"\n\n[providers.local]\nkind = \"openai\"\napi_base = \"{}/v1\"\n\
             api_key = \"sk-test\"\n\n[gateway.auth]\ntoken = \"bench-token\"\n\n{channels}",
            llm.base_url()
        ),
    )
    .unwrap();
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let llm = ScriptedLlm::start().await;
        llm.push(Reply::text("unused"));
        let telegram = FakeTelegram::start("4242:bench").await;
        let discord = FakeDiscord::start("discord-bench").await;
        let slack = FakeSlack::start("xapp-bench", "xoxb-bench").await;
        let synapse = Synapse::start().await;
        let bot = synapse.register("squidbot").await;
        let mail = squidbot_testkit::mail::MailServers::start().await;
        let email = format!(
            "[channels.mail]\nkind = \"email\"\naddress = \"{bot}\"\npassword = \"{password}\"\n\
             imap_host = \"127.0.0.1\"\nimap_port = {imap}\nimap_security = \"tls\"\n\
             smtp_host = \"127.0.0.1\"\nsmtp_port = {smtp}\nsmtp_security = \"starttls\"\nca_files = [\"{ca}\"]\n",
            bot = squidbot_testkit::mail::BOT,
            password = squidbot_testkit::mail::PASSWORD,
            imap = mail.dovecot.imaps_port,
            smtp = mail.smtp.starttls_port,
            ca = mail.certificates.ca.display(),
        );

        let bare = tempfile::tempdir().unwrap();
        write_config(bare.path(), &llm, "");
        measure("gateway, no channels", bare.path(), &[]).await;

        let home = tempfile::tempdir().unwrap();
        let channels = format!(
            "[channels.telegram]\ntoken = \"4242:bench\"\napi_base = \"{}\"\n\n\
             [channels.discord]\ntoken = \"discord-bench\"\napi_base = \"{}\"\n\n\
             [channels.slack]\ntoken = \"xoxb-bench\"\napp_token = \"xapp-bench\"\napi_base = \"{}\"\n\n\
             [channels.matrix]\nhomeserver = \"{}\"\nuser_id = \"{}\"\ntoken = \"{}\"\n\n\
             {}\n\
             [channels.hook]\nkind = \"webhook\"\nsecret = \"bench-secret\"\n",
            telegram.api_base(),
            discord.api_base(),
            slack.api_base(),
            synapse.base_url,
            bot.user_id,
            bot.access_token,
            email,
        );
        write_config(home.path(), &llm, &channels);
        measure(
            "gateway, six channels connected",
            home.path(),
            &["telegram", "discord", "slack", "matrix", "mail", "hook"],
        )
        .await;
    });
}
