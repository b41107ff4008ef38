//! People's policy overhead on the real SQLite stores: the role policy and the audit
//! write around one tool call, the budget check before one turn, and the usage row after
//! one model call, and a vault lookup once unlocked, on a database already holding 100,000 usage rows and 20,000 audit
//! rows. Prints p50/p99 of single calls (the target: under 0.5 ms at p99) beside a
//! baseline timed the same way (reading a 1 KiB file, what the simplest tool does), then
//! criterion's estimates.
//!
//! `cargo bench -p squidbot-store --bench people`; `SQUIDBOT_BENCH_SAMPLES` (default
//! 5,000) sets the single calls timed for the percentiles.

#![allow(clippy::expect_used, reason = "a benchmark aborts loudly on any setup failure")]

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, criterion_group};
use serde_json::json;
use squidbot_core::clock::{SystemClock, unix_millis};
use squidbot_core::people::{Admission, AuditLog, People, PeopleSettings, PeopleStores, UsageLedger};
use squidbot_store::{Database, SqliteApprovals, SqliteAudit, SqliteDirectory, SqliteUsage};
use squidbot_types::config::UserRoleConfig;
use squidbot_types::message::Usage;
use squidbot_types::people::{Actor, AuditEvent, AuditKind, UsageRecord, User};
use tokio_util::sync::CancellationToken;

const USAGE_ROWS: usize = 100_000;
const AUDIT_ROWS: usize = 20_000;
const KEY: &[u8] = b"benchmark audit key, 32 bytes..";

struct Fixture {
    _directory: tempfile::TempDir,
    people: People,
    bob: Actor,
}

fn fixture() -> Fixture {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let database = Database::open(&directory.path().join("squidbot.db")).expect("the database");
    let users = SqliteDirectory::new(database.clone());
    let now = unix_millis(SystemTime::now());
    for (index, role) in ["admin", "user", "child", "user"].iter().enumerate() {
        let id = ["ann", "bob", "kim", "zed"][index];
        users
            .add_user(&User {
                id: id.into(),
                name: id.into(),
                role: (*role).into(),
                context: if id == "ann" { "owner".into() } else { format!("user:{id}") },
                created_ms: now,
                disabled: false,
                budget: Default::default(),
            })
            .expect("a user");
    }
    let usage = SqliteUsage::new(database.clone());
    let people_ids = ["ann", "bob", "kim", "zed"];
    for index in 0..USAGE_ROWS {
        let user = people_ids[index % 4];
        usage
            .record(&UsageRecord {
                // Spread over the last 60 days.
                at_ms: now - (index as i64 % 60) * 86_400_000 - index as i64,
                user: Some(user.into()),
                context: format!("user:{user}"),
                session_key: format!("telegram:{user}"),
                agent: "assistant".into(),
                provider: "openai".into(),
                model: "gpt".into(),
                input_tokens: 100,
                output_tokens: 20,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                cost: Some(0.001),
            })
            .expect("a usage row");
    }
    let audit = SqliteAudit::new(database.clone(), KEY);
    for index in 0..AUDIT_ROWS {
        audit
            .append(AuditEvent {
                at_ms: now,
                kind: AuditKind::ToolCall,
                actor: "bob".into(),
                subject: "read_file".into(),
                ok: true,
                detail: format!("{{\"arguments\":{{\"path\":\"notes/{index}.md\"}}}}"),
            })
            .expect("an audit row");
    }
    let mut roles = std::collections::BTreeMap::new();
    roles.insert(
        "user".to_owned(),
        UserRoleConfig {
            budget_daily_tokens: Some(u64::MAX / 4),
            budget_monthly_cost: Some(1e12),
            ..Default::default()
        },
    );
    let settings = PeopleSettings::new(&roles, &Default::default(), &Default::default());
    let stores = PeopleStores {
        directory: Arc::new(users.clone()),
        usage: Arc::new(usage),
        audit: Arc::new(audit),
        approvals: Arc::new(SqliteApprovals::new(database)),
    };
    let people = People::new(settings, stores, Arc::new(SystemClock));
    let bob = Actor::of(&users.user_of_id("bob"));
    Fixture { _directory: directory, people, bob }
}

