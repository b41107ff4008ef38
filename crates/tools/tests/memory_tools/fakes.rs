//! In-memory stand-ins for the memory ports: a store with substring search, documents in a
//! map, a clock the test moves, and embedders that work (the testkit's fake model) or fail.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use squidbot_core::clock::Clock;
use squidbot_core::memory::{Embedder, MemoryDocuments, MemoryError};
use squidbot_core::provider::ProviderError;

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

/// The shared in-memory store from core.
pub use squidbot_core::memory::in_memory::InMemoryMemoryStore as InMemoryStore;

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
