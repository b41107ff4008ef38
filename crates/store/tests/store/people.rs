//! People on a real database file: users and identities, the usage ledger against core's
//! in-memory one, budget warnings, approvals, the audit chain and its key, and the
//! migration that brings an older database to the people schema.

use std::path::Path;

use rusqlite::Connection;
use squidbot_core::people::audit::{ChainBreak, VerifyError, head_after, next_row, verify_log};
use squidbot_core::people::memory::MemoryUsage;
use squidbot_core::people::{ApprovalStore, AuditLog, Directory, UsageGrouping, UsageLedger, UsageSubject};
use squidbot_store::{
    ApprovalListing, Database, SCHEMA_VERSION, SqliteApprovals, SqliteAudit, SqliteDirectory, SqliteUsage,
    check_user_id, load_or_create_audit_key,
};
use squidbot_types::people::{
    Actor, ApprovalRequest, ApprovalStatus, AuditEvent, AuditKind, BudgetLimits, Identity, UsageRecord, UsageTotals,
    User,
};

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

fn database() -> (tempfile::TempDir, Database) {
    let directory = tempfile::tempdir().unwrap();
    let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
    (directory, database)
}

fn user(id: &str, role: &str) -> User {
    User {
        id: id.to_owned(),
        name: format!("{id} name"),
        role: role.to_owned(),
        context: format!("user:{id}"),
        created_ms: 1_000,
        disabled: false,
        budget: BudgetLimits::default(),
    }
}

fn identity(text: &str) -> Identity {
    Identity::parse(text).unwrap()
}

#[test]
fn users_are_added_changed_and_removed() {
    let (_directory, database) = database();
    let directory = SqliteDirectory::new(database);
    let mut alice = user("alice", "admin");
    alice.context = "owner".to_owned();
    alice.budget.monthly_cost = Some(12.5);
    directory.add_user(&alice).unwrap();
    directory.add_user(&user("bob", "child")).unwrap();
    assert_eq!(directory.users().unwrap(), vec![alice.clone(), user("bob", "child")]);
    assert_eq!(directory.user("alice").unwrap(), Some(alice.clone()));
    assert_eq!(directory.user("carol").unwrap(), None);
    assert_eq!(directory.by_context("owner").unwrap(), Some(alice.clone()));
    assert_eq!(directory.by_context("user:carol").unwrap(), None);

    let error = directory.add_user(&user("alice", "user")).unwrap_err().to_string();
    assert_eq!(error, "can't add the user alice: there is already a user alice");
    let mut thief = user("mallory", "user");
    thief.context = "owner".to_owned();
    let error = directory.add_user(&thief).unwrap_err().to_string();
    assert!(error.contains("the memory context owner is already alice's"), "{error}");
    for bad in ["Bob", "", "-x", "a b", &"x".repeat(33)] {
        let error = directory.add_user(&user(bad, "user")).unwrap_err().to_string();
        assert!(error.starts_with(&format!("can't add the user {bad}: ")), "{error}");
        assert!(check_user_id(bad).is_err());
    }

    directory.set_role("bob", "user").unwrap();
    directory.set_name("bob", "Robert").unwrap();
    directory.set_disabled("bob", true).unwrap();
    let budget = BudgetLimits { daily_tokens: Some(50_000), monthly_tokens: Some(u64::MAX), ..BudgetLimits::default() };
    directory.set_budget("bob", &budget).unwrap();
    let bob = directory.user("bob").unwrap().unwrap();
    assert_eq!((bob.role.as_str(), bob.name.as_str(), bob.disabled), ("user", "Robert", true));
    assert_eq!(bob.budget.daily_tokens, Some(50_000));
    assert_eq!(bob.budget.monthly_tokens, Some(i64::MAX as u64), "counts past i64 saturate");
    directory.set_disabled("bob", false).unwrap();
    assert!(!directory.user("bob").unwrap().unwrap().disabled);
    let error = directory.set_role("carol", "admin").unwrap_err().to_string();
    assert_eq!(error, "can't change the role of carol: there is no user carol");
    assert!(directory.set_budget("carol", &budget).is_err());

    directory.set_token_hash("bob", Some("hash-1"), 5_000).unwrap();
    assert_eq!(directory.by_token_hash("hash-1").unwrap().map(|user| user.id), Some("bob".to_owned()));
    assert_eq!(directory.token_created_ms("bob").unwrap(), Some(5_000));
    assert!(directory.set_token_hash("alice", Some("hash-1"), 6_000).is_err(), "a hash is one user's");
    directory.set_token_hash("bob", None, 7_000).unwrap();
    assert_eq!(directory.by_token_hash("hash-1").unwrap(), None);
    assert_eq!(directory.token_created_ms("bob").unwrap(), None);

    assert!(directory.remove_user("bob").unwrap());
    assert!(!directory.remove_user("bob").unwrap());
    assert_eq!(directory.users().unwrap(), vec![alice]);
}

