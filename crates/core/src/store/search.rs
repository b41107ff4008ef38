//! The `SessionSearch` port: full-text search over session transcripts (messages, tool
//! calls and results), answered per context.

use std::future::Future;

use serde::Serialize;

use crate::BoxFuture;

/// Whose sessions a search looks in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchScope<'a> {
    /// Every context's (the owner's CLI).
    Everything,
    /// One context's only (a person's client).
    Context(&'a str),
}

/// One match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    /// Session key.
    pub key: String,
    /// The session's context.
    pub context: String,
    /// The entry that matched.
    pub entry_id: String,
    /// When it was written, RFC 3339.
    pub timestamp: String,
    /// The entry's type (`message`, `tool_result`, …).
    pub kind: String,
    /// Text around the match, each matched term between `**` and `**`.
    pub snippet: String,
}

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The query has no word to look for.
    #[error("can't search: the query has no words")]
    EmptyQuery,
    /// The index could not be read or brought in step.
    #[error("can't search the sessions: {0}")]
    Index(String),
}

/// Full-text search over the transcripts.
pub trait SessionSearch: Send + Sync {
    /// Up to `limit` matches of every word of `query` in `scope`, best first. The index
    /// catches up with the transcripts first (files written by another process too).
    fn search<'a>(
        &'a self,
        query: &'a str,
        scope: SearchScope<'a>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<SearchHit>, SearchError>> + Send + 'a;
}

/// Object-safe companion of [`SessionSearch`].
pub trait DynSessionSearch: Send + Sync {
    /// See [`SessionSearch::search`].
    fn search_boxed<'a>(
        &'a self,
        query: &'a str,
        scope: SearchScope<'a>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<SearchHit>, SearchError>>;
}

impl<T: SessionSearch> DynSessionSearch for T {
    fn search_boxed<'a>(
        &'a self,
        query: &'a str,
        scope: SearchScope<'a>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<SearchHit>, SearchError>> {
        Box::pin(self.search(query, scope, limit))
    }
}
