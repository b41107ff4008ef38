//! In-memory stand-ins for the memory ports: a store with substring search, documents in a
//! map, a clock the test moves, and embedders that work (the testkit's fake model) or fail.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use squidbot_core::clock::Clock;
use squidbot_core::memory::{
    Embedder, ListFilter, MemoryDocuments, MemoryError, MemoryStats, MemoryStore, MemoryUpdate, Ranked, normalize,
};
use squidbot_core::provider::ProviderError;
use squidbot_types::memory::{LinkKind, Memory, NewMemory};

/// Start of every test's clock: 2024-01-01T00:00:00Z.
pub const START: i64 = 1_704_067_200;

/// A clock the test sets, in Unix seconds.
pub struct ManualClock(pub AtomicI64);

impl ManualClock {
    pub fn new() -> Self {
        Self(AtomicI64::new(START))
    }

    pub fn advance(&self, seconds: i64) {
        self.0.fetch_add(seconds, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::SeqCst) as u64)
    }
}

#[derive(Default)]
struct Rows {
    next_id: i64,
    memories: HashMap<i64, Memory>,
    vectors: HashMap<i64, Vec<f32>>,
}

/// A `MemoryStore` in a `HashMap`: full-text search is substring matching of query words.
#[derive(Default)]
pub struct InMemoryStore {
    rows: Mutex<Rows>,
}

impl InMemoryStore {
    /// Every stored memory, any context, by id.
    pub fn all(&self) -> Vec<Memory> {
        let mut all: Vec<Memory> = self.rows.lock().unwrap().memories.values().cloned().collect();
        all.sort_by_key(|memory| memory.id);
        all
    }
}

fn words(text: &str) -> Vec<String> {
    normalize(text).split(' ').filter(|word| word.len() > 2).map(str::to_owned).collect()
}

fn not_found(id: i64) -> MemoryError {
    MemoryError::NotFound { id }
}

impl MemoryStore for InMemoryStore {
    fn insert(&self, memory: &NewMemory, embedding: Option<&[f32]>, now: i64) -> Result<i64, MemoryError> {
        let mut rows = self.rows.lock().unwrap();
        rows.next_id += 1;
        let id = rows.next_id;
        rows.memories.insert(
            id,
            Memory {
                id,
                context: memory.context.clone(),
                kind: memory.kind,
                content: memory.content.clone(),
                importance: memory.importance,
                tags: memory.tags.clone(),
                source: memory.source.clone(),
                expires_at: memory.expires_at,
                created_at: now,
                updated_at: now,
                accessed_at: None,
                access_count: 0,
                links: memory.links.clone(),
            },
        );
        if let Some(embedding) = embedding {
            rows.vectors.insert(id, embedding.to_vec());
        }
        Ok(id)
    }

    fn update(
        &self,
        context: &str,
        id: i64,
        update: &MemoryUpdate,
        embedding: Option<&[f32]>,
        now: i64,
    ) -> Result<(), MemoryError> {
        let mut rows = self.rows.lock().unwrap();
        let memory = rows.memories.get_mut(&id).filter(|memory| memory.context == context).ok_or(not_found(id))?;
        memory.content = update.content.clone();
        memory.importance = update.importance;
        memory.tags = update.tags.clone();
        memory.expires_at = update.expires_at;
        memory.links.extend(update.links.iter().copied());
        memory.updated_at = now;
        if let Some(embedding) = embedding {
            rows.vectors.insert(id, embedding.to_vec());
        }
        Ok(())
    }

    fn candidates(&self, context: &str, content: &str, limit: usize) -> Result<Vec<Memory>, MemoryError> {
        let rows = self.rows.lock().unwrap();
        let wanted = words(content);
        let mut found: Vec<Memory> = rows
            .memories
            .values()
            .filter(|memory| memory.context == context)
            .filter(|memory| {
                normalize(&memory.content) == normalize(content)
                    || words(&memory.content).iter().any(|word| wanted.contains(word))
            })
            .cloned()
            .collect();
        found.sort_by_key(|memory| memory.id);
        found.truncate(limit);
        Ok(found)
    }

