//! The audit trail's chain: every row carries a keyed hash (HMAC-SHA256) over the
//! previous row's hash and its own fields, and a separately kept head, keyed too, holds
//! the count and the last hash. Editing a row breaks its hash; deleting one breaks the
//! next row's link; deleting the last rows leaves the head pointing past the end; and
//! recomputing the chain takes the key, which is not in the database.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use squidbot_types::people::{AuditEvent, AuditRow};

/// The link of the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The head, kept apart from the rows: where the chain starts (after pruning) and ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditHead {
    /// Sequence number of the first row kept.
    pub first_seq: u64,
    /// The link the first kept row carries.
    pub first_prev: String,
    /// Sequence number of the last row written (0: none).
    pub last_seq: u64,
    /// Its hash.
    pub last_hash: String,
    /// Keyed hash over the fields above.
    pub mac: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn keyed(key: &[u8], parts: &[&str]) -> String {
    // HMAC takes keys of any length; an empty hash would match nothing anyway.
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(key) else { return String::new() };
    for part in parts {
        // Length-prefixed, so no two different field lists hash the same bytes.
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part.as_bytes());
    }
    hex(&mac.finalize().into_bytes())
}

/// The keyed hash of row `seq` holding `event` and linked to `prev_hash`.
pub fn row_hash(key: &[u8], seq: u64, prev_hash: &str, event: &AuditEvent) -> String {
    keyed(
        key,
        &[
            "row",
            &seq.to_string(),
            prev_hash,
            &event.at_ms.to_string(),
            event.kind.name(),
            &event.actor,
            &event.subject,
            if event.ok { "ok" } else { "refused" },
            &event.detail,
        ],
    )
}

/// The row that follows `head` (none: the first row ever).
pub fn next_row(key: &[u8], head: Option<&AuditHead>, event: AuditEvent) -> AuditRow {
    let (seq, prev_hash) = match head {
        Some(head) if head.last_seq > 0 => (head.last_seq + 1, head.last_hash.clone()),
        _ => (1, GENESIS.to_owned()),
    };
    let hash = row_hash(key, seq, &prev_hash, &event);
    AuditRow { seq, event, prev_hash, hash }
}

/// The head after `row` was written on `head`.
pub fn head_after(key: &[u8], head: Option<&AuditHead>, row: &AuditRow) -> AuditHead {
    let (first_seq, first_prev) = match head {
        Some(head) if head.last_seq > 0 => (head.first_seq, head.first_prev.clone()),
        _ => (row.seq, row.prev_hash.clone()),
    };
    sealed(key, first_seq, first_prev, row.seq, row.hash.clone())
}

/// A head with its keyed hash.
pub fn sealed(key: &[u8], first_seq: u64, first_prev: String, last_seq: u64, last_hash: String) -> AuditHead {
    let mac = keyed(key, &["head", &first_seq.to_string(), &first_prev, &last_seq.to_string(), &last_hash]);
    AuditHead { first_seq, first_prev, last_seq, last_hash, mac }
}

/// How a chain failed its check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    /// The head was changed without the key.
    #[error("the audit head was changed by something without the key")]
    ForgedHead,
    /// A row's fields don't match its hash (edited, or the chain recomputed without the key).
    #[error("row {seq} was edited (its hash does not match its contents)")]
    Edited {
        /// The row.
        seq: u64,
    },
    /// Rows are missing.
    #[error("rows are missing: expected row {expected}, found {found}")]
    Missing {
        /// The row that should come next.
        expected: u64,
        /// The row found instead (0: the end).
        found: u64,
    },
    /// A row does not link to the one before.
    #[error("row {seq} does not follow the row before it")]
    Unlinked {
        /// The row.
        seq: u64,
    },
    /// There are rows but no head, or a head but no rows.
    #[error("the audit head is missing")]
    NoHead,
}

/// Checks rows one at a time against a head (see [`verify`]).
#[derive(Debug)]
pub struct Verifier<'a> {
    key: &'a [u8],
    head: Option<AuditHead>,
    next_seq: u64,
    prev: String,
    count: u64,
}

