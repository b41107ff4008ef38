//! Memory benchmark: saves and recalls through the real `Memories` service over
#![allow(unsafe_code)]
//! `SqliteMemoryStore` on a temporary file, and loads a large JSONL session.
//!
//! `cargo bench -p squidbot-store --bench memory`; `SQUIDBOT_BENCH_MEMORIES` and
//! `SQUIDBOT_BENCH_QUERIES` shrink the run.

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use squidbot_core::clock::SystemClock;
use squidbot_core::memory::{Embedder, Memories, MemoryStore, SaveOutcome};
use squidbot_core::provider::ProviderError;
use squidbot_core::store::SessionStore;
use squidbot_store::{Database, JsonlSessionStore, SqliteMemoryStore};
use squidbot_types::memory::{MemoryType, NewMemory};
use squidbot_types::session::{EntryBody, HeaderTag, MessageRole, SESSION_FORMAT_VERSION, SessionEntry, SessionHeader};

type Outcome<T> = Result<T, Box<dyn Error>>;

/// Dimension of the benchmark embedder, that of small sentence-embedding models.
const DIMENSIONS: usize = 384;

const CONTEXT: &str = "telegram:4242";

/// A small deterministic random generator (xorshift), so every run sees the same data.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }
}

fn list(text: &'static str) -> Vec<&'static str> {
    text.split_whitespace().collect()
}

/// Word lists the memory and query templates draw from.
struct Words {
    names: Vec<&'static str>,
    relations: Vec<&'static str>,
    cities: Vec<&'static str>,
    jobs: Vec<&'static str>,
    foods: Vec<&'static str>,
    things: Vec<&'static str>,
    adjectives: Vec<&'static str>,
    activities: Vec<&'static str>,
    topics: Vec<&'static str>,
    tools: Vec<&'static str>,
    projects: Vec<&'static str>,
    days: Vec<&'static str>,
    verbs: Vec<&'static str>,
}

impl Words {
    fn new() -> Self {
        Self {
            names: list(
                "Ana Bruno Carla Diego Elena Farid Greta Hugo Ines Jonas Kaito Lena Marco Nadia Omar Paula Quentin Rosa \
                 Samir Tara Ugo Vera Walid Xenia Yusuf Zoe Amara Bjorn Chiara Dmitri Esme Felix Giulia Hana Ivan Jana \
                 Karim Lucia Mateo Nora Oskar Priya Rafael Sofia Tomas Uma Viktor Wanda Yara Zeno Aiko Boris Clara",
            ),
            relations: list("sister brother mother father cousin aunt uncle friend colleague neighbour manager partner"),
            cities: list(
                "Porto Lisbon Berlin Munich Paris Lyon Madrid Valencia Rome Milan Vienna Prague Warsaw Oslo Bergen \
                 Stockholm Helsinki Dublin Cork Edinburgh Glasgow Amsterdam Utrecht Brussels Ghent Zurich Geneva \
                 Barcelona Seville Athens Istanbul Cairo Nairobi Lagos Tokyo Osaka Seoul Taipei Hanoi Bangkok Sydney \
                 Melbourne Auckland Toronto Montreal Vancouver Boston Chicago Denver Austin Seattle Lima Bogota",
            ),
            jobs: list(
                "nurse teacher engineer architect pharmacist lawyer chef baker pilot journalist translator designer \
                 accountant electrician plumber carpenter dentist surgeon librarian photographer musician researcher \
                 veterinarian firefighter gardener economist astronomer geologist",
            ),
            foods: list(
                "peanuts shellfish gluten lactose eggs soy sesame strawberries kiwi mustard celery walnuts almonds \
                 cashews shrimp salmon tuna mushrooms garlic onions tomatoes peppers coriander cinnamon chocolate",
            ),
            things: list(
                "laptop bicycle camera piano guitar garden balcony kitchen car scooter tent kayak telescope printer \
                 keyboard monitor headphones backpack umbrella passport wallet notebook calendar thermostat router",
            ),
            adjectives: list(
                "quiet spicy minimal colourful early late short detailed warm cold bright dark formal casual fast \
                 slow cheap expensive reliable simple modern vintage organic local",
            ),
            activities: list(
                "cooking running reading hiking swimming climbing painting writing travelling cycling gardening \
                 sailing skiing dancing knitting fishing camping meditating studying programming",
            ),
            topics: list(
                "budget roadmap migration hiring onboarding security audit release pricing marketing invoices taxes \
                 insurance mortgage vacation wedding renovation conference workshop newsletter backups monitoring",
            ),
            tools: list(
                "Rust Python Postgres SQLite Redis Kafka Docker Kubernetes Terraform Ansible Grafana Prometheus Nginx \
                 React Svelte Django Flask Axum Tokio Git Jenkins Linux FreeBSD Neovim Emacs Figma Notion Obsidian",
            ),
            projects: list(
                "squidbot atlas beacon cobalt delta ember falcon granite harbor iris juniper kestrel lumen meridian \
                 nimbus orchid pioneer quartz raven sierra tundra umbra vortex willow zephyr",
            ),
            days: list("Monday Tuesday Wednesday Thursday Friday Saturday Sunday"),
            verbs: list("renew call email book repair clean update cancel pay order return backup water visit"),
        }
    }

    /// One memory: a template filled with several independent draws, so two memories
    /// rarely share most of their words.
    fn memory(&self, random: &mut Random) -> (MemoryType, String) {
        let number = 1 + random.below(9999);
        match random.below(8) {
            0 => (
                MemoryType::Fact,
                format!(
                    "{}'s {} {} lives in {} at number {number} and works as a {} since {}",
                    random.pick(&self.names),
                    random.pick(&self.relations),
                    random.pick(&self.names),
                    random.pick(&self.cities),
                    random.pick(&self.jobs),
                    1950 + random.below(75)
                ),
            ),
            1 => (
                MemoryType::Preference,
                format!(
                    "The user prefers {} {} when {} in {}, ideally around {} minutes",
                    random.pick(&self.adjectives),
                    random.pick(&self.things),
                    random.pick(&self.activities),
                    random.pick(&self.cities),
                    number
                ),
            ),
            2 => (
                MemoryType::Decision,
                format!(
                    "Decided to use {} instead of {} for the {} {} because it is more {}, see ticket {number}",
                    random.pick(&self.tools),
                    random.pick(&self.tools),
                    random.pick(&self.projects),
                    random.pick(&self.topics),
                    random.pick(&self.adjectives)
                ),
            ),
            3 => (
                MemoryType::Event,
                format!(
                    "Meeting with {} about the {} of {} on {} at {}:{:02} in {}, room {number}",
                    random.pick(&self.names),
                    random.pick(&self.topics),
                    random.pick(&self.projects),
                    random.pick(&self.days),
                    7 + random.below(12),
                    random.below(4) * 15,
                    random.pick(&self.cities)
                ),
            ),
            4 => (
                MemoryType::Fact,
                format!(
                    "{} is allergic to {} and avoids {} after {}, noted on visit {number}",
                    random.pick(&self.names),
                    random.pick(&self.foods),
                    random.pick(&self.foods),
                    random.pick(&self.activities)
                ),
            ),
            5 => (
                MemoryType::Todo,
                format!(
                    "Remember to {} the {} and the {} before {}, reference {number}",
                    random.pick(&self.verbs),
                    random.pick(&self.things),
                    random.pick(&self.things),
                    random.pick(&self.days)
                ),
            ),
            6 => (
                MemoryType::Observation,
                format!(
                    "{} seemed {} about {} lately and mentioned the {} {} {number} times",
                    random.pick(&self.names),
                    random.pick(&self.adjectives),
                    random.pick(&self.activities),
                    random.pick(&self.adjectives),
                    random.pick(&self.things)
                ),
            ),
            _ => (
                MemoryType::Identity,
                format!(
                    "{} is a {} from {} who loves {} and {} {}, member {number}",
                    random.pick(&self.names),
                    random.pick(&self.jobs),
                    random.pick(&self.cities),
                    random.pick(&self.activities),
                    random.pick(&self.adjectives),
                    random.pick(&self.foods)
                ),
            ),
        }
    }

    /// A recall query as a user or the agent would phrase it.
    fn query(&self, random: &mut Random) -> String {
        match random.below(6) {
            0 => format!("where does {}'s {} live", random.pick(&self.names), random.pick(&self.relations)),
            1 => format!("what is {} allergic to?", random.pick(&self.names)),
            2 => format!("why did we pick {} for {}", random.pick(&self.tools), random.pick(&self.projects)),
            3 => format!("when is the meeting about the {} with {}", random.pick(&self.topics), random.pick(&self.names)),
            4 => format!("what does the user like when {}", random.pick(&self.activities)),
            _ => format!("{} {} {}", random.pick(&self.things), random.pick(&self.verbs), random.pick(&self.days)),
        }
    }
}

/// A deterministic stand-in for an embedding model: every word adds a fixed
/// pseudo-random direction, so texts sharing words get close vectors.
struct WordEmbedder;

impl WordEmbedder {
    fn vector(text: &str) -> Vec<f32> {
        let mut vector = vec![0.0_f32; DIMENSIONS];
        for word in text.split(|character: char| !character.is_alphanumeric()).filter(|word| !word.is_empty()) {
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for byte in word.to_lowercase().bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
            let mut random = Random(hash | 1);
            for value in &mut vector {
                // Sum of two uniforms: centred, roughly bell-shaped.
                let draw = (random.next() >> 40) as f32 / (1u64 << 24) as f32 + (random.next() >> 40) as f32 / (1u64 << 24) as f32;
                *value += draw - 1.0;
            }
        }
        let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
        vector.iter_mut().for_each(|value| *value /= norm);
        vector
    }
}

impl Embedder for WordEmbedder {
    fn model(&self) -> &str {
        "bench/word-hash-384"
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> impl Future<Output = Result<Vec<Vec<f32>>, ProviderError>> + Send + 'a {
        std::future::ready(Ok(texts.iter().map(|text| Self::vector(text)).collect()))
    }
}

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

async fn insert(memories: &Memories, words: &Words, count: usize) -> Outcome<()> {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let mut merged = 0;
    let started = Instant::now();
    for _ in 0..count {
        if let SaveOutcome::Updated(_) = memories.save(new_memory(words, &mut random)).await? {
            merged += 1;
        }
    }
    let elapsed = started.elapsed();
    println!(
        "insert through Memories::save (hybrid, duplicate check): {:.0} memories/s ({count} saves in {:.1} s, {merged} merged as near-duplicates)",
        count as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    Ok(())
}

fn raw_insert(store: &SqliteMemoryStore, words: &Words, count: usize) -> Outcome<()> {
    let mut random = Random(0x2545_f491_4f6c_dd1d);
    let started = Instant::now();
    for _ in 0..count {
        let mut memory = new_memory(words, &mut random);
        memory.context = "bench:raw".to_owned();
        let vector = WordEmbedder::vector(&memory.content);
        store.insert(&memory, Some(&vector), 1_700_000_000)?;
    }
    let elapsed = started.elapsed();
    println!(
        "insert through SqliteMemoryStore::insert (with vector, no duplicate check): {:.0} memories/s ({count} inserts)",
        count as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}

async fn recall(memories: &Memories, words: &Words, queries: usize, label: &str) -> Outcome<()> {
    let mut random = Random(0x1234_5678_9abc_def1);
    let mut timings = Vec::with_capacity(queries);
    let mut hits = 0;
    for _ in 0..queries {
        let query = words.query(&mut random);
        let started = Instant::now();
        let recall = memories.recall(CONTEXT, &query, 10, &[]).await?;
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
                body: EntryBody::Message { role, content, model: None, usage: None, interrupted: false },
            }
        })
        .collect();
    for chunk in entries.chunks(1000) {
        store.append(key, chunk).await?;
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
        if std::env::var("PROBE_RAW").is_ok() {
            let mut random = Random(0x9e37_79b9_7f4a_7c15);
            let prepared: Vec<(NewMemory, Vec<f32>)> = (0..count).map(|_| {
                let memory = new_memory(&words, &mut random);
                let vector = WordEmbedder::vector(&memory.content);
                (memory, vector)
            }).collect();
            let started = Instant::now();
            for (memory, vector) in &prepared {
                store.insert(memory, Some(vector), 1_700_000_000)?;
            }
            println!("PROBE raw insert {count}: {:.1} s = {:.0}/s", started.elapsed().as_secs_f64(), count as f64 / started.elapsed().as_secs_f64());
            if std::env::var("PROBE_EXIT").is_ok() { return Ok(()); }
        } else {
            insert(&hybrid, &words, count).await?;
        }
        raw_insert(&store, &words, count / 10)?;
        {
            let mut random = Random(77);
            let started = Instant::now();
            for _ in 0..1000 {
                let memory = new_memory(&words, &mut random);
                store.candidates(CONTEXT, &memory.content, 5)?;
            }
            println!("PROBE candidates: {:.3} ms each", milliseconds(started.elapsed()) / 1000.0);
            let started = Instant::now();
            for _ in 0..1000 {
                let memory = new_memory(&words, &mut random);
                store.search_text(CONTEXT, &memory.content, 50)?;
            }
            println!("PROBE search_text: {:.3} ms each", milliseconds(started.elapsed()) / 1000.0);
            let started = Instant::now();
            for (variant, oversample) in [("exact", "1"), ("coarse_only", "1"), ("coarse_rerank", "1"), ("coarse_rerank", "2")] {
                // SAFETY-free: single-threaded at this point.
                unsafe { std::env::set_var("SQUIDBOT_VARIANT", variant) };
                unsafe { std::env::set_var("SQUIDBOT_OVERSAMPLE", oversample) };
                let started = Instant::now();
                for _ in 0..50 {
                    let memory = new_memory(&words, &mut random);
                    store.search_vector(CONTEXT, &WordEmbedder::vector(&memory.content), 50)?;
                }
                println!("PROBE search_vector {variant} x{oversample}: {:.3} ms each", milliseconds(started.elapsed()) / 50.0);
            }
            let started = Instant::now();
            for _ in 0..200 {
                let memory = new_memory(&words, &mut random);
                let ids: Vec<i64> = (0..150).map(|_| 1 + random.below(count) as i64).collect();
                store.get_many(CONTEXT, &ids, 0)?;
            }
            println!("PROBE get_many 150: {:.3} ms each", milliseconds(started.elapsed()) / 200.0);
        }
        let stats = store.stats(CONTEXT)?;
        let size = std::fs::metadata(database.path())?.len();
        println!(
            "database: {} memories, {} with vectors, {:.0} MiB",
            stats.memories,
            stats.with_vectors,
            size as f64 / (1024.0 * 1024.0)
        );
        recall(&full_text, &words, queries, "full-text only").await?;
        recall(&hybrid, &words, queries, "hybrid").await?;
        session_load(directory.path()).await
    })
}