#[test]
fn an_identity_linked_to_someone_else_is_refused_naming_them() {
    let (_directory, database) = database();
    let directory = SqliteDirectory::new(database);
    directory.add_user(&user("alice", "admin")).unwrap();
    directory.add_user(&user("bob", "user")).unwrap();
    assert!(directory.link("alice", &identity("telegram:123"), 10).unwrap());
    assert!(directory.link("alice", &identity("matrix:@alice:example.org"), 11).unwrap());
    assert!(!directory.link("alice", &identity("telegram:123"), 12).unwrap(), "linking again changes nothing");

    let error = directory.link("bob", &identity("telegram:123"), 13).unwrap_err().to_string();
    assert_eq!(error, "can't link telegram:123 to bob: it is linked to alice");
    let error = directory.link("carol", &identity("telegram:9"), 13).unwrap_err().to_string();
    assert_eq!(error, "can't link telegram:9 to carol: there is no user carol");

    assert_eq!(directory.by_identity(&identity("telegram:123")).unwrap().map(|user| user.id), Some("alice".into()));
    assert_eq!(directory.by_identity(&identity("telegram:124")).unwrap(), None);
    assert_eq!(
        directory.identities("alice").unwrap(),
        vec![identity("matrix:@alice:example.org"), identity("telegram:123")]
    );
    assert!(directory.unlink(&identity("telegram:123")).unwrap());
    assert!(!directory.unlink(&identity("telegram:123")).unwrap());
    assert!(directory.link("bob", &identity("telegram:123"), 14).unwrap());

    // Removing a user removes their links, so the identity is free again.
    assert!(directory.remove_user("bob").unwrap());
    assert!(directory.identities("bob").unwrap().is_empty());
    assert!(directory.link("alice", &identity("telegram:123"), 15).unwrap());
}

fn record(at_ms: i64, user: Option<&str>, context: &str, model: &str, tokens: u64, cost: Option<f64>) -> UsageRecord {
    let (provider, model) = model.split_once('/').unwrap();
    UsageRecord {
        at_ms,
        user: user.map(str::to_owned),
        context: context.to_owned(),
        session_key: format!("session-of-{context}"),
        agent: "assistant".to_owned(),
        provider: provider.to_owned(),
        model: model.to_owned(),
        input_tokens: tokens,
        output_tokens: tokens / 2,
        cache_read_tokens: tokens / 4,
        cache_write_tokens: tokens / 8,
        cost,
    }
}

/// Same counts, and the same cost up to rounding (the two sum in different orders).
fn assert_same(left: &UsageTotals, right: &UsageTotals, what: &str) {
    assert_eq!(UsageTotals { cost: 0.0, ..*left }, UsageTotals { cost: 0.0, ..*right }, "{what}");
    assert!((left.cost - right.cost).abs() < 1e-9, "{what}: {} vs {}", left.cost, right.cost);
}

