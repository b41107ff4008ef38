//! The runner's side of the session tree: listing, switching and forking a session that
//! front ends may hold open, waiting for a running turn of it to end first.

use super::Runner;
use crate::agent::AgentError;
use crate::clock::rfc3339;
use crate::session::Session;
use crate::session::branches::{self, BranchError, LeafMove, TreeNode};

/// Why a tree operation of the runner failed.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The session does not exist.
    #[error("can't find session {0}")]
    UnknownSession(String),
    /// The entry is unknown, or the store failed.
    #[error(transparent)]
    Branch(#[from] BranchError),
    /// Opening the session failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
}

impl Runner {
    /// The whole stored tree of `key` with the open session's leaf (which may be ahead of
    /// the store by entries not yet synced).
    pub async fn whole_session(&self, key: &str) -> Result<Session, TreeError> {
        let stored = self.agent.store().load_boxed(key).await.map_err(BranchError::from)?;
        let Some(stored) = stored else { return Err(TreeError::UnknownSession(key.to_owned())) };
        let mut whole = Session::from_loaded(stored);
        let open = self.session(key).await?;
        let open = open.lock().await;
        for entry in open.entries() {
            if whole.entry(&entry.id).is_none() {
                whole.append_loaded(entry.clone());
            }
        }
        match open.leaf() {
            Some(leaf) => {
                whole.checkout(leaf);
            }
            None => whole.start_new_branch(),
        }
        Ok(whole)
    }

    /// The tree of `key` (see [`Session::tree`]).
    pub async fn tree(&self, key: &str) -> Result<Vec<TreeNode>, TreeError> {
        Ok(self.whole_session(key).await?.tree())
    }

    /// Moves the active leaf of `key` to `entry` (see [`LeafMove`]), in the open session
    /// and the store; returns the new leaf.
    pub async fn move_leaf(&self, key: &str, entry: &str, how: LeafMove) -> Result<String, TreeError> {
        let open = self.session(key).await?;
        let mut open = open.lock().await;
        let store = self.agent.store().clone();
        let timestamp = rfc3339(self.agent.clock().now());
        let Some(stored) = store.load_boxed(key).await.map_err(BranchError::from)? else {
            // Not on disk yet: the open session is all there is.
            return Ok(branches::move_leaf(store.as_ref(), &mut open, entry, how, timestamp).await?);
        };
        let mut whole = Session::from_loaded(stored);
        for written in open.entries() {
            if whole.entry(&written.id).is_none() {
                whole.append_loaded(written.clone());
            }
        }
        let leaf = branches::move_leaf(store.as_ref(), &mut whole, entry, how, timestamp).await?;
        whole.release_compacted();
        whole.choose_model(open.chosen_model().map(str::to_owned));
        *open = whole;
        Ok(leaf)
    }

    /// Chooses the model of `key`'s next turns (`None`: the agent's own); returns the one
    /// chosen before. Kept while the session stays open.
    pub async fn choose_model(&self, key: &str, model: Option<String>) -> Result<Option<String>, TreeError> {
        let open = self.session(key).await?;
        let mut open = open.lock().await;
        let before = open.chosen_model().map(str::to_owned);
        open.choose_model(model);
        Ok(before)
    }

    /// Condenses every turn of `key` but the last now (waits for a running turn to end);
    /// `None` when there was nothing to condense or compaction is off.
    pub async fn compact(&self, key: &str) -> Result<Option<usize>, TreeError> {
        let open = self.session(key).await?;
        let mut open = open.lock().await;
        Ok(self.agent.compact_now(&mut open, &crate::agent::SilentEvents).await?)
    }

    /// Forks `key` before its last user message (see [`Session::previous_turn_point`]):
    /// the next message is asked again on a new branch. `None` when there is no earlier
    /// turn to go back to.
    pub async fn fork_before_last(&self, key: &str) -> Result<Option<String>, TreeError> {
        let Some(entry) = self.whole_session(key).await?.previous_turn_point() else { return Ok(None) };
        self.move_leaf(key, &entry, LeafMove::Fork).await.map(Some)
    }

    /// Copies the branch of `key` up to `entry` into the new session `new_key` (same
    /// context); returns the copy's leaf.
    pub async fn fork_into(&self, key: &str, entry: &str, new_key: &str) -> Result<String, TreeError> {
        let whole = self.whole_session(key).await?;
        let header = branches::fork_header(&whole, new_key, rfc3339(self.agent.clock().now()));
        let copy = branches::fork_into(self.agent.store().as_ref(), &whole, entry, header).await?;
        Ok(copy.leaf().unwrap_or_default().to_owned())
    }
}
