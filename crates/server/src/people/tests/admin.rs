//! The admin's methods over the protocol (approvals, usage, audit) and the per-user series
//! of `/metrics` and the details of `/health`, with a non-admin refused at each.

use serde_json::{Value, json};
use squidbot_core::people::ApprovalStore;
use squidbot_core::people::UsageLedger;
use squidbot_types::people::{Actor, ApprovalRequest, ApprovalStatus, UsageRecord};

use super::harness::{GATEWAY_TOKEN, World, refusal, token_of};

fn carol() -> Actor {
    Actor {
        user: Some("carol".into()),
        name: "CAROL".into(),
        role: "user".into(),
        context: "user:carol".into(),
        session: Some("agent:main:user:carol".into()),
    }
}

/// A pending request of carol's to run `tool`.
fn pending(world: &World, id: &str, tool: &str) {
    let now = squidbot_core::clock::unix_millis(std::time::SystemTime::now());
    let request = ApprovalRequest {
        id: id.into(),
        created_ms: now,
        expires_ms: now + 600_000,
        actor: carol(),
        session_key: "agent:main:user:carol".into(),
        tool: tool.into(),
        arguments: r#"{"command":"ls"}"#.into(),
        rule: "exec needs an admin".into(),
        status: ApprovalStatus::Pending,
        decided_ms: None,
    };
    world.approvals.create(&request).unwrap();
}

fn status_of(world: &World, id: &str) -> ApprovalStatus {
    world.approvals.get(id).unwrap().unwrap().status
}

#[tokio::test]
async fn an_admin_settles_a_pending_request_and_a_non_admin_is_refused() {
    let world = World::start().await;
    pending(&world, "AAAAAA", "exec");
    pending(&world, "BBBBBB", "web_fetch");

    // Hostile: bob approves carol's request himself.
    let mut bob = world.person("bob").await;
    for (method, params) in [
        ("approvals.approve", json!({"id": "AAAAAA"})),
        ("approvals.deny", json!({"id": "AAAAAA"})),
        ("approvals.list", json!({})),
    ] {
        let response = bob.call(method, params).await;
        assert_eq!(refusal(&response), ("FORBIDDEN", "MISSING_SCOPE"), "{method}: {response}");
    }
    assert_eq!(status_of(&world, "AAAAAA"), ApprovalStatus::Pending);

    let mut dave = world.person("dave").await;
    let listed = dave.ok("approvals.list", json!({"all": true})).await;
    let ids: Vec<&str> = listed["approvals"].as_array().unwrap().iter().filter_map(|row| row["id"].as_str()).collect();
    assert_eq!(ids, ["AAAAAA", "BBBBBB"], "{listed}");
    assert_eq!(listed["approvals"][0]["actor"]["user"], "carol");
    assert_eq!(listed["approvals"][0]["tool"], "exec");
    assert_eq!(listed["includesSettled"], false);

    let approved = dave.ok("approvals.approve", json!({"id": "aaaaaa"})).await;
    assert_eq!(approved["approval"]["status"], "approved", "{approved}");
    assert_eq!(status_of(&world, "AAAAAA"), ApprovalStatus::Approved { by: "dave".into() });
    let again = dave.call("approvals.approve", json!({"id": "AAAAAA"})).await;
    assert_eq!(refusal(&again).0, "CONFLICT", "{again}");
    let unknown = dave.call("approvals.deny", json!({"id": "ZZZZZZ"})).await;
    assert_eq!(refusal(&unknown).0, "NOT_FOUND", "{unknown}");

    // The owner's token decides as the owner.
    let mut owner = world.owner().await;
    let denied = owner.ok("approvals.deny", json!({"id": "BBBBBB", "reason": "not today"})).await;
    assert_eq!(denied["approval"]["status"], "denied");
    assert_eq!(
        status_of(&world, "BBBBBB"),
        ApprovalStatus::Denied { by: "owner".into(), reason: Some("not today".into()) }
    );
    assert_eq!(owner.ok("approvals.list", json!({})).await["approvals"], json!([]));
}

fn record(user: &str, model: &str, input: u64, cost: f64) -> UsageRecord {
    UsageRecord {
        at_ms: squidbot_core::clock::unix_millis(std::time::SystemTime::now()),
        user: Some(user.into()),
        context: format!("user:{user}"),
        session_key: format!("agent:main:user:{user}"),
        agent: "assistant".into(),
        provider: "fake".into(),
        model: model.into(),
        input_tokens: input,
        output_tokens: 1,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        cost: Some(cost),
    }
}

fn keys(usage: &Value) -> Vec<&str> {
    usage["rows"].as_array().unwrap().iter().filter_map(|row| row["key"].as_str()).collect()
}