#[test]
fn usage_totals_and_breakdowns_match_the_in_memory_ledger() {
    let (_directory, database) = database();
    let sqlite = SqliteUsage::new(database);
    let memory = MemoryUsage::default();
    let day = 86_400_000;
    let base = 1_767_225_600_000; // 2026-01-01T00:00:00Z
    let records = [
        record(base - day, Some("alice"), "owner", "openai/gpt-5", 1_000, Some(0.5)),
        record(base, Some("alice"), "owner", "openai/gpt-5", 2_000, Some(0.25)),
        record(base + 10, Some("alice"), "group:slack:C1", "anthropic/claude", 300, None),
        record(base + day - 400, Some("bob"), "user:bob", "anthropic/claude", 40, Some(0.125)),
        record(base + day - 600, None, "user:telegram:42", "openai/gpt-5", 5, Some(0.1)),
        record(base + 2 * day, None, "user:telegram:42", "openai/mini", 7, Some(0.2)),
        record(base + 2 * day + 1, None, "group:slack:C1", "openai/mini", 11, None),
        record(-5_000, Some("carol"), "user:carol", "openai/mini", 1, Some(1.0)),
    ];
    for record in &records {
        sqlite.record(record).unwrap();
        memory.record(record).unwrap();
    }
    let subjects = [
        UsageSubject::User("alice".into()),
        UsageSubject::User("bob".into()),
        UsageSubject::User("nobody".into()),
        UsageSubject::Context("user:telegram:42".into()),
        UsageSubject::Context("group:slack:C1".into()),
        UsageSubject::Context("owner".into()),
    ];
    for since in [i64::MIN, 0, base, base + day, base + 3 * day] {
        for subject in &subjects {
            let what = format!("{subject:?} since {since}");
            assert_same(&sqlite.totals(subject, since).unwrap(), &memory.totals(subject, since).unwrap(), &what);
        }
        for user in [None, Some("alice"), Some("carol"), Some("nobody")] {
            for by in [UsageGrouping::User, UsageGrouping::Model, UsageGrouping::Day] {
                let what = format!("{by:?} of {user:?} since {since}");
                let stored = sqlite.breakdown(since, user, by).unwrap();
                let expected = memory.breakdown(since, user, by).unwrap();
                let keys = |rows: &[(String, UsageTotals)]| rows.iter().map(|(key, _)| key.clone()).collect::<Vec<_>>();
                assert_eq!(keys(&stored), keys(&expected), "{what}");
                for ((key, left), (_, right)) in stored.iter().zip(&expected) {
                    assert_same(left, right, &format!("{what}, {key}"));
                }
            }
        }
    }
    let days = sqlite.breakdown(i64::MIN, None, UsageGrouping::Day).unwrap();
    let days: Vec<&str> = days.iter().map(|(key, _)| key.as_str()).collect();
    // 400 ms before midnight is still the day before.
    assert_eq!(days, ["1970-01-01", "2025-12-31", "2026-01-01", "2026-01-03"]);

    // A purge takes the person's calls everywhere and the context's calls without a user.
    assert_eq!(sqlite.delete_of(Some("alice"), "owner").unwrap(), 3);
    assert_eq!(sqlite.delete_of(None, "user:telegram:42").unwrap(), 2);
    assert_eq!(sqlite.totals(&UsageSubject::User("bob".into()), 0).unwrap().calls, 1);
    assert_eq!(sqlite.totals(&UsageSubject::Context("group:slack:C1".into()), 0).unwrap().calls, 1);
    assert_eq!(sqlite.delete_before(0).unwrap(), 1, "carol's call before 1970");
}

#[test]
fn a_budget_warning_is_given_once() {
    let (_directory, database) = database();
    let usage = SqliteUsage::new(database.clone());
    assert!(usage.first_notice("alice:day:2026-01-01").unwrap());
    assert!(!usage.first_notice("alice:day:2026-01-01").unwrap());
    assert!(usage.first_notice("alice:month:2026-01").unwrap());
    // Another process (another store on the file) sees the same.
    assert!(!SqliteUsage::new(database).first_notice("alice:month:2026-01").unwrap());
}

fn request(id: &str, created_ms: i64) -> ApprovalRequest {
    ApprovalRequest {
        id: id.to_owned(),
        created_ms,
        expires_ms: created_ms + 600_000,
        actor: Actor {
            user: Some("bob".into()),
            name: "Bob".into(),
            role: "child".into(),
            context: "user:bob".into(),
            session: Some("telegram:42".into()),
        },
        session_key: "telegram:42".to_owned(),
        tool: "exec".to_owned(),
        arguments: r#"{"command":"ls"}"#.to_owned(),
        rule: "children ask before running commands".to_owned(),
        status: ApprovalStatus::Pending,
        decided_ms: None,
    }
}

