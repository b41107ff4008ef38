//! Logging in with a person's token: who the connection acts for, the scopes their role
//! gives, refusals that look like any wrong token, and the audit of every attempt.

use serde_json::json;
use squidbot_types::people::AuditKind;

use super::harness::{ALL_SCOPES, CALL_TOKENS, GATEWAY_TOKEN, REPLY, World, refusal, token_of};

#[tokio::test]
async fn a_persons_token_acts_as_them_and_their_turn_lands_in_their_context() {
    let world = World::start().await;
    let (mut bob, hello) = world.login(json!({"token": token_of("bob")}), &ALL_SCOPES).await;
    assert_eq!(hello["ok"], true, "{hello}");
    let hello = &hello["payload"];
    assert_eq!(hello["auth"]["user"]["id"], "bob", "{hello}");
    assert_eq!(hello["auth"]["user"]["context"], "user:bob");
    assert_eq!(hello["snapshot"]["sessionDefaults"]["mainSessionKey"], "agent:main:user:bob");

    // No session named: the person's own main session, made in their context.
    let sent = bob.turn(json!({"message": "hi, it's bob"})).await;
    assert_eq!(sent["sessionKey"], "agent:main:user:bob");
    assert_eq!(world.session_context("agent:main:user:bob").await.as_deref(), Some("user:bob"));
    let history = bob.ok("chat.history", json!({})).await;
    let texts: Vec<&str> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["content"][0]["text"].as_str())
        .collect();
    assert_eq!(texts, ["hi, it's bob", REPLY]);

    // A session of their own naming, under their names.
    bob.turn(json!({"message": "notes", "sessionKey": "agent:main:user:bob:notes"})).await;
    assert_eq!(world.session_context("agent:main:user:bob:notes").await.as_deref(), Some("user:bob"));
    let listed = bob.ok("sessions.list", json!({})).await;
    let mut keys: Vec<&str> =
        listed["sessions"].as_array().unwrap().iter().filter_map(|row| row["key"].as_str()).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["agent:main:user:bob", "agent:main:user:bob:notes"]);

    // The turns acted for bob: the ledger has his model calls.
    let records = world.usage.records();
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(records.iter().all(|record| record.user.as_deref() == Some("bob") && record.context == "user:bob"));
    assert_eq!(records[0].input_tokens + records[0].output_tokens, CALL_TOKENS.0 + CALL_TOKENS.1);

    // The login is in the audit trail, with the address, and the token is not.
    let rows = world.audit_rows();
    let login = rows.iter().find(|row| row.event.kind == AuditKind::Login).expect("a login row");
    assert_eq!((login.event.actor.as_str(), login.event.subject.as_str(), login.event.ok), ("bob", "127.0.0.1", true));
    assert!(rows.iter().all(|row| !row.event.detail.contains(&token_of("bob"))));
}

#[tokio::test]
async fn the_owners_token_is_the_owner_as_before_and_its_login_is_audited() {
    let world = World::start().await;
    let (mut owner, hello) = world.login(json!({"token": GATEWAY_TOKEN}), &ALL_SCOPES).await;
    let hello = &hello["payload"];
    assert_eq!(hello["auth"]["scopes"], json!(ALL_SCOPES), "{hello}");
    assert!(hello["auth"].get("user").is_none(), "{hello}");
    assert_eq!(hello["snapshot"]["sessionDefaults"]["mainSessionKey"], "agent:main:main");
    let sent = owner.turn(json!({"message": "hello"})).await;
    assert_eq!(sent["sessionKey"], "agent:main:main");
    assert_eq!(world.session_context("agent:main:main").await.as_deref(), Some("owner"));
    assert!(owner.ok("config.get", json!({})).await.get("config").is_some());
    let logins: Vec<_> = world.audit_rows().into_iter().filter(|row| row.event.kind == AuditKind::Login).collect();
    assert_eq!(logins.len(), 1);
    assert_eq!((logins[0].event.actor.as_str(), logins[0].event.ok), ("owner", true));
}

