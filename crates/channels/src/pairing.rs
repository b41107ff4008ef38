//! Pairing: one-time codes that let a stranger ask the owner for access, and in-memory
//! stores of pending codes and approved senders (core's `access` ports; the database
//! keeps them in the gateway).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

pub use squidbot_core::access::{AccessStoreError, ApprovedSender, ApprovedSenders, PendingCodes, PendingPairing};
use squidbot_core::random::RandomSource;

use crate::port::Sender;

/// Characters of a pairing code: capital letters and digits without the look-alikes
/// `0`/`O`, `1`/`I`/`L`, so a code read aloud or retyped comes out right.
pub const PAIRING_CODE_ALPHABET: &str = "ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// Characters in a pairing code.
pub const PAIRING_CODE_LENGTH: usize = 6;

/// How long a pairing code can be approved.
pub const PAIRING_CODE_LIFETIME: Duration = Duration::from_secs(60 * 60);

/// Most codes kept at once; past it the oldest is dropped, so a flood of strangers
/// can't grow memory.
const MAX_PENDING_CODES: usize = 256;

/// Expired codes are kept this long after expiring to tell "expired" from "unknown".
const EXPIRED_CODES_KEPT: Duration = Duration::from_secs(24 * 60 * 60);

/// Why a pairing code could not be approved.
#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    /// No such code was issued (or it was already used).
    #[error("can't approve pairing code {code}: no such code is waiting (it may have been used already)")]
    UnknownCode {
        /// The code as given.
        code: String,
    },
    /// The code is older than [`PAIRING_CODE_LIFETIME`].
    #[error("can't approve pairing code {code}: it expired; the sender gets a new one when they write again")]
    Expired {
        /// The code as given.
        code: String,
    },
    /// The approval could not be stored.
    #[error("can't approve the pairing code: {0}")]
    Store(#[source] AccessStoreError),
}

/// Approved senders by (channel, sender id).
type ApprovedMap = HashMap<(String, String), ApprovedSender>;

/// Approved senders held in memory (lost on restart).
#[derive(Debug, Default)]
pub struct MemoryApprovedSenders {
    approved: Mutex<ApprovedMap>,
}

impl MemoryApprovedSenders {
    fn locked(&self, action: &str) -> Result<std::sync::MutexGuard<'_, ApprovedMap>, AccessStoreError> {
        self.approved.lock().map_err(|_poisoned| AccessStoreError {
            action: action.to_owned(),
            reason: "a thread panicked while holding them".to_owned(),
        })
    }
}

impl ApprovedSenders for MemoryApprovedSenders {
    fn is_approved(&self, channel: &str, sender_id: &str) -> Result<bool, AccessStoreError> {
        Ok(self.locked("read approved senders")?.contains_key(&(channel.to_owned(), sender_id.to_owned())))
    }

    fn approve(&self, sender: &ApprovedSender) -> Result<(), AccessStoreError> {
        self.locked("store an approved sender")?
            .insert((sender.channel.clone(), sender.sender_id.clone()), sender.clone());
        Ok(())
    }

    fn revoke(&self, channel: &str, sender_id: &str) -> Result<bool, AccessStoreError> {
        Ok(self.locked("remove an approved sender")?.remove(&(channel.to_owned(), sender_id.to_owned())).is_some())
    }

    fn list(&self) -> Result<Vec<ApprovedSender>, AccessStoreError> {
        let mut senders: Vec<ApprovedSender> = self.locked("read approved senders")?.values().cloned().collect();
        senders.sort_by(|first, second| (&first.channel, &first.sender_id).cmp(&(&second.channel, &second.sender_id)));
        Ok(senders)
    }
}

/// What [`PairingCodes::issue`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issued {
    /// A fresh code to send to the stranger.
    New(String),
    /// The stranger already has a live code; nothing new is sent, so writing again
    /// does not make the bot send message after message.
    Pending,
}

struct MemoryCodes {
    pending: HashMap<String, PendingPairing>,
    /// Codes oldest first, for dropping the oldest when full.
    order: VecDeque<String>,
}

/// Pending codes held in memory (lost on restart).
pub struct MemoryPendingCodes {
    state: Mutex<MemoryCodes>,
}

impl Default for MemoryPendingCodes {
    fn default() -> Self {
        Self { state: Mutex::new(MemoryCodes { pending: HashMap::new(), order: VecDeque::new() }) }
    }
}

impl fmt::Debug for MemoryPendingCodes {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("MemoryPendingCodes").finish_non_exhaustive()
    }
}

impl MemoryPendingCodes {
    fn state(&self) -> std::sync::MutexGuard<'_, MemoryCodes> {
        // The state stays consistent between statements, so a panic elsewhere leaves it usable.
        squidbot_core::sync::lock(&self.state)
    }
}

impl PendingCodes for MemoryPendingCodes {
    fn has_live_code(&self, channel: &str, sender_id: &str, now: SystemTime) -> Result<bool, AccessStoreError> {
        Ok(self
            .state()
            .pending
            .values()
            .any(|pending| pending.channel == channel && pending.sender.id == sender_id && pending.expires_at > now))
    }

