//! The per-context memory prompt sections: the context's memory bulletin and its
//! memory.md, read each turn.

use std::sync::Arc;

use super::MemoryDocuments;
use super::bulletin::Bulletins;
use crate::BoxFuture;
use crate::context::{PromptSection, PromptSections};

/// Reads the cached bulletin and memory.md off the async workers.
#[derive(Clone)]
pub struct MemorySections {
    documents: Arc<dyn MemoryDocuments>,
    bulletins: Arc<dyn Bulletins>,
}

impl MemorySections {
    /// Sections from the `documents` (memory.md) and the `bulletins`.
    pub fn new(documents: Arc<dyn MemoryDocuments>, bulletins: Arc<dyn Bulletins>) -> Self {
        Self { documents, bulletins }
    }

    /// The sections of `context`, read synchronously: the bulletin first (when it says
    /// anything), then memory.md. A source that can't be read is logged and left out.
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;
    use crate::memory::MemoryError;
    use crate::memory::bulletin::{Bulletin, BulletinError};

    #[derive(Default)]
    struct Documents(HashMap<String, String>);

    impl MemoryDocuments for Documents {
        fn read(&self, context: &str) -> Result<Option<String>, MemoryError> {
            Ok(self.0.get(context).cloned())
        }

        fn write(&self, _context: &str, _text: &str) -> Result<(), MemoryError> {
            Ok(())
        }

        fn location(&self, context: &str) -> String {
            format!("{context}/memory.md")
        }
    }

    #[derive(Default)]
    struct Cache(Mutex<HashMap<String, Bulletin>>);

    impl Bulletins for Cache {
        fn get(&self, context: &str) -> Result<Option<Bulletin>, BulletinError> {
            if context == "broken" {
                return Err(BulletinError::Storage { action: "read the memory bulletin", reason: "disk".into() });
            }
            Ok(self.0.lock().unwrap().get(context).cloned())
        }

        fn put(&self, context: &str, bulletin: &Bulletin) -> Result<(), BulletinError> {
            self.0.lock().unwrap().insert(context.to_owned(), bulletin.clone());
            Ok(())
        }
    }

    fn bulletin(content: &str) -> Bulletin {
        Bulletin { content: content.into(), fingerprint: "1-1-1".into(), generated_at: 1 }
    }

    #[tokio::test]
    async fn the_bulletin_comes_before_memory_md_and_blank_or_broken_sources_are_left_out() {
        let documents = Documents(HashMap::from([
            ("owner".to_owned(), "- the cat is called Miso".to_owned()),
            ("broken".to_owned(), "- still here".to_owned()),
        ]));
        let cache = Cache::default();
        cache.put("owner", &bulletin("- likes tea")).unwrap();
        cache.put("quiet", &bulletin("  \n")).unwrap();
        let sections = MemorySections::new(Arc::new(documents), Arc::new(cache));

        let owner = sections.sections("owner").await;
        let titles: Vec<&str> = owner.iter().map(|section| section.title.as_str()).collect();
        assert_eq!(
            titles,
            ["What you know (memory bulletin)", "Memory (memory.md — yours to maintain with memory_write)"]
        );
        assert_eq!((owner[0].body.as_str(), owner[1].body.as_str()), ("- likes tea", "- the cat is called Miso"));
        assert!(sections.sections("quiet").await.is_empty(), "a blank bulletin is no section");
        let broken = sections.read("broken");
        assert_eq!(broken.len(), 1, "an unreadable bulletin leaves memory.md: {broken:?}");
        assert_eq!(broken[0].body, "- still here");
    }
}
