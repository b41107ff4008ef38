//! Unit tests of the access policy: every direct-message and group policy, the daily
//! polite refusal, pairing from code to approval, and a failing approvals store.

use std::sync::atomic::{AtomicU64, Ordering};

use jiff::Timestamp;
use squidbot_core::random::SeededRandom;

use super::*;
use crate::pairing::{AccessStoreError, MemoryApprovedSenders, PAIRING_CODE_LENGTH};
use crate::port::{Conversation, Sender};

/// A clock the test moves by hand.
struct ManualClock {
    seconds: AtomicU64,
}

impl ManualClock {
    fn new() -> Arc<Self> {
        Arc::new(Self { seconds: AtomicU64::new(1_700_000_000) })
    }

    fn advance(&self, duration: Duration) {
        self.seconds.fetch_add(duration.as_secs(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(self.seconds.load(Ordering::SeqCst))
    }
}

/// An approved-senders store that always fails.
struct BrokenStore;

impl ApprovedSenders for BrokenStore {
    fn is_approved(&self, _channel: &str, _sender_id: &str) -> Result<bool, AccessStoreError> {
        Err(AccessStoreError { action: "read".to_owned(), reason: "disk on fire".to_owned() })
    }

    fn approve(&self, _sender: &ApprovedSender) -> Result<(), AccessStoreError> {
        Err(AccessStoreError { action: "store".to_owned(), reason: "disk on fire".to_owned() })
    }

    fn revoke(&self, _channel: &str, _sender_id: &str) -> Result<bool, AccessStoreError> {
        Ok(false)
    }

    fn list(&self) -> Result<Vec<ApprovedSender>, AccessStoreError> {
        Ok(Vec::new())
    }
}

fn message(kind: ConversationKind, sender: &str, mentions_bot: bool) -> InboundMessage {
    InboundMessage {
        channel: "telegram".to_owned(),
        platform_message_id: "1".to_owned(),
        conversation: Conversation { id: "room-1".to_owned(), kind, thread: None },
        sender: Sender { id: sender.to_owned(), display_name: None },
        text: "hello".to_owned(),
        mentions_bot,
        attachments: Vec::new(),
        received_at: Timestamp::UNIX_EPOCH,
    }
}

fn direct(sender: &str) -> InboundMessage {
    message(ConversationKind::Direct, sender, false)
}

fn group(sender: &str, mentions_bot: bool) -> InboundMessage {
    message(ConversationKind::Group, sender, mentions_bot)
}

fn config() -> AccessConfig {
    AccessConfig { owners: vec!["owner".to_owned()], ..AccessConfig::default() }
}

fn policy_with(config: AccessConfig, clock: Arc<ManualClock>, approved: Arc<dyn ApprovedSenders>) -> AccessPolicy {
    let pairing = Arc::new(PairingCodes::new(Box::new(SeededRandom::new(3))));
    AccessPolicy::new("telegram", config, approved, pairing, clock)
}

fn policy(config: AccessConfig) -> AccessPolicy {
    policy_with(config, ManualClock::new(), Arc::new(MemoryApprovedSenders::default()))
}

#[test]
fn defaults_are_owner_only_and_mention() {
    let config = AccessConfig::default();
    assert_eq!(config.direct, DirectPolicy::OwnerOnly);
    assert_eq!(config.groups, GroupPolicy::Mention);
    assert_eq!(config.refusal, None);
}

#[test]
fn owner_only_answers_the_owner_and_refuses_others_silently_by_default() {
    let policy = policy(config());
    assert_eq!(policy.decide(&direct("owner")), Decision::Answer);
    assert_eq!(policy.decide(&direct("stranger")), Decision::Refuse { reason: DenyReason::NotOwner, reply: None });
}

#[test]
fn the_polite_refusal_goes_out_once_a_day_per_sender() {
    let clock = ManualClock::new();
    let config = AccessConfig { refusal: Some("Sorry, I'm private.".to_owned()), ..config() };
    let policy = policy_with(config, Arc::clone(&clock), Arc::new(MemoryApprovedSenders::default()));
    let polite = Decision::Refuse { reason: DenyReason::NotOwner, reply: Some("Sorry, I'm private.".to_owned()) };
    let silent = Decision::Refuse { reason: DenyReason::NotOwner, reply: None };
    assert_eq!(policy.decide(&direct("stranger")), polite);
    assert_eq!(policy.decide(&direct("stranger")), silent);
    assert_eq!(policy.decide(&direct("another")), polite);
    clock.advance(Duration::from_secs(23 * 3600));
    assert_eq!(policy.decide(&direct("stranger")), silent);
    clock.advance(Duration::from_secs(3600));
    assert_eq!(policy.decide(&direct("stranger")), polite);
}

#[test]
fn remembered_refusals_are_bounded() {
    let mut log = RefusalLog::default();
    let now = SystemTime::UNIX_EPOCH;
    for number in 0..(MAX_REMEMBERED_REFUSALS + 10) {
        assert!(log.may_reply(&number.to_string(), now));
    }
    assert_eq!(log.last.len(), MAX_REMEMBERED_REFUSALS);
    assert_eq!(log.order.len(), MAX_REMEMBERED_REFUSALS);
    // The oldest were forgotten, the newest are remembered.
    assert!(log.may_reply("0", now));
    assert!(!log.may_reply(&(MAX_REMEMBERED_REFUSALS + 9).to_string(), now));
}

#[test]
fn allowlist_answers_listed_senders() {
    let policy = policy(AccessConfig {
        direct: DirectPolicy::Allowlist,
        allowed_senders: vec!["friend".to_owned()],
        ..config()
    });
    assert_eq!(policy.decide(&direct("friend")), Decision::Answer);
    assert_eq!(policy.decide(&direct("owner")), Decision::Answer);
    assert_eq!(policy.decide(&direct("stranger")), Decision::Refuse { reason: DenyReason::NotAllowed, reply: None });
}

#[test]
fn open_answers_everyone() {
    let policy = policy(AccessConfig { direct: DirectPolicy::Open, ..config() });
    assert_eq!(policy.decide(&direct("anyone")), Decision::Answer);
}

#[test]
fn pairing_issues_a_code_that_the_owner_approves() {
    let clock = ManualClock::new();
    let policy = policy_with(
        AccessConfig { direct: DirectPolicy::Pairing, ..config() },
        Arc::clone(&clock),
        Arc::new(MemoryApprovedSenders::default()),
    );
    let Decision::PairingCode { code } = policy.decide(&direct("stranger")) else { panic!("no pairing code") };
    assert_eq!(code.chars().count(), PAIRING_CODE_LENGTH);
    assert!(pairing_reply(&code).contains(&code));
    // Writing again while the code waits sends nothing new.
    assert_eq!(policy.decide(&direct("stranger")), Decision::Ignore { reason: DenyReason::PairingPending });
    clock.advance(Duration::from_secs(60));
    let approved = policy.approve(&code).unwrap();
    assert_eq!((approved.channel.as_str(), approved.sender_id.as_str()), ("telegram", "stranger"));
    assert_eq!(policy.decide(&direct("stranger")), Decision::Answer);
    assert!(matches!(policy.approve(&code), Err(PairingError::UnknownCode { .. })));
}

#[test]
fn pairing_codes_expire_after_an_hour() {
    let clock = ManualClock::new();
    let policy = policy_with(
        AccessConfig { direct: DirectPolicy::Pairing, ..config() },
        Arc::clone(&clock),
        Arc::new(MemoryApprovedSenders::default()),
    );
    let Decision::PairingCode { code } = policy.decide(&direct("stranger")) else { panic!("no pairing code") };
    clock.advance(Duration::from_secs(3600));
    assert!(matches!(policy.approve(&code), Err(PairingError::Expired { .. })));
    assert!(matches!(policy.decide(&direct("stranger")), Decision::PairingCode { .. }));
}

#[test]
fn pairing_lets_the_allowlist_through_without_a_code() {
    let policy =
        policy(AccessConfig { direct: DirectPolicy::Pairing, allowed_senders: vec!["friend".to_owned()], ..config() });
    assert_eq!(policy.decide(&direct("friend")), Decision::Answer);
}

#[test]
fn a_failing_store_fails_closed() {
    let policy = policy_with(
        AccessConfig { direct: DirectPolicy::Pairing, ..config() },
        ManualClock::new(),
        Arc::new(BrokenStore),
    );
    let Decision::Ignore { reason } = policy.decide(&direct("stranger")) else { panic!("not ignored") };
    assert!(reason.to_string().contains("disk on fire"), "{reason}");
    assert_eq!(policy.decide(&direct("owner")), Decision::Answer);
}

#[test]
fn approving_into_a_failing_store_is_an_error() {
    let policy =
        policy_with(AccessConfig { direct: DirectPolicy::Open, ..config() }, ManualClock::new(), Arc::new(BrokenStore));
    let Ok(Issued::New(code)) =
        policy.pairing.issue("telegram", &Sender { id: "x".to_owned(), display_name: None }, policy.clock.now())
    else {
        panic!("no code")
    };
    let error = policy.approve(&code).unwrap_err();
    assert!(matches!(error, PairingError::Store(_)));
    assert!(error.to_string().contains("disk on fire"), "{error}");
}

#[test]
fn groups_answer_on_mention_by_default() {
    let policy = policy(config());
    assert_eq!(policy.decide(&group("anyone", true)), Decision::Answer);
    assert_eq!(policy.decide(&group("owner", false)), Decision::Ignore { reason: DenyReason::NotMentioned });
}

#[test]
fn groups_can_answer_always() {
    let policy = policy(AccessConfig { groups: GroupPolicy::Always, ..config() });
    assert_eq!(policy.decide(&group("anyone", false)), Decision::Answer);
}

#[test]
fn group_allowlist_answers_listed_rooms_on_mention() {
    let listed =
        policy(AccessConfig { groups: GroupPolicy::Allowlist, allowed_rooms: vec!["room-1".to_owned()], ..config() });
    assert_eq!(listed.decide(&group("anyone", true)), Decision::Answer);
    assert_eq!(listed.decide(&group("anyone", false)), Decision::Ignore { reason: DenyReason::NotMentioned });
    let unlisted = policy(AccessConfig { groups: GroupPolicy::Allowlist, ..config() });
    assert_eq!(unlisted.decide(&group("owner", true)), Decision::Ignore { reason: DenyReason::RoomNotAllowed });
}

#[test]
fn groups_never_get_refusals_or_codes() {
    let policy = policy(AccessConfig { direct: DirectPolicy::Pairing, refusal: Some("no".to_owned()), ..config() });
    assert!(matches!(policy.decide(&group("stranger", false)), Decision::Ignore { .. }));
}

#[test]
fn deny_reasons_read_well_in_logs() {
    assert_eq!(DenyReason::NotMentioned.to_string(), "the group message does not mention the bot");
    assert!(DenyReason::ApprovalUnknown("x".to_owned()).to_string().starts_with("can't"));
    assert!(format!("{:?}", policy(config())).contains("telegram"));
}

#[test]
fn a_disabled_user_is_refused_like_a_stranger_even_as_an_owner_and_ignored_in_rooms() {
    let config =
        AccessConfig { refusal: Some("Sorry, I'm private.".to_owned()), direct: DirectPolicy::Open, ..config() };
    let policy = policy(config);
    let polite = Decision::Refuse { reason: DenyReason::UserDisabled, reply: Some("Sorry, I'm private.".to_owned()) };
    assert_eq!(policy.refuse_disabled_user(&direct("owner")), polite);
    assert_eq!(
        policy.refuse_disabled_user(&direct("owner")),
        Decision::Refuse { reason: DenyReason::UserDisabled, reply: None },
        "the polite refusal goes out once a day"
    );
    assert_eq!(
        policy.refuse_disabled_user(&group("owner", true)),
        Decision::Ignore { reason: DenyReason::UserDisabled }
    );
}
