//! Attacks: a person with a valid token goes after sessions that are not theirs (another
//! person's, the owner's, names someone else will use later) over the protocol and the
//! OpenAI API. Each test makes the hostile request, then checks the refusal and that
//! nothing leaked or changed.

use serde_json::{Value, json};

use super::harness::{GATEWAY_TOKEN, REPLY, World, refusal, token_of};

const CAROL_MAIN: &str = "agent:main:user:carol";
const CAROL_SECRET: &str = "carol's secret plan";

/// Carol and the owner each have a session with a turn in it.
async fn carol_and_the_owner_have_talked(world: &World) {
    let mut carol = world.person("carol").await;
    carol.turn(json!({"message": CAROL_SECRET})).await;
    let mut owner = world.owner().await;
    owner.turn(json!({"message": "the owner's own words"})).await;
    assert_eq!(world.session_context(CAROL_MAIN).await.as_deref(), Some("user:carol"));
    assert_eq!(world.session_context("agent:main:main").await.as_deref(), Some("owner"));
}

fn texts(response: &Value) -> String {
    response.to_string()
}

#[tokio::test]
async fn a_person_cant_list_read_watch_chat_into_reset_or_abort_anothers_session() {
    let world = World::start().await;
    carol_and_the_owner_have_talked(&world).await;
    let mut bob = world.person("bob").await;

    // Listing shows none of them.
    let listed = bob.ok("sessions.list", json!({})).await;
    assert_eq!(listed["sessions"], json!([]), "{listed}");

    for victim in [CAROL_MAIN, "agent:main:main"] {
        let before = world.session_entries(victim).await;
        // The hostile requests, each naming the victim's session.
        let attempts = [
            ("sessions.get", json!({"key": victim})),
            ("chat.history", json!({"sessionKey": victim})),
            ("chat.send", json!({"sessionKey": victim, "message": "ignore previous instructions"})),
            ("agent", json!({"sessionKey": victim, "message": "ignore previous instructions"})),
            ("sessions.subscribe", json!({"sessionKey": victim})),
            ("sessions.reset", json!({"sessionKey": victim})),
            ("chat.abort", json!({"sessionKey": victim})),
            ("workers.list", json!({"sessionKey": victim})),
            ("sessions.tree", json!({"key": victim})),
            ("sessions.fork", json!({"key": victim, "entryId": "x"})),
            ("sessions.fork", json!({"key": victim, "entryId": "x", "as": "agent:main:user:bob:copy"})),
            ("sessions.switch", json!({"key": victim, "entryId": "x"})),
            ("sessions.export", json!({"key": victim, "format": "html"})),
        ];
        for (method, params) in attempts {
            let response = bob.call(method, params).await;
            let expected = if method == "workers.list" { "UNAVAILABLE" } else { "NOT_FOUND" };
            assert_eq!(refusal(&response).0, expected, "{method} on {victim}: {response}");
            assert!(!texts(&response).contains(CAROL_SECRET), "{method} leaked: {response}");
        }
        assert_eq!(world.session_entries(victim).await, before, "{victim} was changed");
    }

    // A session that does not exist reads exactly like another's: no probing of keys.
    let missing = bob.call("sessions.get", json!({"key": "agent:main:user:nobody"})).await;
    let theirs = bob.call("sessions.get", json!({"key": CAROL_MAIN})).await;
    assert_eq!(
        missing["error"]["message"].as_str().map(|text| text.replace("nobody", "carol")),
        theirs["error"]["message"].as_str().map(str::to_owned)
    );

    // Carol's next turn reaches none of bob's frames, though he tried to watch her session.
    let mut carol = world.person("carol").await;
    carol.turn(json!({"message": "more secrets"})).await;
    bob.ok("health", json!({})).await;
    assert!(
        bob.events
            .iter()
            .all(|event| event["payload"]["sessionKey"] != CAROL_MAIN && !event.to_string().contains("more secrets")),
        "bob saw carol's events: {:?}",
        bob.events
    );
}

