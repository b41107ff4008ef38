//! What squidbot writes is its user's alone: the database, transcripts, memory, keys and
//! the directories holding them are created 600/700 whatever the shell's umask, and
//! `doctor` names anything readable by others.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use squidbot_testkit::{Reply, ScriptedLlm};

use crate::harness::Home;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|error| panic!("{}: {error}", path.display())).permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_squidbot_creates_is_private_and_doctor_names_what_is_not() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    // The test made the home and wrote the config; `onboard` makes both private too.
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(home.path().join("config.toml"), std::fs::Permissions::from_mode(0o600)).unwrap();
    server.push(Reply::text("hello"));
    // The test process's umask (usually 022) is what the binary inherits.
    let run = home.run(&["agent", "-m", "hi"]).await.success();
    assert_eq!(run.stdout, "hello\n");
    let sessions = home.path().join("sessions");
    let transcript = std::fs::read_dir(&sessions).unwrap().next().unwrap().unwrap().path();
    for (path, wanted) in [
        (home.path().join("squidbot.db"), 0o600),
        (home.path().join("audit.key"), 0o600),
        (sessions.clone(), 0o700),
        (transcript.clone(), 0o600),
        (home.workspace(), 0o700),
    ] {
        assert_eq!(mode(&path), wanted, "{} is {:o}", path.display(), mode(&path));
    }
    let doctor = home.run(&["doctor"]).await;
    assert!(doctor.stdout.contains("ok   files"), "{}", doctor.stdout);
    std::fs::set_permissions(&sessions, std::fs::Permissions::from_mode(0o755)).unwrap();
    let doctor = home.run(&["doctor"]).await;
    assert!(
        doctor.stdout.contains("warn files") && doctor.stdout.contains(&format!("{} is 755", sessions.display())),
        "{}",
        doctor.stdout
    );
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_security_names_plaintext_keys_and_an_open_gateway_until_they_are_fixed() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    home.append_config("[gateway]\nbind = \"0.0.0.0\"\n\n[gateway.auth]\nmode = \"none\"\n");
    let doctor = home.run(&["doctor", "--security"]).await.failure();
    assert_eq!(doctor.status.code(), Some(1), "{}", doctor.stdout);
    let line = |key: &str| doctor.stdout.lines().find(|line| line.contains(key)).map(str::to_owned);
    let credential = line("providers.local.api_key").unwrap_or_else(|| panic!("{}", doctor.stdout));
    assert!(credential.starts_with("warn") && credential.contains("secrets import-config"), "{credential}");
    let auth = line("gateway.auth.mode").unwrap_or_else(|| panic!("{}", doctor.stdout));
    assert!(auth.starts_with("CRIT") && auth.contains("0.0.0.0"), "{auth}");
    assert!(line("gateway.tls").is_some_and(|tls| tls.contains("TLS proxy")), "{}", doctor.stdout);
    assert!(!doctor.stdout.contains(crate::harness::KEY), "the report never prints a credential: {}", doctor.stdout);

    let json = home.run(&["doctor", "--security", "--json"]).await.failure();
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["ok"], false);
    let critical: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|finding| finding["severity"] == "critical")
        .map(|finding| finding["key"].as_str().unwrap())
        .collect();
    assert!(critical.contains(&"gateway.auth.mode"), "{critical:?}");

    // A token, then every credential into the vault.
    home.write_config(&format!(
        "{config}\n[gateway]\nbind = \"0.0.0.0\"\n\n[gateway.auth]\nmode = \"token\"\ntoken = \"a-long-gateway-token\"\n"
    ));
    home.run(&["secrets", "import-config"]).await.success();
    let doctor = home.run(&["doctor", "--security"]).await.success();
    assert!(!doctor.stdout.contains("api_key") && !doctor.stdout.contains("gateway.auth.token"), "{}", doctor.stdout);
    assert!(doctor.stdout.contains("holds no credential in clear"), "{}", doctor.stdout);
    assert!(!doctor.stdout.contains("CRIT"), "{}", doctor.stdout);
    server.assert_clean();
}
