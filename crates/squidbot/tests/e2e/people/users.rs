//! `squidbot users` and `onboard`: users added, changed, linked (a stranger's context
//! merged), approved from a pairing code, purged; and the one-line errors of bad input.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};
use squidbot_channels::{PairingCodes, SeededRandom};
use squidbot_core::memory::MemoryDocuments;
use squidbot_core::people::Directory;
use squidbot_core::people::tokens::token_hash;
use squidbot_store::{ChannelAccessStore, FsMemoryDocuments, SqliteChannelAccess, SqliteDirectory};
use squidbot_testkit::ScriptedLlm;
use squidbot_types::channel::Sender;

use super::{
    audit_rows, database, json_of, listed_user, memory_contexts, people_home, record_usage, refused, session_context,
    stranger_was_here,
};
use crate::harness::Home;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_add_role_link_show_token_budget_disable_and_unlink_round_trip() {
    let (_server, home) = people_home().await;
    // The first `users` command makes the owner the first user, the channel's owner linked.
    let owner = listed_user(&home, "owner").await.expect("the first admin");
    assert_eq!(owner["role"], "admin");
    assert_eq!(owner["context"], "owner");
    assert_eq!(owner["identities"], json!(["telegram:1000"]));
    let listed = json_of(&home, &["users", "list", "--json"]).await;
    assert_eq!(listed["approved"], json!([]), "the old keys stay: {listed}");
    assert_eq!(listed["pending"], json!([]));

    let added = home.run(&["users", "add", "bob", "--role", "user", "--name", "Bob Smith"]).await.success();
    assert!(added.stdout.contains("added bob (Bob Smith)"), "{}", added.stdout);
    let bob = listed_user(&home, "bob").await.unwrap();
    assert_eq!(bob["context"], "user:bob");
    assert_eq!(bob["role"], "user");
    assert_eq!(bob["disabled"], false);
    assert_eq!(bob["token"], false);
    assert_eq!(bob["identities"], json!([]));

    home.run(&["users", "link", "bob", "telegram:12345"]).await.success();
    let linked = home.run(&["users", "link", "bob", "hook:bob"]).await.success();
    assert!(linked.stdout.contains("linked hook:bob to bob"), "{}", linked.stdout);
    assert!(!linked.stdout.contains("merged"), "nothing to merge: {}", linked.stdout);
    let again = home.run(&["users", "link", "bob", "hook:bob"]).await.success();
    assert!(again.stdout.contains("already linked"), "{}", again.stdout);
    home.run(&["users", "link", "bob", "gateway:bob"]).await.success();

    let shown = json_of(&home, &["users", "show", "bob", "--json"]).await;
    assert_eq!(shown["identities"], json!(["gateway:bob", "hook:bob", "telegram:12345"]));
    assert_eq!(shown["token_created_ms"], Value::Null);
    assert_eq!(shown["usage"]["today"]["calls"], 0);
    assert_eq!(shown["budget"]["applies"], true);
    let text = home.run(&["users", "show", "bob"]).await.success().stdout;
    assert!(text.contains("identities  gateway:bob, hook:bob, telegram:12345"), "{text}");

    // A token: shown once, kept as its hash, replacing the one before.
    let first = home.run(&["users", "token", "bob"]).await.success();
    let token = first.stdout.trim().to_owned();
    assert!(token.starts_with("sqb_") && token.len() == 68, "{token}");
    assert!(first.stderr.contains("replaces any earlier one") && first.stderr.contains("can't be shown again"));
    let directory = SqliteDirectory::new(database(&home));
    assert_eq!(directory.by_token_hash(&token_hash(&token)).unwrap().unwrap().id, "bob");
    let second = home.run(&["users", "token", "bob"]).await.success().stdout.trim().to_owned();
    assert_ne!(second, token);
    assert!(directory.by_token_hash(&token_hash(&token)).unwrap().is_none(), "the old token is gone");
    assert_eq!(directory.by_token_hash(&token_hash(&second)).unwrap().unwrap().id, "bob");
    assert_eq!(listed_user(&home, "bob").await.unwrap()["token"], true);
    assert!(json_of(&home, &["users", "show", "bob", "--json"]).await["token_created_ms"].is_i64());

    let changed = home.run(&["users", "role", "bob", "child"]).await.success();
    assert!(changed.stdout.contains("user → child"), "{}", changed.stdout);
    home.append_config("[user_roles.child]\nbudget_daily_tokens = 50000\n");
    home.run(&["users", "budget", "bob", "--monthly-cost", "2.5"]).await.success();
    let budget = json_of(&home, &["users", "show", "bob", "--json"]).await["budget"].clone();
    assert_eq!(budget["own"]["monthly_cost"], 2.5);
    assert_eq!(budget["own"]["daily_tokens"], Value::Null);
    assert_eq!(budget["role"]["daily_tokens"], 50000);
    assert_eq!(budget["effective"]["daily_tokens"], 50000, "the role's limit where the person has none");
    assert_eq!(budget["effective"]["monthly_cost"], 2.5);
    let printed = home.run(&["users", "budget", "bob", "--daily-tokens", "500"]).await.success().stdout;
    assert!(printed.contains("daily tokens    500 tokens (own)"), "{printed}");
    assert!(printed.contains("monthly cost    2.50 (own)"), "limits not given stay: {printed}");
    home.run(&["users", "budget", "bob", "--clear"]).await.success();
    let budget = json_of(&home, &["users", "show", "bob", "--json"]).await["budget"].clone();
    assert_eq!(
        budget["own"],
        json!({"daily_tokens": null, "monthly_tokens": null, "daily_cost": null, "monthly_cost": null})
    );
    assert_eq!(budget["effective"]["daily_tokens"], 50000);
    refused(&home, &["users", "budget", "bob", "--clear", "--daily-tokens", "5"], 2).await;
    for bad in ["--daily-cost=-1", "--monthly-cost=NaN"] {
        let error = refused(&home, &["users", "budget", "bob", bad], 1).await;
        assert!(error.contains("must be a number of 0 or more"), "{error}");
    }

    home.run(&["users", "disable", "bob"]).await.success();
    assert_eq!(listed_user(&home, "bob").await.unwrap()["disabled"], true);
    home.run(&["users", "enable", "bob"]).await.success();
    assert_eq!(listed_user(&home, "bob").await.unwrap()["disabled"], false);

    let unlinked = home.run(&["users", "unlink", "hook:bob"]).await.success();
    assert!(unlinked.stdout.contains("unlinked hook:bob from bob"), "{}", unlinked.stdout);
    assert_eq!(listed_user(&home, "bob").await.unwrap()["identities"], json!(["gateway:bob", "telegram:12345"]));
    let error = refused(&home, &["users", "unlink", "hook:bob"], 1).await;
    assert!(error.contains("linked to nobody"), "{error}");

    // Every change is in the audit trail, by `cli`, and the chain holds.
    let rows = audit_rows(&home, &["--user", "cli"]).await;
    let actions: Vec<String> = rows
        .iter()
        .map(|row| format!("{}:{}", row["kind"].as_str().unwrap(), row["detail"]["action"].as_str().unwrap_or("")))
        .collect();
    for expected in [
        "user_change:add",
        "user_change:link",
        "user_change:token",
        "role_change:",
        "user_change:budget",
        "user_change:disable",
        "user_change:enable",
        "user_change:unlink",
    ] {
        assert!(actions.contains(&expected.to_owned()), "{expected} missing from {actions:?}");
    }
    let role_change = rows.iter().find(|row| row["kind"] == "role_change").unwrap();
    assert_eq!(role_change["detail"], json!({"old": "user", "new": "child"}));
    assert_eq!(role_change["subject"], "bob");
    assert!(rows.iter().all(|row| !row.to_string().contains(&second)), "tokens never reach the audit trail");
    let system = audit_rows(&home, &["--user", "system"]).await;
    assert_eq!(system[0]["detail"]["why"], "the first admin");
    let verified = home.run(&["audit", "verify"]).await.success();
    assert!(verified.stdout.starts_with("ok: ") && verified.stdout.contains("rows, chain intact"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_linked_to_someone_else_is_refused_naming_them() {
    let (_server, home) = people_home().await;
    home.run(&["users", "add", "alice", "--role", "child"]).await.success();
    home.run(&["users", "add", "bob", "--role", "child"]).await.success();
    home.run(&["users", "link", "alice", "telegram:5"]).await.success();
    let error = refused(&home, &["users", "link", "bob", "telegram:5"], 1).await;
    assert!(error.contains("telegram:5") && error.contains("linked to alice"), "{error}");
    assert_eq!(listed_user(&home, "bob").await.unwrap()["identities"], json!([]));
    // The channel's owner is the owner's.
    let error = refused(&home, &["users", "link", "bob", "telegram:1000"], 1).await;
    assert!(error.contains("linked to owner"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linking_a_stranger_merges_what_they_had_into_the_users_context() {
    let (_server, home) = people_home().await;
    home.run(&["users", "add", "bob", "--role", "child"]).await.success();
    let stranger = stranger_was_here(&home, "telegram", "77", "Bob's sister is Ana").await;
    assert_eq!(stranger, "user:telegram:77");
    assert_eq!(session_context(&home, "telegram:77").await.as_deref(), Some("user:telegram:77"));

    let linked = home.run(&["users", "link", "bob", "telegram:77"]).await.success();
    let merged =
        linked.stdout.lines().find(|line| line.starts_with("merged")).unwrap_or_else(|| panic!("{}", linked.stdout));
    for part in [
        "user:telegram:77",
        "user:bob",
        "1 memory",
        "1 session",
        "1 file",
        "1 usage record",
        "memory.md",
        "nothing was lost",
    ] {
        assert!(merged.contains(part), "{part} missing: {merged}");
    }
    assert_eq!(session_context(&home, "telegram:77").await.as_deref(), Some("user:bob"));
    assert_eq!(memory_contexts(&home, "Bob's sister is Ana"), ["user:bob"]);
    let bob_files = home.path().join("users").join("bob").join("workspace");
    assert_eq!(std::fs::read_to_string(bob_files.join("shopping.txt")).unwrap(), "milk\n");
    let document = FsMemoryDocuments::new(home.path().join("memory")).read("user:bob").unwrap().unwrap();
    assert!(document.contains("likes tea"), "{document}");
    let link_row =
        audit_rows(&home, &["--user", "cli"]).await.into_iter().rfind(|row| row["detail"]["action"] == "link").unwrap();
    assert_eq!(link_row["detail"]["merged"]["memories"], 1);
    assert_eq!(link_row["detail"]["merged_from"], "user:telegram:77");

    // Linked to the owner, a stranger's memories show in `memory list` (the owner's).
    stranger_was_here(&home, "hook", "me-at-work", "The office wifi is called Kelp").await;
    let linked = home.run(&["users", "link", "owner", "hook:me-at-work"]).await.success();
    assert!(linked.stdout.contains("1 memory"), "{}", linked.stdout);
    let memories = json_of(&home, &["memory", "list", "--json"]).await;
    assert!(
        memories.as_array().unwrap().iter().any(|memory| memory["content"] == "The office wifi is called Kelp"),
        "{memories}"
    );
    assert_eq!(session_context(&home, "hook:me-at-work").await.as_deref(), Some("owner"));
    home.run(&["audit", "verify"]).await.success();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_codes_are_approved_as_a_guest_as_a_user_or_as_a_new_user() {
    let (_server, home) = people_home().await;
    home.run(&["users", "add", "bob", "--role", "child"]).await.success();
    let access = Arc::new(SqliteChannelAccess::new(ChannelAccessStore::new(database(&home))));
    let codes = PairingCodes::with_store(Box::new(SeededRandom::new(7)), access);
    let issue = |sender: &str| {
        let sender = Sender { id: sender.to_owned(), display_name: Some(format!("{sender} name")) };
        match codes.issue("hook", &sender, SystemTime::now()).unwrap() {
            squidbot_channels::Issued::New(code) => code,
            squidbot_channels::Issued::Pending => panic!("a code was already waiting"),
        }
    };
    let (for_bob, for_carol, for_dave) = (issue("bob-phone"), issue("carol"), issue("dave"));

    // Refused before the code is used: the code still waits.
    let error = refused(&home, &["users", "approve", &for_bob, "--as", "nobody"], 1).await;
    assert!(error.contains("can't find the user \"nobody\""), "{error}");
    let error = refused(&home, &["users", "approve", &for_carol, "--new", "Carol", "--role", "child"], 1).await;
    assert!(error.contains("lower-case"), "{error}");
    refused(&home, &["users", "approve", &for_carol, "--new", "carol"], 2).await;
    assert_eq!(json_of(&home, &["users", "list", "--json"]).await["pending"].as_array().unwrap().len(), 3);

    let approved = home.run(&["users", "approve", &for_bob.to_lowercase(), "--as", "bob"]).await.success();
    assert!(approved.stdout.contains("approved hook:bob-phone (bob-phone name) as bob"), "{}", approved.stdout);
    let approved = home.run(&["users", "approve", &for_carol, "--new", "carol", "--role", "child"]).await.success();
    assert!(approved.stdout.contains("added carol (carol name)"), "{}", approved.stdout);
    home.run(&["users", "approve", &for_dave]).await.success();
    let error = refused(&home, &["users", "approve", &for_dave], 1).await;
    assert!(error.contains("no such code is waiting"), "{error}");

    let listed = json_of(&home, &["users", "list", "--json"]).await;
    assert_eq!(listed["pending"], json!([]));
    assert_eq!(listed["approved"].as_array().unwrap().len(), 1, "only the guest: {listed}");
    assert_eq!(listed["approved"][0]["sender_id"], "dave");
    assert_eq!(listed_user(&home, "bob").await.unwrap()["identities"], json!(["hook:bob-phone"]));
    let carol = listed_user(&home, "carol").await.unwrap();
    assert_eq!(carol["identities"], json!(["hook:carol"]));
    assert_eq!(carol["role"], "child");
    assert_eq!(carol["context"], "user:carol");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_deletes_a_persons_data_and_the_audit_keeps_that_it_happened() {
    let (_server, home) = people_home().await;
    home.run(&["users", "add", "bob", "--role", "child"]).await.success();
    stranger_was_here(&home, "telegram", "77", "Bob's PIN hint is his cat").await;
    home.run(&["users", "link", "bob", "telegram:77"]).await.success();
    record_usage(&home, Some("bob"), "user:bob", 0, None);
    stranger_was_here(&home, "telegram", "88", "Someone else's memory").await;

    let error = refused(&home, &["users", "purge", "bob"], 1).await;
    assert!(error.contains("not a terminal") && error.contains("--yes"), "{error}");
    assert!(listed_user(&home, "bob").await.is_some(), "nothing happened without confirmation");
    let error = refused(&home, &["users", "purge", "owner", "--yes"], 1).await;
    assert!(error.contains("their context is `owner`"), "{error}");

    let purged = home.run(&["users", "purge", "bob", "--yes"]).await.success();
    assert!(purged.stdout.contains("purged bob: 1 memories, 1 sessions, 1 files"), "{}", purged.stdout);
    assert!(listed_user(&home, "bob").await.is_none());
    assert!(memory_contexts(&home, "Bob's PIN hint is his cat").is_empty());
    assert_eq!(session_context(&home, "telegram:77").await, None);
    assert!(!home.path().join("users").join("bob").exists());
    assert!(FsMemoryDocuments::new(home.path().join("memory")).read("user:bob").unwrap().is_none());
    let usage = json_of(&home, &["usage", "--by", "user", "--json"]).await;
    assert_eq!(usage["rows"].as_array().unwrap().len(), 1, "only the other stranger's call: {usage}");
    // Someone else's data stays.
    assert_eq!(memory_contexts(&home, "Someone else's memory"), ["user:telegram:88"]);
    assert_eq!(session_context(&home, "telegram:88").await.as_deref(), Some("user:telegram:88"));

    let purge = audit_rows(&home, &[]).await.into_iter().rfind(|row| row["detail"]["action"] == "purge").unwrap();
    assert_eq!(purge["subject"], "bob");
    assert_eq!(purge["actor"], "cli");
    assert_eq!(purge["detail"]["memories"], 1);
    assert_eq!(purge["detail"]["usage"], 2, "the merged stranger's call and bob's own");
    assert_eq!(purge["detail"]["identities"], json!(["telegram:77"]));
    home.run(&["audit", "verify"]).await.success();
    let error = refused(&home, &["users", "show", "bob"], 1).await;
    assert!(error.contains("can't find the user \"bob\""), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_one_line_errors() {
    let (_server, home) = people_home().await;
    let error = refused(&home, &["users", "show", "nobody"], 1).await;
    assert!(error.contains("can't find the user \"nobody\"") && error.contains("squidbot users list"), "{error}");
    for bad in ["Bob", "_bob", "bob smith", "a-very-long-user-id-that-goes-on-and-on"] {
        let error = refused(&home, &["users", "add", bad, "--role", "child"], 1).await;
        assert!(error.contains("can't add the user"), "{error}");
    }
    let error = refused(&home, &["users", "add", "kim", "--role", "teacher"], 1).await;
    assert!(error.contains("admin, child, guest, user"), "the roles are listed: {error}");
    assert!(error.contains("not the agent roles"), "{error}");
    let error = refused(&home, &["users", "add", "kim", "--role", "assistant"], 1).await;
    assert!(error.contains("not the agent roles"), "{error}");
    refused(&home, &["users", "add", "kim"], 2).await;
    home.run(&["users", "add", "kim", "--role", "child"]).await.success();
    let error = refused(&home, &["users", "add", "kim", "--role", "child"], 1).await;
    assert!(error.contains("already a user kim"), "{error}");
    let error = refused(&home, &["users", "role", "kim", "teacher"], 1).await;
    assert!(error.contains("no such people's role"), "{error}");
    for malformed in ["telegram", "telegram:", ":123"] {
        let error = refused(&home, &["users", "link", "kim", malformed], 1).await;
        assert!(error.contains("CHANNEL:ID"), "{error}");
    }
    let error = refused(&home, &["users", "link", "kim", "signal:+4912345"], 1).await;
    assert!(error.contains("hook, telegram"), "the configured channels are named: {error}");
    let error = refused(&home, &["users", "link", "nobody", "telegram:1"], 1).await;
    assert!(error.contains("can't find the user \"nobody\""), "{error}");
    let error = refused(&home, &["users", "token", "nobody"], 1).await;
    assert!(error.contains("no such user"), "{error}");
    let error = refused(&home, &["audit", "--since", "yesterday-ish"], 1).await;
    assert!(error.contains("can't read --since"), "{error}");
    refused(&home, &["approvals", "decide", "X"], 2).await;

    // Commands run unconfined for admins only: with sandbox `none`, roles that may run
    // `exec` are not handed out.
    home.append_config("[sandbox]\nbackend = \"none\"\n");
    let error = refused(&home, &["users", "add", "bob", "--role", "user"], 1).await;
    assert!(error.contains("sandbox `none`"), "{error}");
    let error = refused(&home, &["users", "role", "kim", "user"], 1).await;
    assert!(error.contains("sandbox `none`"), "{error}");
    home.run(&["users", "add", "bob", "--role", "admin"]).await.success();
    home.run(&["users", "role", "kim", "guest"]).await.success();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onboard_makes_the_first_admin_and_audits_the_config_it_wrote() {
    let server = ScriptedLlm::start().await;
    let home = Home::new();
    let base = server.base_url();
    let onboard = ["onboard", "--non-interactive", "--provider", "local", "--api-base", &base, "--model", "m"];
    let run = home.run(&onboard).await.success();
    assert!(
        run.stdout.contains("you are the first user: owner (Owner), an admin whose memory context is owner"),
        "{}",
        run.stdout
    );
    let owner = listed_user(&home, "owner").await.unwrap();
    assert_eq!(owner["role"], "admin");
    assert_eq!(owner["context"], "owner");

    let mut again = onboard.to_vec();
    again.push("--force");
    let run = home.run(&again).await.success();
    assert!(run.stdout.contains("users kept as they are"), "{}", run.stdout);
    let rows = audit_rows(&home, &[]).await;
    let kinds: Vec<(&str, &str)> =
        rows.iter().map(|row| (row["kind"].as_str().unwrap(), row["actor"].as_str().unwrap())).collect();
    assert_eq!(kinds, [("config_change", "cli"), ("user_change", "system"), ("config_change", "cli")]);
    assert_eq!(rows[0]["detail"]["model"], "local/m");
    assert_eq!(rows[0]["subject"], home.path().join("config.toml").display().to_string());
    home.run(&["audit", "verify"]).await.success();
}
