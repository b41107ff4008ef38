//! The per-context prompt sections: the context's memory.md and its memory bulletin, and
//! the chaining of several section sources (memory, then skills).

use std::sync::Arc;

use squidbot_core::BoxFuture;
use squidbot_core::context::{PromptSection, PromptSections};
use squidbot_core::memory::MemoryDocuments;
use squidbot_store::BulletinCache;

/// Reads memory.md and the cached bulletin off the async workers.
#[derive(Clone)]
pub struct MemorySections {
    documents: Arc<dyn MemoryDocuments>,
    bulletins: BulletinCache,
}

impl MemorySections {
    /// Wires the sources.
    pub fn new(documents: Arc<dyn MemoryDocuments>, bulletins: BulletinCache) -> Self {
        Self { documents, bulletins }
    }

    /// The sections, read synchronously.
    pub fn read(&self, context: &str) -> Vec<PromptSection> {
        let mut sections = Vec::new();
        match self.bulletins.get(context) {
            Ok(Some(bulletin)) if !bulletin.content.trim().is_empty() => {
                sections.push(PromptSection { title: "What you know (memory bulletin)".into(), body: bulletin.content })
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "can't read the memory bulletin"),
        }
        match self.documents.read(context) {
            Ok(Some(document)) => sections.push(PromptSection {
                title: "Memory (memory.md — yours to maintain with memory_write)".into(),
                body: document,
            }),
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "can't read memory.md"),
        }
        sections
    }
}

impl PromptSections for MemorySections {
    fn sections<'a>(&'a self, context: &'a str) -> BoxFuture<'a, Vec<PromptSection>> {
        let sections = self.clone();
        let context = context.to_owned();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || sections.read(&context)).await.unwrap_or_else(|error| {
                tracing::warn!(%error, "can't read the memory sections");
                Vec::new()
            })
        })
    }
}

/// Several section sources, in prompt order (memory first, then skills, as DESIGN.md
/// orders the context).
pub struct ChainedSections(Vec<Arc<dyn PromptSections>>);

impl ChainedSections {
    /// Chains `sources`.
    pub fn new(sources: Vec<Arc<dyn PromptSections>>) -> Self {
        Self(sources)
    }
}

impl PromptSections for ChainedSections {
    fn sections<'a>(&'a self, context: &'a str) -> BoxFuture<'a, Vec<PromptSection>> {
        Box::pin(async move {
            let mut sections = Vec::new();
            for source in &self.0 {
                sections.extend(source.sections(context).await);
            }
            sections
        })
    }
}
