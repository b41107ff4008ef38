//! Who the bot answers on a channel: the access policy for direct messages and group
//! rooms, the once-a-day polite refusal, and the hand-off to pairing for strangers.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use squidbot_core::clock::Clock;

use crate::pairing::{ApprovedSender, ApprovedSenders, Issued, PairingCodes, PairingError};
use crate::port::{ConversationKind, InboundMessage};

/// How long a sender who got the polite refusal gets nothing more.
pub const REFUSAL_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);

/// How many senders' last refusal times are remembered; the oldest is forgotten first
/// (and may be refused politely once more).
const MAX_REMEMBERED_REFUSALS: usize = 1024;

/// Who may talk to the bot in direct messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DirectPolicy {
    /// Only the owners ([`AccessConfig::owners`]).
    #[default]
    OwnerOnly,
    /// The owners and the senders in [`AccessConfig::allowed_senders`].
    Allowlist,
    /// The owners, the allowlist, and senders the owner approved with a pairing code;
    /// an unknown sender gets a code (see [`crate::PairingCodes`]).
    Pairing,
    /// Anyone.
    Open,
}

/// When the bot answers in group rooms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupPolicy {
    /// When it is mentioned or replied to.
    #[default]
    Mention,
    /// Every message.
    Always,
    /// Only in the rooms in [`AccessConfig::allowed_rooms`], and there when mentioned.
    Allowlist,
}

/// A channel's access settings, as the config file gives them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccessConfig {
    /// The owners' sender ids on this platform; they are always answered in direct
    /// messages and their context is the owner's.
    pub owners: Vec<String>,
    /// Who is answered in direct messages.
    pub direct: DirectPolicy,
    /// When the bot answers in groups.
    pub groups: GroupPolicy,
    /// Sender ids answered in direct messages under [`DirectPolicy::Allowlist`] and
    /// [`DirectPolicy::Pairing`].
    pub allowed_senders: Vec<String>,
    /// Conversation ids of the rooms answered under [`GroupPolicy::Allowlist`].
    pub allowed_rooms: Vec<String>,
    /// The polite refusal sent (at most once a day per sender) to a refused direct
    /// message; `None` sends nothing.
    pub refusal: Option<String>,
}

/// Why a message is not answered, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DenyReason {
    /// A direct message from someone other than the owner under `owner_only`.
    NotOwner,
    /// A direct message from someone not on the allowlist.
    NotAllowed,
    /// A group message that does not mention the bot.
    NotMentioned,
    /// A group message in a room not on the allowlist.
    RoomNotAllowed,
    /// A stranger who already has a pairing code waiting for the owner's approval.
    PairingPending,
    /// The approved senders could not be read, so the sender is treated as unknown.
    ApprovalUnknown(String),
    /// The sender is linked to a user who is disabled.
    UserDisabled,
}

impl fmt::Display for DenyReason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DenyReason::NotOwner => formatter.write_str("the sender is not an owner (direct messages: owner only)"),
            DenyReason::NotAllowed => formatter.write_str("the sender is not on the allowlist"),
            DenyReason::NotMentioned => formatter.write_str("the group message does not mention the bot"),
            DenyReason::RoomNotAllowed => formatter.write_str("the room is not on the allowlist"),
            DenyReason::PairingPending => formatter.write_str("the sender's pairing code awaits the owner's approval"),
            DenyReason::ApprovalUnknown(error) => {
                write!(formatter, "can't tell whether the sender is approved: {error}")
            }
            DenyReason::UserDisabled => formatter.write_str("the sender is linked to a disabled user"),
        }
    }
}

/// What to do with an inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run a turn and reply.
    Answer,
    /// Do nothing (log the reason).
    Ignore {
        /// Why.
        reason: DenyReason,
    },
    /// Do not answer; send `reply` if there is one (the configured refusal, at most once
    /// a day per sender), and log the reason.
    Refuse {
        /// Why.
        reason: DenyReason,
        /// The polite refusal to send, if any.
        reply: Option<String>,
    },
    /// A stranger under [`DirectPolicy::Pairing`]: send them the code (see
    /// [`pairing_reply`]); the owner approves it with `squidbot users approve CODE`.
    PairingCode {
        /// The one-time code.
        code: String,
    },
}

/// The message that gives a stranger their pairing code.
pub fn pairing_reply(code: &str) -> String {
    format!(
        "Hi! I only talk with people my owner has approved. To ask for access, give them this code: {code} \
         (they approve it with `squidbot users approve {code}`; it expires in one hour)."
    )
}

/// When each sender last got the polite refusal, for the most recent senders.
#[derive(Default)]
struct RefusalLog {
    last: HashMap<String, SystemTime>,
    order: VecDeque<String>,
}

impl RefusalLog {
    /// Whether `sender` may get the refusal now; if so, records that they got it.
    fn may_reply(&mut self, sender: &str, now: SystemTime) -> bool {
        if let Some(last) = self.last.get_mut(sender) {
            // A clock that went backwards counts as "recently".
            let elapsed = now.duration_since(*last).unwrap_or(Duration::ZERO);
            if elapsed < REFUSAL_INTERVAL {
                return false;
            }
            *last = now;
            return true;
        }
        while self.order.len() >= MAX_REMEMBERED_REFUSALS {
            if let Some(oldest) = self.order.pop_front() {
                self.last.remove(&oldest);
            }
        }
        self.order.push_back(sender.to_owned());
        self.last.insert(sender.to_owned(), now);
        true
    }
}

