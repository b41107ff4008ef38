//! Memory benchmark: saves and recalls through the real `Memories` service over
//! `SqliteMemoryStore` on a temporary file, and loads a large JSONL session.
//!
//! `cargo bench -p squidbot-store --bench memory`; `SQUIDBOT_BENCH_MEMORIES` and
//! `SQUIDBOT_BENCH_QUERIES` shrink the run.

#[path = "memory/data.rs"]
mod data;

use std::collections::HashMap;
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use data::{Random, WordEmbedder, Words};
use squidbot_core::clock::SystemClock;
use squidbot_core::memory::{Memories, MemoryStore, SaveOutcome};
use squidbot_core::store::{Durability, SessionStore};
use squidbot_store::{Database, JsonlSessionStore, SqliteMemoryStore};
use squidbot_types::memory::NewMemory;
use squidbot_types::session::{EntryBody, HeaderTag, MessageRole, SESSION_FORMAT_VERSION, SessionEntry, SessionHeader};

type Outcome<T> = Result<T, Box<dyn Error>>;

const CONTEXT: &str = "telegram:4242";

/// Context of the memories inserted straight into the store.
const RAW_CONTEXT: &str = "bench:raw";

fn count_from_environment(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

fn milliseconds(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn new_memory(words: &Words, random: &mut Random) -> NewMemory {
    let (kind, content) = words.memory(random);
    let tags = vec![words.projects[random.below(words.projects.len())].to_owned()];
    NewMemory {
        context: CONTEXT.to_owned(),
        kind,
        content,
        importance: 0.3 + (random.below(7) as f32) / 10.0,
        tags,
        source: "bench".to_owned(),
        expires_at: None,
        links: Vec::new(),
    }
}

/// Memories per `save_many` call in the bulk measurement.
const BULK_BATCH: usize = 1_000;

/// Saves `count` memories through the service's bulk path; returns the content of each
/// stored id.
async fn insert(memories: &Memories, words: &Words, count: usize) -> Outcome<HashMap<i64, String>> {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let all: Vec<NewMemory> = (0..count).map(|_| new_memory(words, &mut random)).collect();
    let mut saved = HashMap::with_capacity(count);
    let mut merged = 0;
    let started = Instant::now();
    for batch in all.chunks(BULK_BATCH) {
        let outcomes = memories.save_many(batch.to_vec()).await?;
        for (memory, outcome) in batch.iter().zip(outcomes) {
            if let SaveOutcome::Updated(_) = outcome {
                merged += 1;
            }
            saved.insert(outcome.id(), memory.content.clone());
        }
    }
    let elapsed = started.elapsed();
    println!(
        "insert through Memories::save_many (hybrid: embed + exact-duplicate merge + one transaction per \
         {BULK_BATCH}): {:.0} memories/s ({count} memories in {:.1} s, {merged} merged)",
        count as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    Ok(saved)
}

/// Saves `count` more memories one at a time (near-duplicate check against the store).
async fn single_saves(memories: &Memories, words: &Words, count: usize) -> Outcome<()> {
    let mut random = Random(0x51_6e_67_6c_65);
    let batch: Vec<NewMemory> = (0..count).map(|_| new_memory(words, &mut random)).collect();
    let started = Instant::now();
    for memory in batch {
        memories.save(memory).await?;
    }
    let elapsed = started.elapsed();
    println!(
        "insert through Memories::save, one at a time (hybrid: embed + near-duplicate search + insert): \
         {:.0} memories/s ({count} saves into the full store)",
        count as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}

/// Inserts `count` memories straight into the store (vectors computed beforehand).
fn raw_insert(store: &SqliteMemoryStore, words: &Words, count: usize) -> Outcome<()> {
    let mut random = Random(0x2545_f491_4f6c_dd1d);
    let batch: Vec<(NewMemory, Vec<f32>)> = (0..count)
        .map(|_| {
            let memory = NewMemory { context: RAW_CONTEXT.to_owned(), ..new_memory(words, &mut random) };
            let vector = WordEmbedder::vector(&memory.content);
            (memory, vector)
        })
        .collect();
    let started = Instant::now();
    for (memory, vector) in &batch {
        store.insert(memory, Some(vector), 1_700_000_000)?;
    }
    let elapsed = started.elapsed();
    println!(
        "insert through SqliteMemoryStore::insert (with vector, no duplicate check): {:.0} memories/s ({count} inserts)",
        count as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}

/// Cosine distance, for the exact reference search.
fn cosine_distance(left: &[f32], right: &[f32]) -> f32 {
    let mut dot = [0.0_f32; 8];
    for (left, right) in left.chunks_exact(8).zip(right.chunks_exact(8)) {
        for lane in 0..8 {
            dot[lane] += left[lane] * right[lane];
        }
    }
    // Both vectors are normalized.
    1.0 - dot.iter().sum::<f32>()
}

/// How many of the exact 10 nearest neighbours the store's vector search returns.
fn vector_quality(store: &SqliteMemoryStore, words: &Words, saved: &HashMap<i64, String>) -> Outcome<()> {
    let vectors: Vec<(i64, Vec<f32>)> =
        saved.iter().map(|(id, content)| (*id, WordEmbedder::vector(content))).collect();
    let mut random = Random(0x5eed);
    let queries = 50;
    let (mut in_pool, mut near) = (0, 0);
    for _ in 0..queries {
        let query = WordEmbedder::vector(&words.query(&mut random));
        let mut exact: Vec<(f32, i64)> =
            vectors.iter().map(|(id, vector)| (cosine_distance(&query, vector), *id)).collect();
        exact.select_nth_unstable_by(9, |left, right| left.0.total_cmp(&right.0));
        let tenth = exact[..10].iter().map(|(distance, _)| *distance).fold(f32::MIN, f32::max);
        let truth: Vec<i64> = exact[..10].iter().map(|(_, id)| *id).collect();
        let found = store.search_vector(CONTEXT, &query, 50)?;
        in_pool += truth.iter().filter(|id| found.iter().any(|hit| hit.id == **id)).count();
        // Hundreds of memories sit within a hair of the 10th distance: count the
        // returned top 10 that are nearly as near.
        near += found.iter().take(10).filter(|hit| hit.score as f32 <= tenth + 0.02).count();
    }
    let total = (queries * 10) as f64;
    println!(
        "vector search quality vs exact search ({} vectors in the context): {:.1} % of the true 10 nearest \
         among the 50 returned; {:.1} % of the returned top 10 within 0.02 cosine distance of the true 10th",
        vectors.len(),
        100.0 * in_pool as f64 / total,
        100.0 * near as f64 / total
    );
    Ok(())
}

async fn recall(memories: &Memories, context: &str, words: &Words, queries: usize, label: &str) -> Outcome<()> {
    let mut random = Random(0x1234_5678_9abc_def1);
    let mut timings = Vec::with_capacity(queries);
    let mut hits = 0;
    for _ in 0..queries {
        let query = words.query(&mut random);
        let started = Instant::now();
        let recall = memories.recall(context, &query, 10, &[]).await?;
        timings.push(started.elapsed());
        hits += recall.hits.len();
    }
    timings.sort();
    println!("recall p50 ({label}): {:.2} ms", milliseconds(percentile(&timings, 0.50)));
    println!("recall p99 ({label}): {:.2} ms", milliseconds(percentile(&timings, 0.99)));
    println!("recall hits per query ({label}): {:.1}", hits as f64 / queries.max(1) as f64);
    Ok(())
}

async fn session_load(directory: &std::path::Path) -> Outcome<()> {
    let store = JsonlSessionStore::new(directory.join("sessions"));
    let key = "telegram:4242";
    let header = SessionHeader {
        kind: HeaderTag::Header,
        version: SESSION_FORMAT_VERSION,
        id: "bench-session".to_owned(),
        key: key.to_owned(),
        context: CONTEXT.to_owned(),
        created: "2026-01-01T00:00:00Z".to_owned(),
    };
    store.create(&header).await?;
    let words = Words::new();
    let mut random = Random(0x0dd_ba11);
    let entries: Vec<SessionEntry> = (0..10_000)
        .map(|index| {
            let role = if index % 2 == 0 { MessageRole::User } else { MessageRole::Assistant };
            let content = (0..4).map(|_| words.memory(&mut random).1).collect::<Vec<_>>().join(". ");
            SessionEntry {
                id: format!("e{index}"),
                parent: (index > 0).then(|| format!("e{}", index - 1)),
                timestamp: format!("2026-01-01T{:02}:{:02}:{:02}Z", index / 3600 % 24, index / 60 % 60, index % 60),
                body: EntryBody::Message {
                    role,
                    content,
                    images: Vec::new(),
                    model: None,
                    usage: None,
                    interrupted: false,
                },
            }
        })
        .collect();
    for chunk in entries.chunks(1000) {
        store.append(key, chunk, Durability::Synced).await?;
    }
    let mut timings = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        let loaded = store.load(key).await?.ok_or("the session vanished")?;
        timings.push(started.elapsed());
        if loaded.entries.len() != entries.len() {
            return Err(format!("loaded {} entries of {}", loaded.entries.len(), entries.len()).into());
        }
    }
    timings.sort();
    let bytes = std::fs::metadata(directory.join("sessions/telegram:4242.jsonl"))?.len();
    println!(
        "session load (JsonlSessionStore::load, 10000 entries, {:.1} MiB): {:.2} ms (median of 7)",
        bytes as f64 / (1024.0 * 1024.0),
        milliseconds(percentile(&timings, 0.5))
    );
    Ok(())
}

fn main() -> Outcome<()> {
    let count = count_from_environment("SQUIDBOT_BENCH_MEMORIES", 100_000);
    let queries = count_from_environment("SQUIDBOT_BENCH_QUERIES", 500);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let directory = tempfile::tempdir()?;
    let database = Database::open(&directory.path().join("squidbot.db"))?;
    let store = Arc::new(SqliteMemoryStore::new(database.clone()));
    let clock = Arc::new(SystemClock);
    let hybrid = Memories::new(store.clone(), Some(Arc::new(WordEmbedder)), clock.clone());
    let full_text = Memories::new(store.clone(), None, clock);
    let words = Words::new();
    runtime.block_on(async {
        let saved = insert(&hybrid, &words, count).await?;
        single_saves(&hybrid, &words, (count / 50).max(1)).await?;
        let raw_count = (count / 10).max(1);
        raw_insert(&store, &words, raw_count)?;
        let started = Instant::now();
        drop(Database::open(database.path())?);
        println!(
            "database open of the {:.0} MiB file (with PRAGMA quick_check): {:.0} ms",
            std::fs::metadata(database.path())?.len() as f64 / (1024.0 * 1024.0),
            milliseconds(started.elapsed())
        );
        let stats = store.stats(CONTEXT)?;
        let size = std::fs::metadata(database.path())?.len();
        println!(
            "database: {} memories, {} with vectors, {:.0} MiB",
            stats.memories,
            stats.with_vectors,
            size as f64 / (1024.0 * 1024.0)
        );
        let label = format!("full-text only, {} memories", stats.memories);
        recall(&full_text, CONTEXT, &words, queries, &label).await?;
        let label = format!("hybrid, {} memories", stats.memories);
        recall(&hybrid, CONTEXT, &words, queries, &label).await?;
        let label = format!("hybrid, {raw_count} memories");
        recall(&hybrid, RAW_CONTEXT, &words, queries, &label).await?;
        vector_quality(&store, &words, &saved)?;
        session_load(directory.path()).await
    })
}