#[tokio::test]
async fn usage_shows_everyone_to_admins_and_only_themselves_to_the_rest() {
    let world = World::start().await;
    for (user, model, input) in [("bob", "small", 100), ("bob", "big", 50), ("carol", "big", 7)] {
        world.usage.record(&record(user, model, input, 0.5)).unwrap();
    }

    let mut bob = world.person("bob").await;
    let own = bob.ok("usage.get", json!({"by": "user"})).await;
    assert_eq!(keys(&own), ["bob"], "{own}");
    assert_eq!(own["total"]["inputTokens"], 150);
    let by_model = bob.ok("usage.get", json!({"by": "model", "since": "7d", "user": "bob"})).await;
    assert_eq!(keys(&by_model), ["fake/big", "fake/small"]);
    let by_day = bob.ok("usage.get", json!({})).await;
    assert_eq!(by_day["by"], "day");
    assert_eq!(by_day["rows"].as_array().unwrap().len(), 1);
    // Hostile: bob asks for carol's.
    let response = bob.call("usage.get", json!({"user": "carol"})).await;
    assert_eq!(refusal(&response).0, "FORBIDDEN", "{response}");
    assert!(!response.to_string().contains("\"inputTokens\":7"));
    let response = bob.call("usage.get", json!({"by": "week"})).await;
    assert_eq!(refusal(&response).0, "INVALID_REQUEST");
    let response = bob.call("usage.get", json!({"since": "soon"})).await;
    assert_eq!(refusal(&response).0, "INVALID_REQUEST");

    let mut dave = world.person("dave").await;
    let everyone = dave.ok("usage.get", json!({"by": "user"})).await;
    assert_eq!(keys(&everyone), ["bob", "carol"]);
    let carols = dave.ok("usage.get", json!({"by": "user", "user": "carol"})).await;
    assert_eq!(keys(&carols), ["carol"]);
    let owners = world.owner().await.ok("usage.get", json!({"by": "model"})).await;
    assert_eq!(owners["total"]["inputTokens"], 157);
}

#[tokio::test]
async fn metrics_show_usage_per_user_and_the_pending_approvals() {
    let world = World::start().await;
    world.usage.record(&record("bob", "small", 100, 0.25)).unwrap();
    world.usage.record(&record("carol", "big", 10, 1.5)).unwrap();
    pending(&world, "CCCCCC", "exec");

    let (status, text) = world.http("GET", "/metrics", Some(GATEWAY_TOKEN), None).await;
    assert_eq!(status, 200, "{text}");
    for line in [
        "# TYPE squidbot_usage_tokens_total counter\n",
        "squidbot_usage_tokens_total{user=\"bob\"} 101\n",
        "squidbot_usage_tokens_total{user=\"carol\"} 11\n",
        "squidbot_usage_cost_total{user=\"bob\"} 0.25\n",
        "squidbot_usage_cost_total{user=\"carol\"} 1.5\n",
        "# TYPE squidbot_approvals_pending gauge\n",
        "squidbot_approvals_pending 1\n",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    // An admin person may scrape too; anyone else sees nobody's usage here.
    assert_eq!(world.http("GET", "/metrics", Some(&token_of("dave")), None).await.0, 200);
    assert_eq!(world.http("GET", "/metrics", Some(&token_of("bob")), None).await.0, 403);
    assert_eq!(world.http("GET", "/metrics", Some("sqb_wrong"), None).await.0, 401);
}

#[tokio::test]
async fn the_audit_is_listed_newest_first_by_user_and_verified_with_its_key() {
    let world = World::start().await;
    let mut bob = world.person("bob").await;
    bob.turn(json!({"message": "hello"})).await;
    world.person("carol").await;
    let _refused = world.login(json!({"token": "sqb_wrong"}), &[]).await;

    let mut bob_admin_try = world.person("bob").await;
    let response = bob_admin_try.call("audit.list", json!({})).await;
    assert_eq!(refusal(&response).0, "FORBIDDEN");

    let mut dave = world.person("dave").await;
    let all = dave.ok("audit.list", json!({})).await;
    let rows = all["rows"].as_array().unwrap();
    assert!(rows.len() >= 5, "{all}");
    let seqs: Vec<u64> = rows.iter().filter_map(|row| row["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|pair| pair[0] > pair[1]), "newest first: {seqs:?}");
    assert_eq!(rows[0]["actor"], "dave", "dave's own login is the newest: {}", rows[0]);
    assert_eq!(rows[0]["kind"], "login");
    assert_eq!(rows[0]["detail"]["via"], "websocket");

    let bobs = dave.ok("audit.list", json!({"user": "bob", "since": "1h", "limit": 2})).await;
    let bobs = bobs["rows"].as_array().unwrap();
    assert_eq!(bobs.len(), 2, "{bobs:?}");
    assert!(bobs.iter().all(|row| row["actor"] == "bob" && row["kind"] == "login"), "{bobs:?}");
    let unknown = dave.ok("audit.list", json!({"user": "unknown"})).await;
    assert_eq!(unknown["rows"].as_array().unwrap().len(), 1);
    assert_eq!(unknown["rows"][0]["ok"], false);

    let verified = dave.ok("audit.verify", json!({})).await;
    assert_eq!(verified["ok"], true, "{verified}");
    assert_eq!(verified["rows"].as_u64(), Some(world.audit_rows().len() as u64));

    // Without the key the gateway can't check the chain, and says so.
    let keyless = World::serve(None).await;
    let response = keyless.owner().await.call("audit.verify", json!({})).await;
    assert_eq!(refusal(&response).0, "UNAVAILABLE", "{response}");
}

#[tokio::test]
async fn health_details_are_for_admins_and_everyone_else_sees_liveness() {
    let world = World::start().await;
    let liveness = json!({"status": "ok"});
    for bearer in [None, Some(token_of("bob"))] {
        let (status, text) = world.http("GET", "/health", bearer.as_deref(), None).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), liveness, "{bearer:?}");
    }
    for bearer in [token_of("dave"), GATEWAY_TOKEN.to_owned()] {
        let (status, text) = world.http("GET", "/health", Some(&bearer), None).await;
        assert_eq!(status, 200, "{text}");
        let report: Value = serde_json::from_str(&text).unwrap();
        assert!(report["components"]["memory"].is_object(), "{report}");
    }
    let disabled = world.http("GET", "/health", Some(&token_of("eve")), None).await;
    assert_eq!(disabled.0, 401, "a disabled user's token is a wrong one");
}
