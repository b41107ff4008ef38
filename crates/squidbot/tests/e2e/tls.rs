//! `[gateway.tls]`: HTTPS and WSS on the gateway's port with a self-signed certificate,
//! plain HTTP refused, a silent client not holding up others, the commands' own client,
//! a renewed certificate served without a restart, and unusable files refused at start.

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use squidbot_testkit::ScriptedLlm;

use crate::gateway::{gateway_home, started};

/// A self-signed certificate for 127.0.0.1 and localhost named `name`, and its key (PEM).
fn certificate(name: &str) -> (String, String) {
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn write_pair(home: &Path, (cert, key): &(String, String)) {
    std::fs::create_dir_all(home.join("tls")).unwrap();
    std::fs::write(home.join("tls/cert.pem"), cert).unwrap();
    std::fs::write(home.join("tls/key.pem"), key).unwrap();
}

/// A client that trusts only `cert`.
fn trusting(cert: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(cert.as_bytes()).unwrap())
        .timeout(Duration::from_secs(10))
        // Every request on a new connection, so each sees the certificate served now.
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// A port nothing listens on right now, for a config that names its port (the commands'
/// client finds the gateway through it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_https_and_wss_and_a_renewed_certificate_without_a_restart() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let first = certificate("squidbot first");
    write_pair(home.path(), &first);
    let port = free_port();
    home.append_config(&format!(
        "[gateway]\nport = {port}\n\n[gateway.tls]\ncert = \"tls/cert.pem\"\nkey = \"tls/key.pem\"\n"
    ));
    let mut running = started(home.command(&["gateway"])).await;
    assert_eq!(running.base, format!("https://127.0.0.1:{port}"));

    // Silent clients that never send a ClientHello hold no one up.
    let mut silent = Vec::new();
    for _ in 0..5 {
        silent.push(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    let old_root = trusting(&first.0);
    let health: serde_json::Value =
        tokio::time::timeout(Duration::from_secs(5), old_root.get(format!("{}/health", running.base)).send())
            .await
            .expect("served while silent clients wait")
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(health["status"], "ok");

    let plain = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let refused = plain.get(format!("http://127.0.0.1:{port}/health")).send().await;
    assert!(refused.is_err(), "plain HTTP on the TLS port: {refused:?}");

    // wss with the commands' own client configuration (trusting the certificate file).
    let client = squidbot_server::tls::pinned_client_config(&home.path().join("tls/cert.pem")).unwrap();
    let (mut socket, _) = tokio_tungstenite::connect_async_tls_with_config(
        format!("wss://127.0.0.1:{port}/"),
        None,
        false,
        Some(tokio_tungstenite::Connector::Rustls(client)),
    )
    .await
    .unwrap();
    let frame = tokio::time::timeout(Duration::from_secs(10), socket.next()).await.unwrap().unwrap().unwrap();
    let challenge: serde_json::Value = serde_json::from_str(frame.to_text().unwrap()).unwrap();
    assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
    drop(socket);

    // A command reaches the gateway over wss with the configured credentials.
    let workers = home.run(&["workers", "list", "--json"]).await.success();
    assert_eq!(workers.stdout.trim(), "[]", "{}", workers.stderr);

    // Renewed: new connections get the new certificate within a few seconds.
    let second = certificate("squidbot second");
    write_pair(home.path(), &second);
    let new_root = trusting(&second.0);
    let mut renewed = false;
    for _ in 0..40 {
        if new_root.get(format!("{}/health", running.base)).send().await.is_ok_and(|response| response.status() == 200)
        {
            renewed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(renewed, "the renewed certificate was not served within 10 s");
    assert!(old_root.get(format!("{}/health", running.base)).send().await.is_err(), "the old one is gone");
    drop(silent);

    running.child.kill().await.unwrap();
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_garbage_key_refuses_to_start_naming_the_key() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    write_pair(home.path(), &(certificate("squidbot").0, "this is not a key\n".to_owned()));
    home.append_config("[gateway.tls]\ncert = \"tls/cert.pem\"\nkey = \"tls/key.pem\"\n");

    let run = home.run(&["gateway", "--port", "0"]).await.failure();
    let errors: Vec<&str> = run.stderr.lines().filter(|line| line.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{}", run.stderr);
    assert!(errors[0].starts_with("error: can't start the gateway: gateway.tls.key: "), "{}", run.stderr);
    assert!(errors[0].contains("no private key"), "{}", run.stderr);

    let validate = home.run(&["config", "validate"]).await.success();
    assert!(validate.stderr.contains("warning: gateway.tls.key: "), "{}", validate.stderr);
    assert!(validate.stdout.contains("would refuse to start"), "{}", validate.stdout);

    server.assert_clean();
}