    fn insert(&self, pending: &PendingPairing, now: SystemTime) -> Result<bool, AccessStoreError> {
        let mut state = self.state();
        forget_old(&mut state, now);
        if state.pending.contains_key(&pending.code) {
            return Ok(false);
        }
        while state.order.len() >= MAX_PENDING_CODES {
            if let Some(oldest) = state.order.pop_front() {
                state.pending.remove(&oldest);
            }
        }
        state.order.push_back(pending.code.clone());
        state.pending.insert(pending.code.clone(), pending.clone());
        Ok(true)
    }

    fn take(&self, code: &str) -> Result<Option<PendingPairing>, AccessStoreError> {
        let mut state = self.state();
        let taken = state.pending.remove(code);
        state.order.retain(|queued| queued != code);
        Ok(taken)
    }

    fn pending(&self, now: SystemTime) -> Result<Vec<PendingPairing>, AccessStoreError> {
        let state = self.state();
        Ok(state
            .order
            .iter()
            .filter_map(|code| state.pending.get(code))
            .filter(|pending| pending.expires_at > now)
            .cloned()
            .collect())
    }
}

/// Drops codes that expired long enough ago.
fn forget_old(state: &mut MemoryCodes, now: SystemTime) {
    let MemoryCodes { pending, order } = state;
    pending.retain(|_, code| code.expires_at.checked_add(EXPIRED_CODES_KEPT).is_none_or(|forget_at| forget_at > now));
    order.retain(|code| pending.contains_key(code));
}

/// Pairing codes waiting for the owner's approval, shared by every channel's policy.
pub struct PairingCodes {
    random: Mutex<Box<dyn RandomSource>>,
    store: std::sync::Arc<dyn PendingCodes>,
}

impl fmt::Debug for PairingCodes {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("PairingCodes").finish_non_exhaustive()
    }
}

/// Most draws tried for a code that isn't taken before giving up.
const MAX_CODE_DRAWS: usize = 16;

impl PairingCodes {
    /// Codes drawn from `random`, kept in memory; in production an unpredictable source
    /// ([`crate::SystemRandom`]), since a guessed code is an open door.
    pub fn new(random: Box<dyn RandomSource>) -> Self {
        Self::with_store(random, std::sync::Arc::new(MemoryPendingCodes::default()))
    }

    /// Codes drawn from `random`, kept in `store`.
    pub fn with_store(random: Box<dyn RandomSource>, store: std::sync::Arc<dyn PendingCodes>) -> Self {
        Self { random: Mutex::new(random), store }
    }

    fn draw(&self) -> String {
        let mut random = squidbot_core::sync::lock(&self.random);
        new_code(random.as_mut())
    }

    /// A code for `sender` on `channel`, unless they already have a live one.
    pub fn issue(&self, channel: &str, sender: &Sender, now: SystemTime) -> Result<Issued, AccessStoreError> {
        if self.store.has_live_code(channel, &sender.id, now)? {
            return Ok(Issued::Pending);
        }
        let expires_at = now.checked_add(PAIRING_CODE_LIFETIME).unwrap_or(now);
        for _ in 0..MAX_CODE_DRAWS {
            let pending =
                PendingPairing { code: self.draw(), channel: channel.to_owned(), sender: sender.clone(), expires_at };
            if self.store.insert(&pending, now)? {
                return Ok(Issued::New(pending.code));
            }
        }
        Err(AccessStoreError {
            action: "store a pairing code".to_owned(),
            reason: format!("{MAX_CODE_DRAWS} codes drawn in a row were taken"),
        })
    }

    /// Takes the sender waiting on `code` (case and surrounding spaces don't matter). A
    /// code works once.
    pub fn approve(&self, code: &str, now: SystemTime) -> Result<ApprovedSender, PairingError> {
        let normalized = code.trim().to_ascii_uppercase();
        let Some(pending) = self.store.take(&normalized).map_err(PairingError::Store)? else {
            return Err(PairingError::UnknownCode { code: code.trim().to_owned() });
        };
        if pending.expires_at <= now {
            return Err(PairingError::Expired { code: normalized });
        }
        Ok(ApprovedSender {
            channel: pending.channel,
            sender_id: pending.sender.id,
            display_name: pending.sender.display_name,
            approved_at: now,
        })
    }

    /// The codes still waiting, oldest first.
    pub fn pending(&self, now: SystemTime) -> Result<Vec<PendingPairing>, AccessStoreError> {
        self.store.pending(now)
    }
}