/// A channel's access policy: decides, message by message, whether to answer.
pub struct AccessPolicy {
    channel: String,
    config: AccessConfig,
    approved: Arc<dyn ApprovedSenders>,
    pairing: Arc<PairingCodes>,
    clock: Arc<dyn Clock>,
    refusals: Mutex<RefusalLog>,
}

impl fmt::Debug for AccessPolicy {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("AccessPolicy").field("channel", &self.channel).field("config", &self.config).finish()
    }
}

impl AccessPolicy {
    /// The policy of `channel`. `approved` and `pairing` are usually shared by every
    /// channel, so one `approve` reaches a code whichever channel issued it.
    pub fn new(
        channel: impl Into<String>,
        config: AccessConfig,
        approved: Arc<dyn ApprovedSenders>,
        pairing: Arc<PairingCodes>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self { channel: channel.into(), config, approved, pairing, clock, refusals: Mutex::new(RefusalLog::default()) }
    }

    /// The channel this policy guards.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The owners' sender ids (for [`crate::route`]).
    pub fn owners(&self) -> &[String] {
        &self.config.owners
    }

    /// Whether `sender_id` is an owner on this channel.
    pub fn is_owner(&self, sender_id: &str) -> bool {
        self.config.owners.iter().any(|owner| owner == sender_id)
    }

    /// Decides whether to answer `message`.
    pub fn decide(&self, message: &InboundMessage) -> Decision {
        match message.conversation.kind {
            ConversationKind::Group => self.decide_group(message),
            ConversationKind::Direct => self.decide_direct(message),
        }
    }

    fn decide_group(&self, message: &InboundMessage) -> Decision {
        let mentioned = || {
            if message.mentions_bot { Decision::Answer } else { Decision::Ignore { reason: DenyReason::NotMentioned } }
        };
        match self.config.groups {
            GroupPolicy::Always => Decision::Answer,
            GroupPolicy::Mention => mentioned(),
            GroupPolicy::Allowlist if self.config.allowed_rooms.contains(&message.conversation.id) => mentioned(),
            GroupPolicy::Allowlist => Decision::Ignore { reason: DenyReason::RoomNotAllowed },
        }
    }

    fn decide_direct(&self, message: &InboundMessage) -> Decision {
        let sender = &message.sender.id;
        if self.is_owner(sender) {
            return Decision::Answer;
        }
        let allowlisted = self.config.allowed_senders.contains(sender);
        match self.config.direct {
            DirectPolicy::Open => Decision::Answer,
            DirectPolicy::OwnerOnly => self.refuse(DenyReason::NotOwner, sender),
            DirectPolicy::Allowlist if allowlisted => Decision::Answer,
            DirectPolicy::Allowlist => self.refuse(DenyReason::NotAllowed, sender),
            DirectPolicy::Pairing if allowlisted => Decision::Answer,
            DirectPolicy::Pairing => match self.approved.is_approved(&self.channel, sender) {
                Ok(true) => Decision::Answer,
                Ok(false) => match self.pairing.issue(&self.channel, &message.sender, self.clock.now()) {
                    Ok(Issued::New(code)) => Decision::PairingCode { code },
                    Ok(Issued::Pending) => Decision::Ignore { reason: DenyReason::PairingPending },
                    Err(error) => Decision::Ignore { reason: DenyReason::ApprovalUnknown(error.to_string()) },
                },
                // Fail closed, and quietly: the store may be back for the next message.
                Err(error) => Decision::Ignore { reason: DenyReason::ApprovalUnknown(error.to_string()) },
            },
        }
    }

    /// The decision for a message from someone linked to a disabled user: refused like a
    /// stranger in direct messages (the polite refusal at most once a day), ignored in rooms.
    pub fn refuse_disabled_user(&self, message: &InboundMessage) -> Decision {
        match message.conversation.kind {
            ConversationKind::Direct => self.refuse(DenyReason::UserDisabled, &message.sender.id),
            ConversationKind::Group => Decision::Ignore { reason: DenyReason::UserDisabled },
        }
    }

    fn refuse(&self, reason: DenyReason, sender: &str) -> Decision {
        let reply = self.config.refusal.as_ref().filter(|_| {
            let mut log = squidbot_core::sync::lock(&self.refusals);
            log.may_reply(sender, self.clock.now())
        });
        Decision::Refuse { reason, reply: reply.cloned() }
    }

    /// Approves a pairing code (`squidbot users approve CODE`): the sender it was issued
    /// to is stored as approved and answered from now on.
    pub fn approve(&self, code: &str) -> Result<ApprovedSender, PairingError> {
        let sender = self.pairing.approve(code, self.clock.now())?;
        self.approved.approve(&sender).map_err(PairingError::Store)?;
        Ok(sender)
    }
}

#[cfg(test)]
mod tests;
