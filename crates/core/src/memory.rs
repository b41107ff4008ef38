//! Long-term memory: the `MemoryStore` and `Embedder` ports and the `Memories` service
//! that adds policy on top: near-duplicate merging, hybrid recall (full-text + vector
//! fused by reciprocal rank fusion, one hop of graph expansion, importance and recency).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use squidbot_types::memory::{LinkKind, Memory, MemoryLink, MemoryType, NewMemory};

use crate::BoxFuture;
use crate::clock::Clock;
use crate::provider::ProviderError;

pub mod bulletin;
mod document;
mod fusion;
pub mod in_memory;
mod sections;
mod similarity;

pub use bulletin::{Bulletin, BulletinError, Bulletins};
pub use document::{DOCUMENT_CAP, DocumentEdit, MemoryDocuments, apply_edit};
pub use fusion::{RRF_K, fuse};
pub use sections::MemorySections;
pub use similarity::{is_near_duplicate, normalize};

/// The instructions for writing the memory bulletin.
pub const BULLETIN_PROMPT: crate::context::Prompt =
    crate::context::Prompt { name: "bulletin.md", default: include_str!("../prompts/bulletin.md") };

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The database could not be used.
    #[error("can't {action} memories: {reason}")]
    Store {
        /// What was attempted.
        action: &'static str,
        /// The underlying error.
        reason: String,
    },
    /// The memory does not exist in this context.
    #[error("can't find memory {id}")]
    NotFound {
        /// The id asked for.
        id: i64,
    },
    /// The input was unusable (empty content, importance out of range).
    #[error("can't save the memory: {0}")]
    Invalid(String),
}

/// A ranked id with its engine-specific score (BM25 or distance; lower is better).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranked {
    /// Memory id.
    pub id: i64,
    /// Engine score, lower is better.
    pub score: f64,
}

/// Which memories a listing returns.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only these types (all when empty).
    pub types: Vec<MemoryType>,
    /// Maximum rows.
    pub limit: usize,
    /// Rows to skip.
    pub offset: usize,
}

/// Counts for `status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Memories in the context.
    pub memories: u64,
    /// Of those, with a vector.
    pub with_vectors: u64,
}

/// Changes applied when a save merges into an existing memory.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryUpdate {
    /// New wording.
    pub content: String,
    /// New importance.
    pub importance: f32,
    /// New tag set.
    pub tags: Vec<String>,
    /// New expiry.
    pub expires_at: Option<i64>,
    /// Links to add.
    pub links: Vec<MemoryLink>,
}

