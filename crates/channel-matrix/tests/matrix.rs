//! Integration tests of the matrix adapter: scenarios against a real Synapse, and the
//! faults Synapse won't produce on demand against a scripted stub homeserver.
//!
//! Synapse takes seconds to start, and the test runner may run each test in a process
//! of its own, so one test starts one Synapse and runs every scenario against it at
//! the same time (each with its own users and rooms), naming those that fail.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test helpers outside #[test] fail loudly")]

#[path = "matrix/conversations.rs"]
mod conversations;
#[path = "matrix/harness.rs"]
mod harness;
#[path = "matrix/replies.rs"]
mod replies;
#[path = "matrix/stub.rs"]
mod stub;

use std::future::Future;
use std::sync::Arc;

use squidbot_testkit::synapse::Synapse;
use tokio::task::JoinHandle;

fn spawn<F: Future<Output = ()> + Send + 'static>(
    scenarios: &mut Vec<(&'static str, JoinHandle<()>)>,
    name: &'static str,
    scenario: F,
) {
    scenarios.push((name, tokio::spawn(scenario)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scenarios_against_a_real_synapse() {
    let synapse = Arc::new(Synapse::start().await);
    let mut scenarios = Vec::new();
    macro_rules! scenario {
        ($path:path) => {
            spawn(&mut scenarios, stringify!($path), $path(Arc::clone(&synapse)))
        };
    }
    scenario!(conversations::an_invited_bot_joins_and_hears_a_direct_message);
    scenario!(conversations::invitations_follow_the_invite_policy);
    scenario!(conversations::mentions_and_replies_address_the_bot_in_a_group);
    scenario!(conversations::a_restart_resumes_without_losing_or_repeating);
    scenario!(conversations::the_first_start_does_not_answer_history);
    scenario!(conversations::refused_credentials_are_fatal_and_passwords_log_in);
    scenario!(replies::replies_threads_edits_reactions_and_typing);
    scenario!(replies::files_travel_both_ways);
    scenario!(replies::an_encrypted_room_gets_one_notice);

    let mut failures = Vec::new();
    for (name, handle) in scenarios {
        if let Err(error) = handle.await {
            let reason = match error.try_into_panic() {
                Ok(panic) => panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                    .unwrap_or_default(),
                Err(error) => error.to_string(),
            };
            failures.push(format!("{name}: {reason}"));
        }
    }
    assert!(failures.is_empty(), "{} scenario(s) failed:\n{}", failures.len(), failures.join("\n\n"));
}