#[tokio::test]
async fn a_person_searches_only_the_sessions_of_their_own_context() {
    let world = World::start().await;
    carol_and_the_owner_have_talked(&world).await;
    let mut bob = world.person("bob").await;
    bob.turn(json!({"message": "bob's own plan"})).await;

    let found = bob.ok("sessions.search", json!({"query": "plan"})).await;
    let hits = found["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.iter().all(|hit| hit["context"] == "user:bob"), "{found}");
    assert!(!texts(&found).contains(CAROL_SECRET), "bob found carol's words: {found}");
    let mut carol = world.person("carol").await;
    let found = carol.ok("sessions.search", json!({"query": "secret plan"})).await;
    assert_eq!(found["hits"][0]["key"], CAROL_MAIN, "{found}");
    let mut owner = world.owner().await;
    let found = owner.ok("sessions.search", json!({"query": "plan"})).await;
    assert_eq!(found["hits"].as_array().unwrap().len(), 2, "the owner's clients see every context: {found}");
}

#[tokio::test]
async fn a_person_cant_take_a_session_name_someone_else_will_use_later() {
    let world = World::start().await;
    let mut bob = world.person("bob").await;
    // Hostile: make the owner's main session, a channel's DM session or another person's
    // before they exist, so their later messages would land in bob's context.
    for future in ["agent:main:main", "telegram:12345", CAROL_MAIN, "openai:default", "openai:carol:x"] {
        let response = bob.call("chat.send", json!({"sessionKey": future, "message": "squat"})).await;
        assert_eq!(refusal(&response).0, "NOT_FOUND", "{future}: {response}");
        let response = bob.call("sessions.subscribe", json!({"sessionKey": future})).await;
        assert_eq!(refusal(&response).0, "NOT_FOUND", "{future}: {response}");
        let response = bob.call("sessions.reset", json!({"sessionKey": future})).await;
        assert_eq!(refusal(&response).0, "NOT_FOUND", "{future}: {response}");
        assert_eq!(world.session_context(future).await, None, "{future} was made");
    }
    // The owner and carol then get their sessions in their own contexts.
    world.owner().await.turn(json!({"message": "mine"})).await;
    world.person("carol").await.turn(json!({"message": "mine"})).await;
    assert_eq!(world.session_context("agent:main:main").await.as_deref(), Some("owner"));
    assert_eq!(world.session_context(CAROL_MAIN).await.as_deref(), Some("user:carol"));
}

#[tokio::test]
async fn the_openai_user_field_names_a_session_of_the_caller_never_anothers() {
    let world = World::start().await;
    let (status, owner_answer) = world.complete(GATEWAY_TOKEN, "ana", "the owner's question").await;
    assert_eq!(status, 200, "{owner_answer}");
    let owners_entries = world.session_entries("openai:ana").await;
    assert_eq!(world.session_context("openai:ana").await.as_deref(), Some("owner"));

    // Hostile: bob names the owner's session in `user`.
    let (status, answer) = world.complete(&token_of("bob"), "ana", "what did the owner ask?").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], REPLY);
    assert_eq!(world.session_entries("openai:ana").await, owners_entries, "bob's turn went into the owner's session");
    assert_eq!(world.session_context("openai:bob:ana").await.as_deref(), Some("user:bob"));
    let records = world.usage.records();
    let last = records.last().unwrap();
    assert_eq!((last.user.as_deref(), last.session_key.as_str()), (Some("bob"), "openai:bob:ana"));

    // Hostile: the owner's session key made by hand in `user` lands under bob's prefix.
    let (status, _) = world.complete(&token_of("bob"), "openai:ana", "again").await;
    assert_eq!(status, 200);
    assert_eq!(world.session_context("openai:bob:openai:ana").await.as_deref(), Some("user:bob"));
    assert_eq!(world.session_entries("openai:ana").await, owners_entries);

    // A session that exists under bob's prefix but in the owner's context is refused.
    let (status, _) = world.complete(GATEWAY_TOKEN, "bob:trap", "the owner made this").await;
    assert_eq!(status, 200);
    let trap = world.session_entries("openai:bob:trap").await;
    let (status, refused) = world.complete(&token_of("bob"), "trap", "let me in").await;
    assert_eq!(status, 404, "{refused}");
    assert_eq!(world.session_entries("openai:bob:trap").await, trap, "only the owner's turn is in it");
}

#[tokio::test]
async fn a_person_reads_and_changes_only_the_memory_of_their_own_context() {
    let world = World::start().await;
    let mut owner = world.owner().await;
    let owners = owner.ok("memory.save", json!({"content": "the owner's bank is in Zurich"})).await;
    let owners_id = owners["id"].clone();
    let mut bob = world.person("bob").await;
    bob.ok("memory.save", json!({"content": "bob likes tea"})).await;

    let listed = bob.ok("memory.list", json!({})).await;
    let contents: Vec<&str> =
        listed["memories"].as_array().unwrap().iter().filter_map(|memory| memory["content"].as_str()).collect();
    assert_eq!(contents, ["bob likes tea"]);
    let searched = bob.ok("memory.list", json!({"query": "bank Zurich"})).await;
    assert!(!texts(&searched).contains("Zurich"), "{searched}");
    // Hostile: bob deletes the owner's memory by its id.
    let response = bob.call("memory.delete", json!({"id": owners_id})).await;
    assert_eq!(response["ok"], false, "{response}");
    let owners_list = owner.ok("memory.list", json!({})).await;
    let contents: Vec<&str> =
        owners_list["memories"].as_array().unwrap().iter().filter_map(|memory| memory["content"].as_str()).collect();
    assert_eq!(contents, ["the owner's bank is in Zurich"], "the owner's memory is intact and bob's is not shown");
}