/// Durable memory storage. Calls block (SQLite); [`Memories`] runs them off the async
/// workers. Every call is scoped by context except the maintenance ones.
pub trait MemoryStore: Send + Sync + 'static {
    /// Stores a new memory (and its vector) and returns its id.
    fn insert(&self, memory: &NewMemory, embedding: Option<&[f32]>, now: i64) -> Result<i64, MemoryError>;
    /// Changes an existing memory (and replaces its vector when given).
    fn update(
        &self,
        context: &str,
        id: i64,
        update: &MemoryUpdate,
        embedding: Option<&[f32]>,
        now: i64,
    ) -> Result<(), MemoryError>;
    /// Stores many new memories in one transaction; ids in input order. The default
    /// inserts one at a time.
    fn insert_many(&self, memories: &[(NewMemory, Option<Vec<f32>>)], now: i64) -> Result<Vec<i64>, MemoryError> {
        memories.iter().map(|(memory, embedding)| self.insert(memory, embedding.as_deref(), now)).collect()
    }
    /// A memory of `context` whose normalized text equals `normalized` (see [`normalize`]).
    fn find_same(&self, context: &str, normalized: &str) -> Result<Option<Memory>, MemoryError> {
        Ok(self
            .candidates(context, normalized, 5)?
            .into_iter()
            .find(|memory| self::normalize(&memory.content) == normalized))
    }
    /// Memories that might duplicate `content`: same normalized text first, then the
    /// best full-text matches.
    fn candidates(&self, context: &str, content: &str, limit: usize) -> Result<Vec<Memory>, MemoryError>;
    /// Full-text search (BM25). Any query text is accepted: syntax characters never error.
    fn search_text(&self, context: &str, query: &str, limit: usize) -> Result<Vec<Ranked>, MemoryError>;
    /// Nearest vectors by cosine distance.
    fn search_vector(&self, context: &str, embedding: &[f32], limit: usize) -> Result<Vec<Ranked>, MemoryError>;
    /// Links touching any of `ids`, in either direction, as (from, kind, to).
    fn links(&self, context: &str, ids: &[i64]) -> Result<Vec<(i64, LinkKind, i64)>, MemoryError>;
    /// The memories with these ids that are in `context` and not expired at `now`.
    fn get_many(&self, context: &str, ids: &[i64], now: i64) -> Result<Vec<Memory>, MemoryError>;
    /// Records that recall returned these memories.
    fn touch(&self, context: &str, ids: &[i64], now: i64) -> Result<(), MemoryError>;
    /// Deletes one memory; false when it was not there.
    fn delete(&self, context: &str, id: i64) -> Result<bool, MemoryError>;
    /// Lists memories, most recently updated first.
    fn list(&self, context: &str, filter: &ListFilter, now: i64) -> Result<Vec<Memory>, MemoryError>;
    /// Deletes every memory expired at `now`; returns how many.
    fn expire(&self, now: i64) -> Result<usize, MemoryError>;
    /// Changes whenever the context's memories change (for caches such as the bulletin).
    fn fingerprint(&self, context: &str) -> Result<String, MemoryError>;
    /// Counts for status.
    fn stats(&self, context: &str) -> Result<MemoryStats, MemoryError>;
    /// Up to `limit` memories without a vector, as (id, content).
    fn missing_vectors(&self, limit: usize) -> Result<Vec<(i64, String)>, MemoryError>;
    /// Stores the vector of one memory.
    fn set_vector(&self, id: i64, embedding: &[f32]) -> Result<(), MemoryError>;
}

/// Turns text into vectors.
pub trait Embedder: Send + Sync {
    /// `provider/model` of the embedding model.
    fn model(&self) -> &str;
    /// One vector per text, in order.
    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> impl Future<Output = Result<Vec<Vec<f32>>, ProviderError>> + Send + 'a;
}

/// Object-safe companion of [`Embedder`].
pub trait DynEmbedder: Send + Sync {
    /// See [`Embedder::model`].
    fn model(&self) -> &str;
    /// Boxed form of [`Embedder::embed`].
    fn embed_boxed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, ProviderError>>;
}

impl<T: Embedder> DynEmbedder for T {
    fn model(&self) -> &str {
        Embedder::model(self)
    }

    fn embed_boxed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, ProviderError>> {
        Box::pin(self.embed(texts))
    }
}

/// How recall works with the current configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecallMode {
    /// Full-text and vector search.
    Hybrid,
    /// Full-text search only (no embedder configured, or it failed for this query).
    FullTextOnly,
}

impl RecallMode {
    /// Shown in status and recall results.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Hybrid => "hybrid (full-text + vectors)",
            Self::FullTextOnly => "full-text only",
        }
    }
}

/// Which engines found a hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Full-text only.
    Text,
    /// Vector only.
    Vector,
    /// Both engines.
    Both,
    /// A link from another hit.
    Link,
}

/// One recalled memory.
#[derive(Debug, Clone)]
pub struct RecallHit {
    /// The memory.
    pub memory: Memory,
    /// Final score, higher is better.
    pub score: f64,
    /// How it was found.
    pub found: Found,
}

/// The result of a recall.
#[derive(Debug, Clone)]
pub struct Recall {
    /// Hits, best first.
    pub hits: Vec<RecallHit>,
    /// Engines used.
    pub mode: RecallMode,
    /// Set when the embedder failed and recall fell back to full text.
    pub warning: Option<String>,
}

/// Result of a save.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveOutcome {
    /// A new memory.
    Created(i64),
    /// A near-identical memory was updated instead.
    Updated(i64),
}

impl SaveOutcome {
    /// The id either way.
    pub fn id(self) -> i64 {
        match self {
            Self::Created(id) | Self::Updated(id) => id,
        }
    }
}