fn new_code(random: &mut dyn RandomSource) -> String {
    let alphabet: Vec<char> = PAIRING_CODE_ALPHABET.chars().collect();
    let size = u64::try_from(alphabet.len()).unwrap_or(1);
    (0..PAIRING_CODE_LENGTH)
        .map(|_| {
            // 2^64 is not a multiple of 31, but the bias of a 64-bit draw is ~1e-18.
            let index = usize::try_from(random.next_u64() % size).unwrap_or(0);
            alphabet.get(index).copied().unwrap_or('A')
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use squidbot_core::random::SeededRandom;

    use super::*;

    fn sender(id: &str) -> Sender {
        Sender { id: id.to_owned(), display_name: Some(format!("{id} name")) }
    }

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + seconds)
    }

    fn codes() -> PairingCodes {
        PairingCodes::new(Box::new(SeededRandom::new(1)))
    }

    #[test]
    fn codes_use_the_unambiguous_alphabet() {
        let mut random = SeededRandom::new(9);
        for _ in 0..500 {
            let code = new_code(&mut random);
            assert_eq!(code.chars().count(), PAIRING_CODE_LENGTH);
            assert!(code.chars().all(|character| PAIRING_CODE_ALPHABET.contains(character)), "{code}");
            assert!(!code.contains(['0', 'O', '1', 'I', 'L']), "{code}");
        }
    }

    #[test]
    fn a_code_approves_its_sender_once() {
        let codes = codes();
        let Issued::New(code) = codes.issue("telegram", &sender("42"), at(0)).unwrap() else { panic!("no code") };
        let approved = codes.approve(&format!("  {}  ", code.to_lowercase()), at(60)).unwrap();
        assert_eq!(approved.channel, "telegram");
        assert_eq!(approved.sender_id, "42");
        assert_eq!(approved.display_name.as_deref(), Some("42 name"));
        assert_eq!(approved.approved_at, at(60));
        assert!(matches!(codes.approve(&code, at(61)), Err(PairingError::UnknownCode { .. })));
    }

    #[test]
    fn a_sender_with_a_live_code_gets_no_new_one_until_it_expires() {
        let codes = codes();
        let Issued::New(first) = codes.issue("telegram", &sender("42"), at(0)).unwrap() else { panic!("no code") };
        assert_eq!(codes.issue("telegram", &sender("42"), at(30)).unwrap(), Issued::Pending);
        assert_eq!(codes.pending(at(30)).unwrap().len(), 1);
        let Issued::New(second) = codes.issue("telegram", &sender("42"), at(3600)).unwrap() else {
            panic!("no new code")
        };
        assert_ne!(first, second);
        assert!(matches!(codes.approve(&first, at(3601)), Err(PairingError::Expired { .. })));
        assert!(codes.approve(&second, at(3601)).is_ok());
    }

    #[test]
    fn expired_and_unknown_codes_are_refused() {
        let codes = codes();
        let Issued::New(code) = codes.issue("slack", &sender("U1"), at(0)).unwrap() else { panic!("no code") };
        let error = codes.approve(&code, at(3600)).unwrap_err();
        assert!(matches!(error, PairingError::Expired { .. }), "{error}");
        assert!(error.to_string().starts_with("can't approve"), "{error}");
        assert!(matches!(codes.approve("ZZZZZZ", at(0)), Err(PairingError::UnknownCode { .. })));
    }

    #[test]
    fn pending_codes_are_bounded() {
        let codes = codes();
        let first = codes.issue("telegram", &sender("first"), at(0)).unwrap();
        for number in 0..MAX_PENDING_CODES {
            codes.issue("telegram", &sender(&number.to_string()), at(1)).unwrap();
        }
        assert_eq!(codes.pending(at(2)).unwrap().len(), MAX_PENDING_CODES);
        let Issued::New(first) = first else { panic!("no code") };
        assert!(matches!(codes.approve(&first, at(2)), Err(PairingError::UnknownCode { .. })));
    }

    #[test]
    fn long_expired_codes_are_forgotten() {
        let store = MemoryPendingCodes::default();
        let pending = |code: &str, expires: u64| PendingPairing {
            code: code.to_owned(),
            channel: "telegram".to_owned(),
            sender: sender(code),
            expires_at: at(expires),
        };
        assert!(store.insert(&pending("AAAAAA", 3600), at(0)).unwrap());
        assert!(store.insert(&pending("BBBBBB", 3 * 24 * 3600), at(2 * 24 * 3600)).unwrap());
        let state = store.state();
        assert_eq!(state.pending.len(), 1);
        assert_eq!(state.order.len(), 1);
    }

    #[test]
    fn memory_store_approves_revokes_and_lists() {
        let store = MemoryApprovedSenders::default();
        let sender = ApprovedSender {
            channel: "matrix".to_owned(),
            sender_id: "@a:example.org".to_owned(),
            display_name: None,
            approved_at: at(0),
        };
        assert!(!store.is_approved("matrix", "@a:example.org").unwrap());
        store.approve(&sender).unwrap();
        assert!(store.is_approved("matrix", "@a:example.org").unwrap());
        assert!(!store.is_approved("telegram", "@a:example.org").unwrap());
        assert_eq!(store.list().unwrap(), vec![sender]);
        assert!(store.revoke("matrix", "@a:example.org").unwrap());
        assert!(!store.revoke("matrix", "@a:example.org").unwrap());
    }
}