impl<'a> Verifier<'a> {
    /// A check of the chain ending at `head` (none: there must be no rows).
    pub fn new(key: &'a [u8], head: Option<&AuditHead>) -> Result<Verifier<'a>, ChainBreak> {
        if let Some(head) = head {
            let expected = sealed(key, head.first_seq, head.first_prev.clone(), head.last_seq, head.last_hash.clone());
            if !crate::secrets::same(expected.mac.as_bytes(), head.mac.as_bytes()) {
                return Err(ChainBreak::ForgedHead);
            }
        }
        Ok(Verifier {
            key,
            head: head.cloned(),
            next_seq: head.map_or(1, |head| head.first_seq),
            prev: head.map_or_else(|| GENESIS.to_owned(), |head| head.first_prev.clone()),
            count: 0,
        })
    }

    /// Checks the next row.
    pub fn feed(&mut self, row: &AuditRow) -> Result<(), ChainBreak> {
        if self.head.is_none() {
            return Err(ChainBreak::NoHead);
        }
        if row.seq != self.next_seq {
            return Err(ChainBreak::Missing { expected: self.next_seq, found: row.seq });
        }
        if row_hash(self.key, row.seq, &row.prev_hash, &row.event) != row.hash {
            return Err(ChainBreak::Edited { seq: row.seq });
        }
        if row.prev_hash != self.prev {
            return Err(ChainBreak::Unlinked { seq: row.seq });
        }
        self.prev.clone_from(&row.hash);
        self.next_seq += 1;
        self.count += 1;
        Ok(())
    }

    /// Checks that the rows reached the head; how many rows passed.
    pub fn finish(self) -> Result<u64, ChainBreak> {
        match &self.head {
            Some(head) if head.last_seq != 0 && (self.next_seq != head.last_seq + 1 || self.prev != head.last_hash) => {
                Err(ChainBreak::Missing { expected: self.next_seq, found: 0 })
            }
            _ => Ok(self.count),
        }
    }
}

/// Checks `rows` (in order) against `head` with `key`; returns how many rows passed.
pub fn verify<I>(key: &[u8], head: Option<&AuditHead>, rows: I) -> Result<u64, ChainBreak>
where
    I: IntoIterator<Item = AuditRow>,
{
    let mut verifier = Verifier::new(key, head)?;
    for row in rows {
        verifier.feed(&row)?;
    }
    verifier.finish()
}

/// Why a stored trail could not be checked, or how it failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The chain is broken.
    #[error(transparent)]
    Broken(#[from] ChainBreak),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] super::ports::PeopleStoreError),
}

/// Checks the whole trail in `log`, a page at a time; how many rows passed.
pub fn verify_log(key: &[u8], log: &dyn super::ports::AuditLog) -> Result<u64, VerifyError> {
    let head = log.head()?;
    let mut verifier = Verifier::new(key, head.as_ref())?;
    let mut after = head.as_ref().map_or(0, |head| head.first_seq.saturating_sub(1));
    loop {
        let page = log.rows(after, 5_000)?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for row in &page {
            verifier.feed(row)?;
        }
    }
    Ok(verifier.finish()?)
}

#[cfg(test)]
mod tests {
    use squidbot_types::people::AuditKind;

    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn event(subject: &str) -> AuditEvent {
        AuditEvent {
            at_ms: 1,
            kind: AuditKind::ToolCall,
            actor: "alice".into(),
            subject: subject.into(),
            ok: true,
            detail: "{}".into(),
        }
    }

    fn chain(key: &[u8], count: usize) -> (Vec<AuditRow>, Option<AuditHead>) {
        let mut rows = Vec::new();
        let mut head = None;
        for index in 0..count {
            let row = next_row(key, head.as_ref(), event(&format!("tool{index}")));
            head = Some(head_after(key, head.as_ref(), &row));
            rows.push(row);
        }
        (rows, head)
    }

    #[test]
    fn an_intact_chain_verifies() {
        let (rows, head) = chain(KEY, 5);
        assert_eq!(verify(KEY, head.as_ref(), rows), Ok(5));
        assert_eq!(verify(KEY, None, Vec::new()), Ok(0));
    }

    #[test]
    fn an_edited_row_is_found() {
        let (mut rows, head) = chain(KEY, 5);
        rows[2].event.subject = "something else".into();
        assert_eq!(verify(KEY, head.as_ref(), rows), Err(ChainBreak::Edited { seq: 3 }));
    }

    #[test]
    fn a_deleted_row_is_found_in_the_middle_and_at_the_end() {
        let (mut rows, head) = chain(KEY, 5);
        rows.remove(1);
        assert_eq!(verify(KEY, head.as_ref(), rows), Err(ChainBreak::Missing { expected: 2, found: 3 }));
        let (mut rows, head) = chain(KEY, 5);
        rows.pop();
        assert_eq!(verify(KEY, head.as_ref(), rows), Err(ChainBreak::Missing { expected: 5, found: 0 }));
    }

    #[test]
    fn a_chain_recomputed_without_the_key_is_found() {
        let (rows, _) = chain(KEY, 3);
        let (mut forged, forged_head) = chain(b"another key", 3);
        forged[1].event.subject = rows[1].event.subject.clone();
        assert_eq!(verify(KEY, forged_head.as_ref(), forged), Err(ChainBreak::ForgedHead));
        // Keeping the real head and recomputing only the rows fails at the first row.
        let (_, head) = chain(KEY, 3);
        let (forged, _) = chain(b"another key", 3);
        assert_eq!(verify(KEY, head.as_ref(), forged), Err(ChainBreak::Edited { seq: 1 }));
    }

    #[test]
    fn pruned_chains_start_at_their_recorded_first_row() {
        let (rows, head) = chain(KEY, 6);
        let head = head.unwrap();
        let kept: Vec<AuditRow> = rows[2..].to_vec();
        let pruned = sealed(KEY, 3, kept[0].prev_hash.clone(), head.last_seq, head.last_hash.clone());
        assert_eq!(verify(KEY, Some(&pruned), kept.clone()), Ok(4));
        assert_eq!(verify(KEY, Some(&head), kept), Err(ChainBreak::Missing { expected: 1, found: 3 }));
    }
}
