//! `squidbot approvals`, `usage` and `audit`: decisions a waiting gateway reads (and a turn
//! in a real gateway that goes on when the CLI approves), usage sums, the audit trail and
//! `audit verify` against edits, deletions and a chain recomputed without the key; skill
//! installs in the trail.

use serde_json::{Value, json};
use squidbot_core::people::ApprovalStore;
use squidbot_core::people::audit::{head_after, next_row};
use squidbot_store::SqliteApprovals;
use squidbot_testkit::ScriptedLlm;
use squidbot_types::people::{Actor, ApprovalRequest, ApprovalStatus, AuditEvent, AuditKind, AuditRow};

use super::{audit_rows, database, json_of, now_ms, people_home, record_usage, refused};
use crate::harness::{Home, KEY};

fn request(id: &str, actor: Actor, tool: &str, arguments: Value) -> ApprovalRequest {
    let now = now_ms();
    ApprovalRequest {
        id: id.to_owned(),
        created_ms: now,
        expires_ms: now + 600_000,
        actor,
        session_key: "telegram:12345".to_owned(),
        tool: tool.to_owned(),
        arguments: arguments.to_string(),
        rule: "`exec` waits for an admin for the people's role `user`".to_owned(),
        status: ApprovalStatus::Pending,
        decided_ms: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_decided_from_the_cli_as_the_owner() {
    let (_server, home) = people_home().await;
    home.run(&["users", "add", "bob", "--role", "child"]).await.success();
    let bob = Actor {
        user: Some("bob".into()),
        name: "Bob".into(),
        role: "child".into(),
        context: "user:bob".into(),
        session: None,
    };
    let owner = Actor {
        user: Some("owner".into()),
        name: "Owner".into(),
        role: "admin".into(),
        context: "owner".into(),
        session: None,
    };
    let approvals = SqliteApprovals::new(database(&home));
    let secret_command = json!({"command": format!("curl -H 'Authorization: Bearer {KEY}' https://example.org")});
    approvals.create(&request("AAA222", bob.clone(), "exec", secret_command)).unwrap();
    approvals.create(&request("BBB333", bob, "memory_save", json!({"content": "x"}))).unwrap();
    approvals.create(&request("CCC444", owner, "exec", json!({"command": "ls"}))).unwrap();

    let listed = json_of(&home, &["approvals", "list", "--json"]).await;
    let ids: Vec<&str> = listed.as_array().unwrap().iter().map(|request| request["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 3, "{listed}");
    assert!(!listed.to_string().contains(KEY), "secrets are redacted: {listed}");
    let aaa = listed.as_array().unwrap().iter().find(|request| request["id"] == "AAA222").unwrap();
    assert_eq!(aaa["status"], "pending");
    assert_eq!(aaa["user"], "bob");
    assert!(aaa["arguments"]["command"].as_str().unwrap().starts_with("curl"), "{aaa}");
    let text = home.run(&["approvals", "list"]).await.success().stdout;
    assert!(text.contains("AAA222") && text.contains("`exec` for bob (Bob)") && !text.contains(KEY), "{text}");

    let approved = home.run(&["approvals", "approve", "aaa222"]).await.success();
    assert!(approved.stdout.contains("approved AAA222"), "{}", approved.stdout);
    let denied = home.run(&["approvals", "deny", "BBB333", "--reason", "not today"]).await.success();
    assert!(denied.stdout.contains("denied BBB333") && denied.stdout.contains("not today"), "{}", denied.stdout);
    // What a waiting gateway reads.
    assert_eq!(approvals.get("AAA222").unwrap().unwrap().status, ApprovalStatus::Approved { by: "owner".into() });
    assert_eq!(
        approvals.get("BBB333").unwrap().unwrap().status,
        ApprovalStatus::Denied { by: "owner".into(), reason: Some("not today".into()) }
    );

    let error = refused(&home, &["approvals", "approve", "AAA222"], 1).await;
    assert!(error.contains("already approved"), "{error}");
    let error = refused(&home, &["approvals", "deny", "NOPE42"], 1).await;
    assert!(error.contains("no approval request NOPE42"), "{error}");
    let error = refused(&home, &["approvals", "approve", "CCC444"], 1).await;
    assert!(error.contains("nobody decides their own request"), "{error}");

    let pending = json_of(&home, &["approvals", "list", "--json"]).await;
    assert_eq!(pending.as_array().unwrap().len(), 1, "only the owner's own is left: {pending}");
    let all = json_of(&home, &["approvals", "list", "--all", "--json"]).await;
    let denied = all.as_array().unwrap().iter().find(|request| request["id"] == "BBB333").unwrap();
    assert_eq!(denied["status"], "denied");
    assert_eq!(denied["decided_by"], "owner");
    assert_eq!(denied["reason"], "not today");

    let decisions: Vec<Value> =
        audit_rows(&home, &[]).await.into_iter().filter(|row| row["kind"] == "approval_decided").collect();
    assert_eq!(decisions.len(), 5, "two decisions and three refusals: {decisions:?}");
    assert!(decisions.iter().all(|row| row["actor"] == "owner"));
    home.run(&["audit", "verify"]).await.success();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_sums_per_day_user_and_model_since_a_time() {
    let (_server, home) = people_home().await;
    home.run(&["users", "add", "bob", "--role", "child"]).await.success();
    home.run(&["users", "add", "alice", "--role", "child"]).await.success();
    record_usage(&home, Some("bob"), "user:bob", 0, Some(0.25));
    record_usage(&home, Some("bob"), "user:bob", 0, None);
    record_usage(&home, Some("alice"), "user:alice", 3, None);
    record_usage(&home, Some("bob"), "user:bob", 40, Some(1.0));

    let by_day = json_of(&home, &["usage", "--json"]).await;
    assert_eq!(by_day["by"], "day");
    assert_eq!(by_day["rows"].as_array().unwrap().len(), 2, "today and three days ago: {by_day}");
    assert_eq!(by_day["total"]["calls"], 3, "40 days ago is past the default 30d");
    assert_eq!(by_day["total"]["input_tokens"], 300);
    assert_eq!(by_day["total"]["output_tokens"], 60);
    assert_eq!(by_day["total"]["cache_read_tokens"], 15);
    assert_eq!(by_day["total"]["cache_write_tokens"], 3);
    assert_eq!(by_day["total"]["total_tokens"], 378);
    assert_eq!(by_day["total"]["cost"], 0.25);

    let by_user = json_of(&home, &["usage", "--by", "user", "--json"]).await;
    let keys: Vec<&str> = by_user["rows"].as_array().unwrap().iter().map(|row| row["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["alice", "bob"]);
    let by_model = json_of(&home, &["usage", "--by", "model", "--since", "60d", "--json"]).await;
    let models: Vec<(&str, u64)> = by_model["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["key"].as_str().unwrap(), row["calls"].as_u64().unwrap()))
        .collect();
    assert_eq!(models, [("local/free", 2), ("local/priced", 2)]);
    let bob = json_of(&home, &["usage", "--user", "bob", "--since", "60d", "--json"]).await;
    assert_eq!(bob["total"]["calls"], 3);
    assert_eq!(bob["total"]["cost"], 1.25);
    let recent = json_of(&home, &["usage", "--user", "bob", "--since", "1d", "--json"]).await;
    assert_eq!(recent["total"]["calls"], 2);

    let table = home.run(&["usage", "--by", "user"]).await.success().stdout;
    assert!(table.lines().next().unwrap().contains("CACHE WRITE") && table.contains("COST"), "{table}");
    let unpriced = home.run(&["usage", "--user", "alice"]).await.success().stdout;
    assert!(!unpriced.contains("COST"), "no cost column without a priced call: {unpriced}");

    let error = refused(&home, &["usage", "--user", "nobody"], 1).await;
    assert!(error.contains("can't show the usage of \"nobody\": there is no such user"), "{error}");
    let error = refused(&home, &["usage", "--since", "nonsense"], 1).await;
    assert!(error.contains("can't read --since \"nonsense\""), "{error}");
    refused(&home, &["usage", "--by", "planet"], 2).await;
}

/// The rows of `audit_log` as stored.
fn stored_rows(connection: &rusqlite::Connection) -> Vec<AuditRow> {
    let mut statement = connection
        .prepare("SELECT seq, at_ms, kind, actor, subject, ok, detail, prev_hash, hash FROM audit_log ORDER BY seq")
        .unwrap();
    statement
        .query_map([], |row| {
            Ok(AuditRow {
                seq: row.get::<_, i64>(0)? as u64,
                event: AuditEvent {
                    at_ms: row.get(1)?,
                    kind: AuditKind::from_name(&row.get::<_, String>(2)?).unwrap(),
                    actor: row.get(3)?,
                    subject: row.get(4)?,
                    ok: row.get(5)?,
                    detail: row.get(6)?,
                },
                prev_hash: row.get(7)?,
                hash: row.get(8)?,
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Writes `row` into `audit_log` behind squidbot's back.
fn insert_row(connection: &rusqlite::Connection, row: &AuditRow) {
    connection
        .execute(
            "INSERT INTO audit_log (seq, at_ms, kind, actor, subject, ok, detail, prev_hash, hash) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            rusqlite::params![
                row.seq as i64,
                row.event.at_ms,
                row.event.kind.name(),
                row.event.actor,
                row.event.subject,
                row.event.ok,
                row.event.detail,
                row.prev_hash,
                row.hash
            ],
        )
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_catches_an_edited_row_deleted_rows_and_a_chain_recomputed_without_the_key() {
    let (_server, home) = people_home().await;
    home.run(&["users", "add", "bob", "--role", "child"]).await.success();
    home.run(&["users", "role", "bob", "guest"]).await.success();
    home.run(&["users", "disable", "bob"]).await.success();
    let verified = home.run(&["audit", "verify"]).await.success();
    assert_eq!(verified.stdout.trim(), "ok: 4 rows, chain intact", "the owner, add, role, disable");

    let rows = json_of(&home, &["audit", "--json"]).await;
    assert_eq!(rows.as_array().unwrap().len(), 4);
    let limited = json_of(&home, &["audit", "--limit", "2", "--json"]).await;
    assert_eq!(limited[0]["seq"], 3, "the newest, oldest first: {limited}");
    assert_eq!(limited[1]["detail"]["action"], "disable");
    assert_eq!(json_of(&home, &["audit", "--since", "1h", "--user", "system", "--json"]).await[0]["seq"], 1);
    let text = home.run(&["audit"]).await.success().stdout;
    assert!(text.contains("role_change") && text.contains("user_change"), "{text}");
    refused(&home, &["audit", "--since", "nonsense"], 1).await;

    let connection = rusqlite::Connection::open(home.path().join("squidbot.db")).unwrap();
    let original = stored_rows(&connection);
    // An edited row.
    let forged_detail = "{\"new\":\"admin\",\"old\":\"child\"}";
    connection.execute("UPDATE audit_log SET detail = ?1 WHERE seq = 3", [forged_detail]).unwrap();
    let error = refused(&home, &["audit", "verify"], 1).await;
    assert!(error.contains("row 3 was edited"), "{error}");
    connection.execute("UPDATE audit_log SET detail = ?1 WHERE seq = 3", [&original[2].event.detail]).unwrap();
    home.run(&["audit", "verify"]).await.success();

    // The last row deleted.
    connection.execute("DELETE FROM audit_log WHERE seq = 4", []).unwrap();
    let error = refused(&home, &["audit", "verify"], 1).await;
    assert!(error.contains("rows are missing") && error.contains("row 4"), "{error}");
    insert_row(&connection, &original[3]);
    home.run(&["audit", "verify"]).await.success();
    // A row in the middle deleted.
    connection.execute("DELETE FROM audit_log WHERE seq = 2", []).unwrap();
    let error = refused(&home, &["audit", "verify"], 1).await;
    assert!(error.contains("expected row 2, found 3"), "{error}");

    // The whole chain recomputed, and the head sealed, with a key that is not squidbot's.
    let forger = b"not the key in audit.key".to_vec();
    connection.execute("DELETE FROM audit_log", []).unwrap();
    let mut head = None;
    for stored in &original {
        let mut event = stored.event.clone();
        if stored.seq == 3 {
            event.detail = forged_detail.to_owned();
        }
        let row = next_row(&forger, head.as_ref(), event);
        head = Some(head_after(&forger, head.as_ref(), &row));
        insert_row(&connection, &row);
    }
    let head = head.unwrap();
    connection
        .execute(
            "UPDATE audit_head SET first_seq = ?1, first_prev = ?2, last_seq = ?3, last_hash = ?4, mac = ?5 WHERE id = 1",
            rusqlite::params![head.first_seq as i64, head.first_prev, head.last_seq as i64, head.last_hash, head.mac],
        )
        .unwrap();
    let error = refused(&home, &["audit", "verify"], 1).await;
    assert!(error.contains("without the key"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_installs_are_audited_whether_or_not_they_succeed() {
    let home = Home::new();
    let source = tempfile::tempdir().unwrap();
    let skill = source.path().join("tidy");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(skill.join("SKILL.md"), "---\nname: tidy\ndescription: Tidy up.\n---\n\nTidy it.\n").unwrap();
    let source_text = skill.display().to_string();
    home.run(&["skills", "install", &source_text]).await.success();
    home.run(&["skills", "install", &source_text]).await.failure();

    let rows = audit_rows(&home, &[]).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|row| row["kind"] == "skill_install" && row["actor"] == "cli"));
    assert_eq!(rows[0]["ok"], true);
    assert_eq!(rows[0]["subject"], "tidy");
    assert_eq!(rows[0]["detail"]["source"], source_text.as_str());
    assert_eq!(rows[0]["detail"]["name"], "tidy");
    assert_eq!(rows[1]["ok"], false);
    assert_eq!(rows[1]["subject"], source_text.as_str());
    assert!(rows[1]["detail"]["error"].as_str().unwrap().contains("already installed"), "{}", rows[1]);
    home.run(&["audit", "verify"]).await.success();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_waiting_in_the_gateway_goes_on_when_the_cli_approves() {
    let server = ScriptedLlm::start().await;
    let home = crate::gateway::gateway_home(&server);
    home.append_config("[[approvals.rules]]\nroles = [\"child\"]\ntools = [\"read_file\"]\n");
    home.run(&["users", "add", "kim", "--role", "child"]).await.success();
    let token = home.run(&["users", "token", "kim"]).await.success().stdout.trim().to_owned();
    let gateway = crate::gateway::start(&home).await;

    server.push(squidbot_testkit::Reply::tool_call("read_file", json!({"path": "homework.txt"})));
    server.push(squidbot_testkit::Reply::text("Your homework file is not there."));
    let request = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.base))
        .bearer_auth(&token)
        .json(&json!({"model": "local/test-model", "messages": [{"role": "user", "content": "read my homework"}]}))
        .send();
    let turn = tokio::spawn(request);

    let mut waiting = Value::Null;
    for _ in 0..100 {
        let listed = json_of(&home, &["approvals", "list", "--json"]).await;
        if let Some(first) = listed.as_array().unwrap().first() {
            waiting = first.clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(waiting["tool"], "read_file", "a request waits: {waiting}");
    assert_eq!(waiting["user"], "kim");
    let id = waiting["id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    home.run(&["approvals", "approve", &id]).await.success();
    let response = tokio::time::timeout(std::time::Duration::from_secs(10), turn).await.unwrap().unwrap().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "the turn went on at once");
    let reply: Value = response.json().await.unwrap();
    assert_eq!(reply["choices"][0]["message"]["content"], "Your homework file is not there.", "{reply}");
    let decided = audit_rows(&home, &[]).await.into_iter().rfind(|row| row["kind"] == "approval_decided").unwrap();
    assert_eq!(decided["actor"], "owner");
    assert_eq!(decided["ok"], true);
    server.assert_clean();
    drop(gateway);
}
