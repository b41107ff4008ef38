//! People at the gateway: the rules as functions here, and against the real server over
//! HTTP and WebSocket in the files beside (logins and scopes, one person against
//! another's sessions, the admin methods, usage and metrics).

mod admin;
mod harness;
mod isolation;
mod logins;

use std::sync::Arc;

use super::*;

fn actor(id: &str, role: &str) -> Actor {
    Actor { user: Some(id.into()), name: id.into(), role: role.into(), context: format!("user:{id}"), session: None }
}

fn owned(scopes: &[&str]) -> Vec<String> {
    scopes.iter().map(|scope| (*scope).to_owned()).collect()
}

#[test]
fn a_role_gives_at_most_its_scopes_and_never_what_the_client_adds() {
    let asked = owned(&[ADMIN_SCOPE, WRITE_SCOPE, "operator.pairing", READ_SCOPE, WRITE_SCOPE]);
    assert_eq!(granted_scopes(&actor("bob", "user"), &asked), owned(&[WRITE_SCOPE, READ_SCOPE]));
    assert_eq!(granted_scopes(&actor("kid", "child"), &asked), owned(&[WRITE_SCOPE, READ_SCOPE]));
    assert_eq!(granted_scopes(&actor("dave", "admin"), &asked), owned(&[ADMIN_SCOPE, WRITE_SCOPE, READ_SCOPE]));
    assert_eq!(granted_scopes(&actor("bob", "user"), &owned(&[READ_SCOPE])), owned(&[READ_SCOPE]));
    assert!(granted_scopes(&actor("bob", "user"), &[]).is_empty());
}

#[test]
fn a_person_may_make_sessions_only_under_their_own_names() {
    let bob = actor("bob", "user");
    assert_eq!(main_session(&bob), "agent:main:user:bob");
    assert_eq!(main_key(&bob), "user:bob");
    assert_eq!(openai_session(&bob, "ana"), "openai:bob:ana");
    for mine in ["agent:main:user:bob", "agent:main:user:bob:notes", "openai:bob:default", "openai:bob:a:b"] {
        assert!(may_create(&bob, mine), "{mine}");
    }
    for theirs in [
        "agent:main:main",
        "agent:main:user:bobby",
        "agent:main:user:bo",
        "agent:main:user:carol",
        "openai:default",
        "openai:bobby:x",
        "openai:carol:bob",
        "telegram:12345",
        "user:bob",
        "",
    ] {
        assert!(!may_create(&bob, theirs), "{theirs}");
    }
}

#[test]
fn only_sqb_tokens_are_looked_up_and_only_with_people() {
    assert!(matches!(lookup(None, "sqb_whatever"), TokenLookup::NotPersonal));
    let people = People::new(
        squidbot_core::people::PeopleSettings::default(),
        squidbot_core::people::PeopleStores {
            directory: Arc::new(squidbot_core::people::memory::MemoryDirectory::default()),
            usage: Arc::new(squidbot_core::people::memory::MemoryUsage::default()),
            audit: Arc::new(squidbot_core::people::memory::MemoryAudit::new(b"k")),
            approvals: Arc::new(squidbot_core::people::memory::MemoryApprovals::default()),
        },
        Arc::new(squidbot_core::clock::SystemClock),
    );
    assert!(matches!(lookup(Some(&people), "a-gateway-token"), TokenLookup::NotPersonal));
    assert!(matches!(lookup(Some(&people), "sqb_nobody"), TokenLookup::Unknown));
}