#[test]
fn approvals_settle_only_once() {
    let (_directory, database) = database();
    let approvals = SqliteApprovals::new(database.clone());
    approvals.create(&request("7F3K2Q", 200)).unwrap();
    approvals.create(&request("abc234", 100)).unwrap();
    approvals.create(&request("ZZZ999", 300)).unwrap();
    let error = approvals.create(&request("7f3k2q", 400)).unwrap_err().to_string();
    assert_eq!(error, "can't store the approval request 7F3K2Q: another request has that id");

    assert_eq!(approvals.get("7f3k2q").unwrap(), Some(request("7F3K2Q", 200)));
    assert_eq!(approvals.get("ABC234").unwrap().map(|request| request.id), Some("ABC234".to_owned()));
    assert_eq!(approvals.get("NOPE00").unwrap(), None);
    let pending: Vec<String> = approvals.pending().unwrap().into_iter().map(|request| request.id).collect();
    assert_eq!(pending, ["ABC234", "7F3K2Q", "ZZZ999"]);

    let denied = ApprovalStatus::Denied { by: "alice".into(), reason: Some("not now".into()) };
    assert!(approvals.settle("7f3k2q", &denied, 500).unwrap());
    // A second admin, or the timeout, comes too late.
    assert!(!approvals.settle("7F3K2Q", &ApprovalStatus::Approved { by: "carol".into() }, 501).unwrap());
    assert!(!SqliteApprovals::new(database).settle("7F3K2Q", &ApprovalStatus::Expired, 502).unwrap());
    assert!(!approvals.settle("NOPE00", &ApprovalStatus::Expired, 502).unwrap());
    let settled = approvals.get("7F3K2Q").unwrap().unwrap();
    assert_eq!((settled.status, settled.decided_ms), (denied, Some(500)));
    assert!(approvals.settle("abc234", &ApprovalStatus::Approved { by: "alice".into() }, 600).unwrap());
    assert!(approvals.settle("ZZZ999", &ApprovalStatus::Abandoned, 700).unwrap());
    assert_eq!(approvals.get("ZZZ999").unwrap().unwrap().status, ApprovalStatus::Abandoned);
    assert_eq!(approvals.get("ABC234").unwrap().unwrap().status, ApprovalStatus::Approved { by: "alice".into() });
    assert!(approvals.pending().unwrap().is_empty());

    approvals.create(&request("NEW234", 800)).unwrap();
    let listed = |limit, listing| -> Vec<String> {
        approvals.list(limit, listing).unwrap().into_iter().map(|request| request.id).collect()
    };
    assert_eq!(listed(10, ApprovalListing::All), ["NEW234", "ZZZ999", "7F3K2Q", "ABC234"]);
    assert_eq!(listed(2, ApprovalListing::All), ["NEW234", "ZZZ999"]);
    assert_eq!(listed(10, ApprovalListing::Pending), ["NEW234"]);
    assert_eq!(approvals.delete_settled_before(250).unwrap(), 2);
    assert_eq!(listed(10, ApprovalListing::All), ["NEW234", "ZZZ999"]);
}

