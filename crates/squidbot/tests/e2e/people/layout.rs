//! A person's and a group's own directories on the real gateway (issue 18's layout):
//! `users/bob/` holds his `USER.md`, his skills and his memory.md, and his turns on
//! Telegram are built from them, never from the owner's `USER.md`; the owner's turns
//! don't see bob's; a group chat's prompt has its `GROUP.md` and its skills.

use std::time::Duration;

use squidbot_testkit::fake_telegram::{ChatKind, FakeTelegram, FakeUser, IncomingMessage};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::bus::{bus_home, eventually, start_gateway};
use crate::harness::{Home, messages};

const TELEGRAM_TOKEN: &str = "4545:layout-telegram-token";
/// The owner's Telegram id (in `owners`: the first admin).
const OWNER: i64 = 1001;
/// Bob's Telegram id.
const BOB: i64 = 2002;

/// A Telegram group the owner and the bot are in.
const GROUP: i64 = -500;

const GROUP_MD: &str = "The string quartet's planning chat; rehearsals are on Fridays.";
const OWNER_USER_MD: &str = "The owner's bank is Kelp Savings.";
const BOB_USER_MD: &str = "Bob is learning the cello and prefers short answers.";
const BOB_MEMORY: &str = "- Bob practises on Sunday mornings";

/// The first sandbox backend not declared unavailable here (a `user` may run `exec`, so
/// the gateway needs one), or `None` with a notice.
fn sandbox_backend() -> Option<&'static str> {
    let declared = std::env::var("SQUIDBOT_TEST_SANDBOX_UNAVAILABLE").unwrap_or_default();
    let unavailable = |backend: &str| declared.split(',').any(|name| name.trim() == backend);
    let backend = ["landlock", "bubblewrap"].into_iter().find(|backend| !unavailable(backend));
    if backend.is_none() {
        eprintln!("NOT TESTED: SQUIDBOT_TEST_SANDBOX_UNAVAILABLE declares landlock and bubblewrap unavailable");
    }
    backend
}

/// Writes `text` to `relative` under the home, making its directories.
fn put(home: &Home, relative: &str, text: &str) {
    let path = home.path().join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The system prompt of a request the scripted model received.
fn system_prompt(body: &serde_json::Value) -> String {
    messages(body)
        .iter()
        .find(|message| message["role"] == "system")
        .and_then(|message| message["content"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no system prompt: {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_and_a_groups_turns_read_their_own_profile_skills_and_memory_from_their_directories() {
    let Some(backend) = sandbox_backend() else { return };
    let server = ScriptedLlm::start().await;
    let telegram = FakeTelegram::start(TELEGRAM_TOKEN).await;
    let home = bus_home(&server);
    home.append_config(&format!(
        "[channels.telegram]\ntoken = \"{TELEGRAM_TOKEN}\"\napi_base = \"{}\"\nowners = [\"{OWNER}\"]\n\n\
         [sandbox]\nbackend = \"{backend}\"\n",
        telegram.api_base()
    ));
    put(&home, "workspace/USER.md", OWNER_USER_MD);
    home.run(&["users", "add", "bob", "--role", "user"]).await.success();
    home.run(&["users", "link", "bob", &format!("telegram:{BOB}")]).await.success();
    put(&home, "users/bob/USER.md", BOB_USER_MD);
    put(
        &home,
        "users/bob/skills/cello-practice/SKILL.md",
        "---\nname: cello-practice\ndescription: Plan a cello practice session. Use when asked what to practise.\n---\n\n\
         # Cello practice\n1. Scales first.\n",
    );
    put(&home, &format!("groups/telegram:{GROUP}/GROUP.md"), GROUP_MD);
    put(
        &home,
        &format!("groups/telegram:{GROUP}/skills/quartet-setlist/SKILL.md"),
        "---\nname: quartet-setlist\ndescription: Put together the setlist of the quartet.\n---\n\nBody.\n",
    );
    // His memory.md from before people had directories: moved on first use.
    put(&home, "memory/user:bob/memory.md", &format!("{BOB_MEMORY}\n"));
    let _gateway = start_gateway(&home).await;

    server.push(Reply::text("Scales, then the Bach."));
    telegram.push_user_message(BOB, ChatKind::Private, &FakeUser::new(BOB, "Bob"), "what should I practise?");
    telegram.wait_for_sent(1, Duration::from_secs(20)).await;
    let bob = system_prompt(&server.requests()[0].body);
    assert!(bob.contains(&format!("# USER.md\n\n{BOB_USER_MD}")), "bob's USER.md: {bob}");
    assert!(!bob.contains(OWNER_USER_MD), "never the owner's USER.md: {bob}");
    assert!(bob.contains("<name>cello-practice</name>"), "bob's skill is listed: {bob}");
    let location = home.path().join("users/bob/skills/cello-practice");
    assert!(bob.contains(&format!("<location>{}</location>", location.display())), "{bob}");
    assert!(bob.contains(BOB_MEMORY), "bob's memory.md: {bob}");
    assert!(home.path().join("users/bob/memory.md").is_file(), "memory.md moved into his directory");
    assert!(!home.path().join("memory/user:bob").exists(), "and gone from the old place");
    assert!(home.path().join("users/bob/workspace").is_dir());

    // The owner's turn has the owner's USER.md and none of bob's.
    server.push(Reply::text("Noted."));
    telegram.push_user_message(OWNER, ChatKind::Private, &FakeUser::new(OWNER, "Olga"), "anything new?");
    telegram.wait_for_sent(2, Duration::from_secs(20)).await;
    eventually("the owner's turn", || server.requests().len() == 2).await;
    let owner = system_prompt(&server.requests()[1].body);
    assert!(owner.contains(OWNER_USER_MD), "{owner}");
    assert!(
        !owner.contains(BOB_USER_MD) && !owner.contains("cello-practice") && !owner.contains(BOB_MEMORY),
        "{owner}"
    );

    // A group chat: its GROUP.md and its skills, nobody's USER.md.
    server.push(Reply::text("Friday at eight."));
    let mention = IncomingMessage::new(GROUP, ChatKind::Group, &FakeUser::new(OWNER, "Olga")).text("@thebot when?");
    telegram.push(mention);
    telegram.wait_for_sent(3, Duration::from_secs(20)).await;
    eventually("the group's turn", || server.requests().len() == 3).await;
    let group = system_prompt(&server.requests()[2].body);
    assert!(group.contains(&format!("# GROUP.md\n\n{GROUP_MD}")), "the group's GROUP.md: {group}");
    assert!(group.contains("<name>quartet-setlist</name>"), "the group's skill: {group}");
    assert!(!group.contains("# USER.md") && !group.contains(OWNER_USER_MD), "{group}");
    assert!(!group.contains("cello-practice"), "not bob's skill: {group}");
    server.assert_clean();
}