trait UserOf {
    fn user_of_id(&self, id: &str) -> User;
}

impl UserOf for SqliteDirectory {
    fn user_of_id(&self, id: &str) -> User {
        use squidbot_core::people::Directory as _;
        self.user(id).expect("the directory").expect("the user")
    }
}

/// One tool call's policy work: the role check and rules (`read_file` runs without
/// asking), then the audit row of the call.
fn tool_call(fixture: &Fixture, runtime: &tokio::runtime::Runtime, cancel: &CancellationToken) {
    let arguments = json!({"path": "notes/today.md"});
    let allowed = runtime.block_on(fixture.people.authorize(
        &fixture.bob,
        "telegram:bob",
        "read_file",
        false,
        &arguments,
        &|_| {},
        cancel,
    ));
    assert!(allowed.is_ok());
    fixture.people.audit(AuditKind::ToolCall, &fixture.bob, "read_file", true, json!({"arguments": arguments}));
}

fn turn_admission(fixture: &Fixture) {
    let admitted = fixture.people.admit_turn(&fixture.bob);
    assert!(matches!(admitted, Admission::Admit | Admission::AdmitWithNotice(_)));
}

fn model_call(fixture: &Fixture) {
    let usage = Usage { input_tokens: 1200, output_tokens: 80, cached_input_tokens: 1000, cache_write_tokens: 0 };
    fixture.people.record_usage(&fixture.bob, "telegram:bob", "assistant", "openai/gpt", &usage);
}

fn percentiles(name: &str, samples: usize, mut once: impl FnMut()) {
    let mut times: Vec<Duration> = (0..samples)
        .map(|_| {
            let began = Instant::now();
            once();
            began.elapsed()
        })
        .collect();
    times.sort();
    let at = |share: f64| times[((times.len() as f64 * share) as usize).min(times.len() - 1)];
    println!(
        "{name:<28} p50 {:>8.1} µs   p99 {:>8.1} µs   max {:>8.1} µs   ({samples} calls)",
        at(0.50).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        times[times.len() - 1].as_secs_f64() * 1e6,
    );
}

fn benches(criterion: &mut Criterion) {
    let fixture = fixture();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let cancel = CancellationToken::new();
    let samples = std::env::var("SQUIDBOT_BENCH_SAMPLES").ok().and_then(|value| value.parse().ok()).unwrap_or(5_000);
    // The baseline beside them: what the simplest tool call does itself (read a 1 KiB
    // file), timed the same way in the same run.
    let note = fixture._directory.path().join("note.md");
    std::fs::write(&note, "x".repeat(1024)).expect("a note");
    percentiles("baseline (read a 1 KiB file)", samples, || {
        assert_eq!(std::fs::read_to_string(&note).map(|text| text.len()).ok(), Some(1024));
    });
    percentiles("tool call (policy + audit)", samples, || tool_call(&fixture, &runtime, &cancel));
    percentiles("turn (budget check)", samples, || turn_admission(&fixture));
    percentiles("model call (usage row)", samples, || model_call(&fixture));
    // The vault, once unlocked: a lookup of a secret already read once.
    let vault = squidbot_store::Vault::open(
        Database::open(&fixture._directory.path().join("squidbot.db")).expect("the database"),
        &squidbot_store::VaultKey::from_bytes([7; 32]),
    )
    .expect("the vault");
    vault.set("openai", "sk-bench-value").expect("a secret");
    percentiles("vault lookup (unlocked)", samples, || {
        assert!(vault.get("openai").expect("the vault").is_some());
    });
    let mut group = criterion.benchmark_group("people");
    group.bench_function("tool_call_policy_and_audit", |bench| bench.iter(|| tool_call(&fixture, &runtime, &cancel)));
    group.bench_function("turn_budget_check", |bench| bench.iter(|| turn_admission(&fixture)));
    group.bench_function("model_call_usage_row", |bench| bench.iter(|| model_call(&fixture)));
    group.finish();
}

criterion_group!(people, benches);

fn main() {
    people();
    Criterion::default().configure_from_args().final_summary();
}