    fn search_text(&self, context: &str, query: &str, limit: usize) -> Result<Vec<Ranked>, MemoryError> {
        let rows = self.rows.lock().unwrap();
        let wanted = words(query);
        let mut ranked: Vec<Ranked> = rows
            .memories
            .values()
            .filter(|memory| memory.context == context)
            .filter_map(|memory| {
                let content = memory.content.to_lowercase();
                let matches = wanted.iter().filter(|word| content.contains(word.as_str())).count();
                (matches > 0).then_some(Ranked { id: memory.id, score: -(matches as f64) })
            })
            .collect();
        ranked.sort_by(|left, right| left.score.total_cmp(&right.score).then(left.id.cmp(&right.id)));
        ranked.truncate(limit);
        Ok(ranked)
    }

    fn search_vector(&self, context: &str, embedding: &[f32], limit: usize) -> Result<Vec<Ranked>, MemoryError> {
        let rows = self.rows.lock().unwrap();
        let mut ranked: Vec<Ranked> = rows
            .vectors
            .iter()
            .filter(|(id, _)| rows.memories.get(id).is_some_and(|memory| memory.context == context))
            .map(|(id, vector)| {
                let similarity: f32 = vector.iter().zip(embedding).map(|(left, right)| left * right).sum();
                Ranked { id: *id, score: 1.0 - f64::from(similarity) }
            })
            // Unrelated memories are far: a real vector index returns them too, but last.
            .filter(|ranked| ranked.score < 0.9)
            .collect();
        ranked.sort_by(|left, right| left.score.total_cmp(&right.score));
        ranked.truncate(limit);
        Ok(ranked)
    }

    fn links(&self, context: &str, ids: &[i64]) -> Result<Vec<(i64, LinkKind, i64)>, MemoryError> {
        let rows = self.rows.lock().unwrap();
        Ok(rows
            .memories
            .values()
            .filter(|memory| memory.context == context)
            .flat_map(|memory| memory.links.iter().map(move |link| (memory.id, link.kind, link.target)))
            .filter(|(from, _, to)| ids.contains(from) || ids.contains(to))
            .collect())
    }

    fn get_many(&self, context: &str, ids: &[i64], now: i64) -> Result<Vec<Memory>, MemoryError> {
        let rows = self.rows.lock().unwrap();
        Ok(ids
            .iter()
            .filter_map(|id| rows.memories.get(id))
            .filter(|memory| memory.context == context && memory.expires_at.is_none_or(|expiry| expiry > now))
            .cloned()
            .collect())
    }

    fn touch(&self, context: &str, ids: &[i64], now: i64) -> Result<(), MemoryError> {
        let mut rows = self.rows.lock().unwrap();
        for id in ids {
            if let Some(memory) = rows.memories.get_mut(id).filter(|memory| memory.context == context) {
                memory.accessed_at = Some(now);
                memory.access_count += 1;
            }
        }
        Ok(())
    }

    fn delete(&self, context: &str, id: i64) -> Result<bool, MemoryError> {
        let mut rows = self.rows.lock().unwrap();
        if rows.memories.get(&id).is_none_or(|memory| memory.context != context) {
            return Ok(false);
        }
        rows.memories.remove(&id);
        rows.vectors.remove(&id);
        Ok(true)
    }

    fn list(&self, context: &str, filter: &ListFilter, now: i64) -> Result<Vec<Memory>, MemoryError> {
        let rows = self.rows.lock().unwrap();
        let mut listed: Vec<Memory> = rows
            .memories
            .values()
            .filter(|memory| memory.context == context && memory.expires_at.is_none_or(|expiry| expiry > now))
            .filter(|memory| filter.types.is_empty() || filter.types.contains(&memory.kind))
            .cloned()
            .collect();
        listed.sort_by(|left, right| right.updated_at.cmp(&left.updated_at).then(right.id.cmp(&left.id)));
        Ok(listed.into_iter().skip(filter.offset).take(filter.limit).collect())
    }

