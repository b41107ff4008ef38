//! `/fork`, `/compact` and `/model` written in a chat: the conversation goes back before
//! the last message onto a new branch; condensing with nothing to condense says so; the
//! owner chooses a configured model for the conversation.

use super::*;

#[tokio::test(start_paused = true)]
async fn fork_goes_back_before_the_last_message_and_the_next_one_branches() {
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    harness.deliver(direct_message("1", "owner-id", "first")).await;
    harness.wait_for("the first reply", |recorded| !recorded.sent.is_empty()).await;
    harness.deliver(direct_message("2", "owner-id", "second")).await;
    harness.wait_for("the second reply", |recorded| recorded.sent.len() >= 2).await;
    harness.deliver(direct_message("3", "owner-id", "/fork")).await;
    harness.wait_for("the fork", |recorded| recorded.sent.len() >= 3).await;
    assert!(harness.texts().pop().unwrap().starts_with("Went back before your last message"));
    harness.deliver(direct_message("4", "owner-id", "second, differently")).await;
    harness.wait_for("the reply on the fork", |recorded| recorded.sent.len() >= 4).await;

    let tree = harness.runner.tree("fake:owner-id").await.unwrap();
    assert_eq!(tree.iter().filter(|node| node.children > 1).count(), 1, "{tree:?}");
    let active: Vec<&str> = tree.iter().filter(|node| node.active).map(|node| node.text.as_str()).collect();
    assert!(active.contains(&"second, differently") && !active.contains(&"second"), "{active:?}");

    harness.deliver(direct_message("5", "owner-id", "/compact")).await;
    harness.wait_for("the compact answer", |recorded| recorded.sent.len() >= 5).await;
    assert_eq!(harness.texts().pop().unwrap(), "Nothing to condense.");
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_owner_chooses_a_configured_model_for_the_conversation() {
    let harness = start(capabilities(StreamMode::SendOnce, 1_000), vec![], DirectPolicy::OwnerOnly);
    harness.deliver(direct_message("1", "owner-id", "/model")).await;
    harness.wait_for("the list", |recorded| !recorded.sent.is_empty()).await;
    assert_eq!(harness.texts().pop().unwrap(), "model: fake/echo\nother models: fake/other");
    harness.deliver(direct_message("2", "owner-id", "/model nowhere/none")).await;
    harness.wait_for("the refusal", |recorded| recorded.sent.len() >= 2).await;
    assert!(harness.texts().pop().unwrap().starts_with("There is no model nowhere/none"));
    harness.deliver(direct_message("3", "owner-id", "/model fake/other")).await;
    harness.wait_for("the choice", |recorded| recorded.sent.len() >= 3).await;
    assert_eq!(harness.texts().pop().unwrap(), "Model: fake/echo → fake/other for this conversation.");
    harness.deliver(direct_message("4", "owner-id", "/status")).await;
    harness.wait_for("the status", |recorded| recorded.sent.len() >= 4).await;
    assert!(harness.texts().pop().unwrap().starts_with("model: fake/other\n"));
    harness.deliver(direct_message("5", "owner-id", "hello")).await;
    harness.wait_for("the reply", |recorded| recorded.sent.len() >= 5).await;
    let session = harness.runner.whole_session("fake:owner-id").await.unwrap();
    assert_eq!(session.current_model().as_deref(), Some("fake/other"), "the turn used and recorded it");
    harness.stop().await;
}