/// Candidate pool per engine before fusion.
const POOL: usize = 50;

/// The memory service: ports plus policy.
#[derive(Clone)]
pub struct Memories {
    store: Arc<dyn MemoryStore>,
    embedder: Option<Arc<dyn DynEmbedder>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Memories {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Memories").field("mode", &self.mode()).finish()
    }
}

impl Memories {
    /// Wires the service.
    pub fn new(store: Arc<dyn MemoryStore>, embedder: Option<Arc<dyn DynEmbedder>>, clock: Arc<dyn Clock>) -> Self {
        Self { store, embedder, clock }
    }

    /// Recall mode with this configuration.
    pub fn mode(&self) -> RecallMode {
        if self.embedder.is_some() { RecallMode::Hybrid } else { RecallMode::FullTextOnly }
    }

    /// The embedding model, if any.
    pub fn embedding_model(&self) -> Option<&str> {
        self.embedder.as_ref().map(|embedder| embedder.model())
    }

    /// Current time in Unix seconds.
    pub fn now(&self) -> i64 {
        self.clock.unix_seconds()
    }

    /// Runs a blocking store call off the async workers.
    async fn blocking<T: Send + 'static>(
        &self,
        call: impl FnOnce(&dyn MemoryStore) -> Result<T, MemoryError> + Send + 'static,
    ) -> Result<T, MemoryError> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || call(store.as_ref()))
            .await
            .map_err(|error| MemoryError::Store { action: "reach", reason: error.to_string() })?
    }

    async fn embed_one(&self, text: &str) -> Result<Option<Vec<f32>>, ProviderError> {
        let Some(embedder) = &self.embedder else { return Ok(None) };
        let texts = [text.to_owned()];
        let mut vectors = embedder.embed_boxed(&texts).await?;
        Ok(vectors.pop())
    }

    /// Saves a memory, merging it into a near-identical one of the same context.
    /// An embedder failure is logged and the memory is saved without a vector.
    pub async fn save(&self, memory: NewMemory) -> Result<SaveOutcome, MemoryError> {
        let content = memory.content.trim().to_owned();
        if content.is_empty() {
            return Err(MemoryError::Invalid("the content is empty".into()));
        }
        if !(0.0..=1.0).contains(&memory.importance) || memory.importance.is_nan() {
            return Err(MemoryError::Invalid(format!("importance {} is outside 0..1", memory.importance)));
        }
        let memory = NewMemory { content, ..memory };
        let embedding = match self.embed_one(&memory.content).await {
            Ok(embedding) => embedding,
            Err(error) => {
                tracing::warn!(%error, "can't embed a memory; saving it without a vector");
                None
            }
        };
        let now = self.now();
        self.blocking(move |store| {
            let candidates = store.candidates(&memory.context, &memory.content, 5)?;
            if let Some(existing) =
                candidates.iter().find(|existing| is_near_duplicate(&existing.content, &memory.content))
            {
                let mut tags = existing.tags.clone();
                for tag in &memory.tags {
                    if !tags.contains(tag) {
                        tags.push(tag.clone());
                    }
                }
                let update = MemoryUpdate {
                    content: memory.content.clone(),
                    importance: existing.importance.max(memory.importance),
                    tags,
                    expires_at: memory.expires_at,
                    links: memory.links.clone(),
                };
                store.update(&memory.context, existing.id, &update, embedding.as_deref(), now)?;
                return Ok(SaveOutcome::Updated(existing.id));
            }
            store.insert(&memory, embedding.as_deref(), now).map(SaveOutcome::Created)
        })
        .await
    }

    /// Saves many memories at once (imports, benchmarks): one embedding pass and one
    /// transaction. Exact rewordings (same words after [`normalize`]) of a stored memory or
    /// of an earlier one in the batch are merged; the looser near-duplicate rule of
    /// [`Memories::save`] is not applied, so use `save` for memories one at a time.
    pub async fn save_many(&self, memories: Vec<NewMemory>) -> Result<Vec<SaveOutcome>, MemoryError> {
        let mut batch = Vec::with_capacity(memories.len());
        for memory in memories {
            let content = memory.content.trim().to_owned();
            if content.is_empty() {
                return Err(MemoryError::Invalid("a memory in the batch has empty content".into()));
            }
            if !(0.0..=1.0).contains(&memory.importance) || memory.importance.is_nan() {
                return Err(MemoryError::Invalid(format!("importance {} is outside 0..1", memory.importance)));
            }
            batch.push(NewMemory { content, ..memory });
        }
        let embeddings: Vec<Option<Vec<f32>>> = match &self.embedder {
            Some(embedder) => {
                let texts: Vec<String> = batch.iter().map(|memory| memory.content.clone()).collect();
                match embedder.embed_boxed(&texts).await {
                    Ok(vectors) if vectors.len() == texts.len() => vectors.into_iter().map(Some).collect(),
                    Ok(_) | Err(_) => {
                        tracing::warn!("can't embed the batch; saving it without vectors");
                        vec![None; batch.len()]
                    }
                }
            }
            None => vec![None; batch.len()],
        };
        let now = self.now();
        self.blocking(move |store| {
            let mut outcomes = vec![SaveOutcome::Created(0); batch.len()];
            let mut first_of: HashMap<(String, String), usize> = HashMap::new();
            let mut repeats: Vec<(usize, usize)> = Vec::new();
            let mut fresh: Vec<(NewMemory, Option<Vec<f32>>)> = Vec::new();
            let mut fresh_positions = Vec::new();
            for (position, (memory, embedding)) in batch.into_iter().zip(embeddings).enumerate() {
                let normalized = normalize(&memory.content);
                if let Some(existing) = store.find_same(&memory.context, &normalized)? {
                    let update = MemoryUpdate {
                        content: memory.content.clone(),
                        importance: existing.importance.max(memory.importance),
                        tags: existing.tags.clone(),
                        expires_at: memory.expires_at,
                        links: memory.links.clone(),
                    };
                    store.update(&memory.context, existing.id, &update, embedding.as_deref(), now)?;
                    outcomes[position] = SaveOutcome::Updated(existing.id);
                    continue;
                }
                match first_of.get(&(memory.context.clone(), normalized.clone())) {
                    Some(first) => repeats.push((position, *first)),
                    None => {
                        first_of.insert((memory.context.clone(), normalized), position);
                        fresh_positions.push(position);
                        fresh.push((memory, embedding));
                    }
                }
            }
            let ids = store.insert_many(&fresh, now)?;
            for (position, id) in fresh_positions.into_iter().zip(ids) {
                outcomes[position] = SaveOutcome::Created(id);
            }
            for (position, first) in repeats {
                outcomes[position] = SaveOutcome::Updated(outcomes[first].id());
            }
            Ok(outcomes)
        })
        .await
    }

    /// Hybrid recall: full-text and vector candidates fused by reciprocal rank fusion,
    /// one hop of links, then importance and recency. Returned memories are touched.
    pub async fn recall(
        &self,
        context: &str,
        query: &str,
        limit: usize,
        types: &[MemoryType],
    ) -> Result<Recall, MemoryError> {
        let limit = limit.clamp(1, 100);
        let (embedding, mode, warning) = match self.embed_one(query).await {
            Ok(Some(embedding)) => (Some(embedding), RecallMode::Hybrid, None),
            Ok(None) => (None, RecallMode::FullTextOnly, None),
            Err(error) => (None, RecallMode::FullTextOnly, Some(format!("vector search unavailable: {error}"))),
        };
        let now = self.now();
        let context = context.to_owned();
        let query = query.to_owned();
        let types = types.to_vec();
        let hits = self
            .blocking(move |store| {
                let text = store.search_text(&context, &query, POOL)?;
                let vector = match &embedding {
                    Some(embedding) => store.search_vector(&context, embedding, POOL)?,
                    None => Vec::new(),
                };
                let mut scored = fuse(&text, &vector);
                let seeds: Vec<i64> = scored.iter().take(limit * 2).map(|(id, _)| *id).collect();
                let seed_scores: HashMap<i64, f64> = scored.iter().map(|(id, (score, _))| (*id, *score)).collect();
                for (from, _, to) in store.links(&context, &seeds)? {
                    let (seed, neighbour) = if seed_scores.contains_key(&from) { (from, to) } else { (to, from) };
                    let Some(seed_score) = seed_scores.get(&seed) else { continue };
                    let entry = scored.entry(neighbour).or_insert((0.0, Found::Link));
                    if entry.1 == Found::Link {
                        entry.0 = entry.0.max(seed_score * 0.5);
                    }
                }
                let ids: Vec<i64> = scored.keys().copied().collect();
                let memories = store.get_many(&context, &ids, now)?;
                let best = scored.values().map(|(score, _)| *score).fold(f64::MIN_POSITIVE, f64::max);
                let mut hits: Vec<RecallHit> = memories
                    .into_iter()
                    .filter(|memory| types.is_empty() || types.contains(&memory.kind))
                    .filter_map(|memory| {
                        let (score, found) = scored.get(&memory.id).copied()?;
                        let last_seen = memory.accessed_at.unwrap_or(0).max(memory.updated_at);
                        let age_days = ((now - last_seen).max(0) as f64) / 86_400.0;
                        let recency = 0.5_f64.powf(age_days / 30.0);
                        let weight = 0.5 + 0.3 * f64::from(memory.importance) + 0.2 * recency;
                        Some(RecallHit { memory, score: score / best * weight, found })
                    })
                    .collect();
                hits.sort_by(|left, right| {
                    right.score.total_cmp(&left.score).then(right.memory.id.cmp(&left.memory.id))
                });
                hits.truncate(limit);
                let returned: Vec<i64> = hits.iter().map(|hit| hit.memory.id).collect();
                store.touch(&context, &returned, now)?;
                Ok(hits)
            })
            .await?;
        Ok(Recall { hits, mode, warning })
    }

    /// Deletes a memory of this context.
    pub async fn delete(&self, context: &str, id: i64) -> Result<(), MemoryError> {
        let context = context.to_owned();
        match self.blocking(move |store| store.delete(&context, id)).await? {
            true => Ok(()),
            false => Err(MemoryError::NotFound { id }),
        }
    }

    /// Lists memories of a context.
    pub async fn list(&self, context: &str, filter: ListFilter) -> Result<Vec<Memory>, MemoryError> {
        let context = context.to_owned();
        let now = self.now();
        self.blocking(move |store| store.list(&context, &filter, now)).await
    }

    /// Deletes expired memories (the TTL system job).
    pub async fn expire(&self) -> Result<usize, MemoryError> {
        let now = self.now();
        self.blocking(move |store| store.expire(now)).await
    }

    /// Changes when the context's memories change.
    pub async fn fingerprint(&self, context: &str) -> Result<String, MemoryError> {
        let context = context.to_owned();
        self.blocking(move |store| store.fingerprint(&context)).await
    }

    /// Counts for status.
    pub async fn stats(&self, context: &str) -> Result<MemoryStats, MemoryError> {
        let context = context.to_owned();
        self.blocking(move |store| store.stats(&context)).await
    }

    /// Embeds up to `limit` memories that have no vector yet; returns how many.
    pub async fn backfill_vectors(&self, limit: usize) -> Result<usize, MemoryError> {
        let Some(embedder) = &self.embedder else { return Ok(0) };
        let missing = self.blocking(move |store| store.missing_vectors(limit)).await?;
        if missing.is_empty() {
            return Ok(0);
        }
        let texts: Vec<String> = missing.iter().map(|(_, content)| content.clone()).collect();
        let vectors = embedder
            .embed_boxed(&texts)
            .await
            .map_err(|error| MemoryError::Store { action: "embed", reason: error.to_string() })?;
        let pairs: Vec<(i64, Vec<f32>)> = missing.into_iter().map(|(id, _)| id).zip(vectors).collect();
        let count = pairs.len();
        self.blocking(move |store| {
            for (id, vector) in &pairs {
                store.set_vector(*id, vector)?;
            }
            Ok(())
        })
        .await?;
        Ok(count)
    }
}

#[cfg(test)]
mod tests;