fn event(number: usize) -> AuditEvent {
    AuditEvent {
        at_ms: 1_000 * i64::try_from(number).unwrap(),
        kind: if number.is_multiple_of(2) { AuditKind::ToolCall } else { AuditKind::Login },
        actor: "alice".to_owned(),
        subject: format!("subject {number}"),
        ok: !number.is_multiple_of(3),
        detail: format!(r#"{{"n":{number}}}"#),
    }
}

fn sql(database_path: &Path, statement: &str) {
    Connection::open(database_path).unwrap().execute_batch(statement).unwrap();
}

fn broken(key: &[u8], audit: &SqliteAudit) -> ChainBreak {
    match verify_log(key, audit) {
        Err(VerifyError::Broken(broken)) => broken,
        other => panic!("expected a broken chain, got {other:?}"),
    }
}

#[test]
fn the_audit_chain_finds_edits_deletions_and_forgeries() {
    let (directory, database) = database();
    let path = directory.path().join("squidbot.db");
    let audit = SqliteAudit::new(database, KEY);
    assert_eq!(audit.head().unwrap(), None);
    assert_eq!(audit.verify().unwrap(), 0);
    for number in 1..=6 {
        let row = audit.append(event(number)).unwrap();
        assert_eq!(row.seq, u64::try_from(number).unwrap());
    }
    assert_eq!(audit.verify().unwrap(), 6);
    assert_eq!(audit.rows(2, 2).unwrap().iter().map(|row| row.seq).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(audit.rows(0, 100).unwrap()[0].event, event(1));

    // An edited row.
    sql(&path, "UPDATE audit_log SET subject = 'something else' WHERE seq = 3");
    assert_eq!(broken(KEY, &audit), ChainBreak::Edited { seq: 3 });
    sql(&path, "UPDATE audit_log SET subject = 'subject 3' WHERE seq = 3");
    assert_eq!(audit.verify().unwrap(), 6);

    // The last row deleted: the head, kept apart, still counts it.
    let (directory_two, database_two) = self::database();
    let path_two = directory_two.path().join("squidbot.db");
    let second = SqliteAudit::new(database_two, KEY);
    for number in 1..=4 {
        second.append(event(number)).unwrap();
    }
    sql(&path_two, "DELETE FROM audit_log WHERE seq = 4");
    assert_eq!(broken(KEY, &second), ChainBreak::Missing { expected: 4, found: 0 });
    // Rows written afterwards leave the gap in plain sight.
    second.append(event(5)).unwrap();
    assert_eq!(broken(KEY, &second), ChainBreak::Missing { expected: 4, found: 5 });
    // Deleting the head too, to start over, is refused rather than chained over.
    sql(&path_two, "DELETE FROM audit_head");
    assert_eq!(broken(KEY, &second), ChainBreak::NoHead);
    let error = second.append(event(6)).unwrap_err().to_string();
    assert!(error.starts_with("can't write the audit trail: the audit head is missing"), "{error}");

    // The whole chain and head recomputed with another key, as someone without the real
    // key would: the head's seal gives it away.
    let other_key = b"not the key of this installation";
    let mut head = None;
    let mut statements = String::from("DELETE FROM audit_log; DELETE FROM audit_head;");
    for number in 1..=6 {
        let row = next_row(other_key, head.as_ref(), event(number));
        head = Some(head_after(other_key, head.as_ref(), &row));
        statements.push_str(&format!(
            "INSERT INTO audit_log (seq, at_ms, kind, actor, subject, ok, detail, prev_hash, hash) \
             VALUES ({}, {}, '{}', '{}', '{}', {}, '{}', '{}', '{}');",
            row.seq,
            row.event.at_ms,
            row.event.kind.name(),
            row.event.actor,
            row.event.subject,
            i32::from(row.event.ok),
            row.event.detail,
            row.prev_hash,
            row.hash
        ));
    }
    let head = head.unwrap();
    statements.push_str(&format!(
        "INSERT INTO audit_head (id, first_seq, first_prev, last_seq, last_hash, mac) \
         VALUES (1, {}, '{}', {}, '{}', '{}');",
        head.first_seq, head.first_prev, head.last_seq, head.last_hash, head.mac
    ));
    sql(&path, &statements);
    assert_eq!(verify_log(other_key, &audit).unwrap(), 6, "the forgery is consistent in itself");
    assert_eq!(broken(KEY, &audit), ChainBreak::ForgedHead);
    assert!(audit.append(event(7)).is_err(), "a forged head is never sealed with the real key");
    assert!(audit.prune_before(i64::MAX).is_err(), "nor by pruning");
}

#[test]
fn pruning_keeps_the_rest_verifiable() {
    let (_directory, database) = database();
    let audit = SqliteAudit::new(database, KEY);
    assert_eq!(audit.prune_before(10_000).unwrap(), 0, "nothing to prune yet");
    for number in 1..=8 {
        audit.append(event(number)).unwrap();
    }
    assert_eq!(audit.prune_before(3_500).unwrap(), 3);
    assert_eq!(audit.verify().unwrap(), 5);
    assert_eq!(audit.head().unwrap().unwrap().first_seq, 4);
    assert_eq!(audit.prune_before(3_500).unwrap(), 0);
    audit.append(event(9)).unwrap();
    assert_eq!(audit.verify().unwrap(), 6);

    // Everything pruned: the head remembers where the chain ended, and the next row
    // follows on from it.
    assert_eq!(audit.prune_before(i64::MAX).unwrap(), 6);
    assert_eq!(audit.verify().unwrap(), 0);
    let head = audit.head().unwrap().unwrap();
    assert_eq!((head.first_seq, head.last_seq), (10, 9));
    assert_eq!(audit.append(event(10)).unwrap().seq, 10);
    assert_eq!(audit.verify().unwrap(), 1);
}

#[cfg(unix)]
#[test]
fn the_audit_key_is_made_once_private_and_read_back_the_same() {
    use std::os::unix::fs::PermissionsExt;

    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("keys").join("audit.key");
    let key = load_or_create_audit_key(&path).unwrap();
    assert_eq!(key.len(), 32);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(load_or_create_audit_key(&path).unwrap(), key);
    let other = load_or_create_audit_key(&directory.path().join("another.key")).unwrap();
    assert_ne!(other, key, "each installation gets its own");

    std::fs::write(&path, "not a key").unwrap();
    let error = load_or_create_audit_key(&path).unwrap_err().to_string();
    assert!(error.starts_with(&format!("can't read the audit key {}", path.display())), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a key", "a bad key file is never replaced");
}

#[test]
fn a_database_of_schema_seven_upgrades_with_its_data() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("squidbot.db");
    {
        let connection = Connection::open(&path).unwrap();
        for sql in [
            include_str!("../../migrations/0001_initial.sql"),
            include_str!("../../migrations/0002_memory_contexts.sql"),
            include_str!("../../migrations/0003_bus.sql"),
            include_str!("../../migrations/0004_jobs.sql"),
            include_str!("../../migrations/0005_scheduler.sql"),
            include_str!("../../migrations/0006_channel_access.sql"),
            include_str!("../../migrations/0007_job_runs.sql"),
        ] {
            connection.execute_batch(sql).unwrap();
        }
        connection.pragma_update(None, "application_id", squidbot_store::APPLICATION_ID).unwrap();
        connection.pragma_update(None, "user_version", 7).unwrap();
        connection
            .execute_batch(
                "INSERT INTO memories (id, context, type, content, importance, source, created_at, updated_at, normalized)
                 VALUES (1, 'owner', 'fact', 'tea', 0.5, 't', 0, 0, 'tea');
                 INSERT INTO sessions (key, context, status, created_at, updated_at) VALUES ('cli:local', 'owner', 'active', 1, 2);
                 INSERT INTO approved_senders (channel, sender_id, approved_at_ms) VALUES ('telegram', '42', 5);",
            )
            .unwrap();
    }
    assert_eq!(SCHEMA_VERSION, 11);
    let database = Database::open(&path).unwrap();
    let connection = Connection::open(&path).unwrap();
    let count = |table: &str| -> i64 {
        connection.query_row(&format!("SELECT count(*) FROM {table}"), [], |row| row.get(0)).unwrap()
    };
    assert_eq!((count("memories"), count("sessions"), count("approved_senders")), (1, 1, 1));
    let counts: (i64, i64) = connection
        .query_row("SELECT memories, changes FROM memory_contexts WHERE context = 'owner'", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .unwrap();
    assert_eq!(counts, (1, 1));
    let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
    assert_eq!(version, 11);
    // The new tables work at once.
    let directory = SqliteDirectory::new(database);
    directory.add_user(&user("alice", "admin")).unwrap();
    assert_eq!(directory.users().unwrap().len(), 1);
}

/// The per-day sums budget checks read stay equal to the calls themselves through
/// inserts, deletes and moves (a stranger's usage merged into a person's).
#[test]
fn daily_sums_follow_every_change_of_the_calls() {
    let (_directory, database) = database();
    let ledger = SqliteUsage::new(database.clone());
    let day = 86_400_000;
    let base = 1_767_225_600_000; // 2026-01-01T00:00:00Z
    for index in 0..200_i64 {
        let user = if index % 3 == 0 { None } else { Some(["ann", "bob"][(index % 2) as usize]) };
        let context = if user.is_none() { "user:telegram:7" } else { "owner" };
        let cost = (index % 4 != 0).then_some(0.25);
        ledger
            .record(&record(base + index * day / 7 - 3 * day, user, context, "openai/gpt", 10 + index as u64, cost))
            .unwrap();
    }
    let connection = rusqlite::Connection::open(database.path()).unwrap();
    connection.execute("DELETE FROM usage WHERE id % 5 = 0", []).unwrap();
    connection
        .execute(
            "UPDATE usage SET user_id = 'bob', context = 'user:bob' WHERE context = 'user:telegram:7' AND id % 2 = 0",
            [],
        )
        .unwrap();
    let raw = |subject: &UsageSubject, since: i64| -> (i64, i64, f64) {
        let (filter, who) = match subject {
            UsageSubject::User(user) => ("user_id = ?1", user.as_str()),
            UsageSubject::Context(context) => ("user_id IS NULL AND context = ?1", context.as_str()),
        };
        connection
            .query_row(
                &format!("SELECT count(*), coalesce(sum(input_tokens), 0), total(cost) FROM usage WHERE {filter} AND at_ms >= ?2"),
                rusqlite::params![who, since],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .unwrap()
    };
    let subjects = [
        UsageSubject::User("ann".into()),
        UsageSubject::User("bob".into()),
        UsageSubject::Context("user:telegram:7".into()),
        UsageSubject::Context("owner".into()),
    ];
    for subject in &subjects {
        for since in [0, base - 2 * day, base, base + 5 * day, base + 40 * day] {
            let summed = ledger.totals(subject, since).unwrap();
            let (calls, input, cost) = raw(subject, since);
            assert_eq!((summed.calls as i64, summed.input_tokens as i64), (calls, input), "{subject:?} since {since}");
            assert!((summed.cost - cost).abs() < 1e-9, "{subject:?} since {since}: {} vs {cost}", summed.cost);
        }
    }
}