    fn expire(&self, now: i64) -> Result<usize, MemoryError> {
        let mut rows = self.rows.lock().unwrap();
        let before = rows.memories.len();
        rows.memories.retain(|_, memory| memory.expires_at.is_none_or(|expiry| expiry > now));
        Ok(before - rows.memories.len())
    }

    fn fingerprint(&self, context: &str) -> Result<String, MemoryError> {
        let rows = self.rows.lock().unwrap();
        let mut parts: Vec<String> = rows
            .memories
            .values()
            .filter(|memory| memory.context == context)
            .map(|memory| format!("{}:{}", memory.id, memory.updated_at))
            .collect();
        parts.sort();
        Ok(parts.join(","))
    }

    fn stats(&self, context: &str) -> Result<MemoryStats, MemoryError> {
        let rows = self.rows.lock().unwrap();
        let ids: Vec<i64> =
            rows.memories.values().filter(|memory| memory.context == context).map(|memory| memory.id).collect();
        let with_vectors = ids.iter().filter(|id| rows.vectors.contains_key(id)).count();
        Ok(MemoryStats { memories: ids.len() as u64, with_vectors: with_vectors as u64 })
    }

    fn missing_vectors(&self, limit: usize) -> Result<Vec<(i64, String)>, MemoryError> {
        let rows = self.rows.lock().unwrap();
        let mut missing: Vec<(i64, String)> = rows
            .memories
            .values()
            .filter(|memory| !rows.vectors.contains_key(&memory.id))
            .map(|memory| (memory.id, memory.content.clone()))
            .collect();
        missing.sort();
        missing.truncate(limit);
        Ok(missing)
    }

    fn set_vector(&self, id: i64, embedding: &[f32]) -> Result<(), MemoryError> {
        self.rows.lock().unwrap().vectors.insert(id, embedding.to_vec());
        Ok(())
    }
}

/// memory.md documents by context; `broken` makes every call fail like a full disk.
#[derive(Default)]
pub struct InMemoryDocuments {
    texts: Mutex<HashMap<String, String>>,
    pub broken: std::sync::atomic::AtomicBool,
}

impl InMemoryDocuments {
    pub fn text(&self, context: &str) -> Option<String> {
        self.texts.lock().unwrap().get(context).cloned()
    }

    pub fn set(&self, context: &str, text: &str) {
        self.texts.lock().unwrap().insert(context.to_owned(), text.to_owned());
    }

    fn check(&self, action: &'static str) -> Result<(), MemoryError> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(MemoryError::Store { action, reason: "disk full".to_owned() });
        }
        Ok(())
    }
}

impl MemoryDocuments for InMemoryDocuments {
    fn read(&self, context: &str) -> Result<Option<String>, MemoryError> {
        self.check("read")?;
        Ok(self.text(context))
    }

    fn write(&self, context: &str, text: &str) -> Result<(), MemoryError> {
        self.check("write")?;
        self.set(context, text);
        Ok(())
    }

    fn location(&self, context: &str) -> String {
        format!("memory/{context}/memory.md")
    }
}

/// The testkit's fake semantic model, without HTTP.
pub struct FakeEmbedder;

impl Embedder for FakeEmbedder {
    fn model(&self) -> &str {
        "fake/semantic"
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> impl Future<Output = Result<Vec<Vec<f32>>, ProviderError>> + Send + 'a {
        std::future::ready(Ok(texts.iter().map(|text| squidbot_testkit::fake_embedding(text, 64)).collect()))
    }
}

/// An embedder whose provider is down.
pub struct DownEmbedder;

impl Embedder for DownEmbedder {
    fn model(&self) -> &str {
        "down/embed"
    }

    fn embed<'a>(
        &'a self,
        _texts: &'a [String],
    ) -> impl Future<Output = Result<Vec<Vec<f32>>, ProviderError>> + Send + 'a {
        std::future::ready(Err(ProviderError::Transient {
            provider: "down".to_owned(),
            message: "HTTP 503: overloaded".to_owned(),
        }))
    }
}
