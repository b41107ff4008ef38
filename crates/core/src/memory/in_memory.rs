//! A memory store held in memory: for tests and benchmarks, never for real data.

use std::collections::HashMap;
use std::sync::Mutex;

use squidbot_types::memory::{LinkKind, Memory, NewMemory};

use super::{ListFilter, MemoryError, MemoryStats, MemoryStore, MemoryUpdate, Ranked, normalize};
use crate::sync::lock;

#[derive(Default)]
struct Rows {
    next_id: i64,
    memories: HashMap<i64, Memory>,
    vectors: HashMap<i64, Vec<f32>>,
}

/// A `MemoryStore` in a `HashMap`, for tests and benchmarks: full-text search is
/// substring matching of query words, vector search a full cosine scan.
#[derive(Default)]
pub struct InMemoryMemoryStore {
    rows: Mutex<Rows>,
}

impl InMemoryMemoryStore {
    /// Every stored memory, any context, by id.
    pub fn all(&self) -> Vec<Memory> {
        let rows = lock(&self.rows);
        let mut all: Vec<Memory> = rows.memories.values().cloned().collect();
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

impl InMemoryMemoryStore {
    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Rows>, MemoryError> {
        self.rows.lock().map_err(|_| MemoryError::Store { action: "lock", reason: "the store lock is poisoned".into() })
    }
}

impl MemoryStore for InMemoryMemoryStore {
    fn insert(&self, memory: &NewMemory, embedding: Option<&[f32]>, now: i64) -> Result<i64, MemoryError> {
        let mut rows = self.lock()?;
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
        let mut rows = self.lock()?;
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
        let rows = self.lock()?;
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
        let rows = self.lock()?;
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
        let rows = self.lock()?;
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
        let rows = self.lock()?;
        Ok(rows
            .memories
            .values()
            .filter(|memory| memory.context == context)
            .flat_map(|memory| memory.links.iter().map(move |link| (memory.id, link.kind, link.target)))
            .filter(|(from, _, to)| ids.contains(from) || ids.contains(to))
            .collect())
    }

    fn get_many(&self, context: &str, ids: &[i64], now: i64) -> Result<Vec<Memory>, MemoryError> {
        let rows = self.lock()?;
        Ok(ids
            .iter()
            .filter_map(|id| rows.memories.get(id))
            .filter(|memory| memory.context == context && memory.expires_at.is_none_or(|expiry| expiry > now))
            .cloned()
            .collect())
    }

    fn touch(&self, context: &str, ids: &[i64], now: i64) -> Result<(), MemoryError> {
        let mut rows = self.lock()?;
        for id in ids {
            if let Some(memory) = rows.memories.get_mut(id).filter(|memory| memory.context == context) {
                memory.accessed_at = Some(now);
                memory.access_count += 1;
            }
        }
        Ok(())
    }

    fn delete(&self, context: &str, id: i64) -> Result<bool, MemoryError> {
        let mut rows = self.lock()?;
        if rows.memories.get(&id).is_none_or(|memory| memory.context != context) {
            return Ok(false);
        }
        rows.memories.remove(&id);
        rows.vectors.remove(&id);
        Ok(true)
    }

    fn list(&self, context: &str, filter: &ListFilter, now: i64) -> Result<Vec<Memory>, MemoryError> {
        let rows = self.lock()?;
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
        let mut rows = self.lock()?;
        let before = rows.memories.len();
        rows.memories.retain(|_, memory| memory.expires_at.is_none_or(|expiry| expiry > now));
        Ok(before - rows.memories.len())
    }

    fn fingerprint(&self, context: &str) -> Result<String, MemoryError> {
        let rows = self.lock()?;
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
        let rows = self.lock()?;
        let ids: Vec<i64> =
            rows.memories.values().filter(|memory| memory.context == context).map(|memory| memory.id).collect();
        let with_vectors = ids.iter().filter(|id| rows.vectors.contains_key(id)).count();
        Ok(MemoryStats { memories: ids.len() as u64, with_vectors: with_vectors as u64 })
    }

    fn missing_vectors(&self, limit: usize) -> Result<Vec<(i64, String)>, MemoryError> {
        let rows = self.lock()?;
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
        self.lock()?.vectors.insert(id, embedding.to_vec());
        Ok(())
    }
}