#[tokio::test]
async fn an_unknown_sqb_token_and_a_disabled_users_are_refused_like_a_wrong_token_and_audited() {
    let world = World::start().await;
    let (_, wrong_gateway_token) = world.login(json!({"token": "not-the-token"}), &ALL_SCOPES).await;
    let unknown_token = format!("{}x", token_of("nobody"));
    for token in [unknown_token.as_str(), &token_of("eve")] {
        let (mut client, response) = world.login(json!({"token": token}), &ALL_SCOPES).await;
        assert_eq!(refusal(&response), ("FORBIDDEN", "AUTH_TOKEN_MISMATCH"), "{response}");
        // Exactly what a wrong gateway token gets: nobody learns whether a token exists.
        assert_eq!(response["error"], wrong_gateway_token["error"]);
        assert!(client.closed().await, "the connection closes after a refused login");
    }
    // Also in the password field, and over HTTP.
    let (_, response) = world.login(json!({"password": token_of("eve")}), &ALL_SCOPES).await;
    assert_eq!(refusal(&response).0, "FORBIDDEN");
    let (status, _) = world.complete(&unknown_token, "x", "hi").await;
    assert_eq!(status, 401);
    let (status, _) = world.complete(&token_of("eve"), "x", "hi").await;
    assert_eq!(status, 401);

    let failed: Vec<_> =
        world.audit_rows().into_iter().filter(|row| row.event.kind == AuditKind::Login && !row.event.ok).collect();
    let who: Vec<(&str, &str)> =
        failed.iter().map(|row| (row.event.actor.as_str(), row.event.subject.as_str())).collect();
    assert_eq!(
        who,
        [
            ("unknown", "127.0.0.1"),
            ("unknown", "127.0.0.1"),
            ("eve", "127.0.0.1"),
            ("eve", "127.0.0.1"),
            ("unknown", "127.0.0.1"),
            ("eve", "127.0.0.1"),
        ]
    );
    assert!(failed[2].event.detail.contains("disabled"), "{}", failed[2].event.detail);
    assert!(failed[4].event.detail.contains("openai"), "{}", failed[4].event.detail);
    for row in &failed {
        assert!(!row.event.detail.contains("sqb_"), "a token leaked into the audit: {}", row.event.detail);
    }
    assert!(world.audit_rows().iter().all(|row| !row.event.ok), "no login went through");
}

#[tokio::test]
async fn a_person_asking_for_admin_does_not_get_it_and_admin_methods_are_forbidden_to_them() {
    let world = World::start().await;
    let (mut bob, hello) = world.login(json!({"token": token_of("bob")}), &ALL_SCOPES).await;
    assert_eq!(hello["payload"]["auth"]["scopes"], json!(["operator.read", "operator.write"]), "{hello}");
    for method in ["config.get", "users.list", "approvals.list", "audit.list", "audit.verify"] {
        let response = bob.call(method, json!({})).await;
        assert_eq!(refusal(&response), ("FORBIDDEN", "MISSING_SCOPE"), "{method}: {response}");
        assert_eq!(response["error"]["details"]["scope"], "operator.admin");
    }

    // A person who asks for reading only can't write either.
    let (mut reader, hello) = world.login(json!({"token": token_of("carol")}), &["operator.read"]).await;
    assert_eq!(hello["payload"]["auth"]["scopes"], json!(["operator.read"]));
    let response = reader.call("chat.send", json!({"message": "hi"})).await;
    assert_eq!(refusal(&response), ("FORBIDDEN", "MISSING_SCOPE"));

    // An admin person gets the admin scope and the admin methods.
    let (mut dave, hello) = world.login(json!({"token": token_of("dave")}), &ALL_SCOPES).await;
    assert_eq!(hello["payload"]["auth"]["scopes"], json!(ALL_SCOPES));
    let users = dave.ok("users.list", json!({})).await;
    let bob_row = users["users"].as_array().unwrap().iter().find(|user| user["id"] == "bob").unwrap().clone();
    assert_eq!(bob_row["role"], "user");
    assert_eq!(bob_row["context"], "user:bob");
    assert_eq!(bob_row["identities"], json!(["telegram:42"]));
    assert_eq!(bob_row["disabled"], false);
    let eve = users["users"].as_array().unwrap().iter().find(|user| user["id"] == "eve").unwrap();
    assert_eq!(eve["disabled"], true);
    let shown = users.to_string();
    assert!(!shown.contains(&squidbot_core::people::tokens::token_hash(&token_of("bob"))), "the hash is never shown");
    assert!(!shown.contains("sqb_"));
    assert!(dave.ok("config.get", json!({})).await.get("config").is_some());
}

#[tokio::test]
async fn a_user_disabled_while_connected_is_cut_off_and_a_demoted_admin_loses_the_admin_methods() {
    let world = World::start().await;
    let mut dave = world.person("dave").await;
    dave.ok("users.list", json!({})).await;
    let mut bob = world.person("bob").await;
    bob.ok("sessions.list", json!({})).await;

    let mut demoted = squidbot_core::people::Directory::user(world.directory.as_ref(), "dave").unwrap().unwrap();
    demoted.role = "user".into();
    world.directory.put(demoted);
    let response = dave.call("users.list", json!({})).await;
    assert_eq!(refusal(&response), ("FORBIDDEN", "MISSING_SCOPE"), "{response}");
    dave.ok("sessions.list", json!({})).await;

    let mut disabled = squidbot_core::people::Directory::user(world.directory.as_ref(), "bob").unwrap().unwrap();
    disabled.disabled = true;
    world.directory.put(disabled);
    let response = bob.call("sessions.list", json!({})).await;
    assert_eq!(refusal(&response), ("FORBIDDEN", "ACCESS_REVOKED"), "{response}");
    assert!(bob.closed().await, "the connection ends");
}
