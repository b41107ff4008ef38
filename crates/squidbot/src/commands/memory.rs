//! `squidbot memory list|search|add|rm|doc`.

use anyhow::{Result, bail};
use serde_json::json;
use squidbot_core::memory::{ListFilter, SaveOutcome};
use squidbot_types::memory::{DEFAULT_IMPORTANCE, Memory, MemoryType, NewMemory};

use crate::cli::MemoryAction;
use crate::wiring::{Environment, OWNER_CONTEXT};

fn parse_type(name: &str) -> Result<MemoryType> {
    match MemoryType::parse(name) {
        Some(kind) => Ok(kind),
        None => {
            let names: Vec<&str> = MemoryType::ALL.iter().map(|kind| kind.as_str()).collect();
            bail!("unknown memory type {name:?}; use one of {}", names.join(", "))
        }
    }
}

/// Memories saved per transaction by `memory import`.
const IMPORT_BATCH: usize = 1_000;

/// One line of an import file.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportLine {
    content: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    importance: Option<f32>,
    #[serde(default)]
    tags: Vec<String>,
}

/// Parses every line first, so a bad line imports nothing and names its line number.
fn parse_import(text: &str, context: &str) -> Result<Vec<NewMemory>> {
    let mut batch = Vec::new();
    for (number, raw) in text.lines().enumerate().filter(|(_, raw)| !raw.trim().is_empty()) {
        let line_number = number + 1;
        let line: ImportLine = serde_json::from_str(raw)
            .map_err(|error| anyhow::anyhow!("line {line_number}: {error}; nothing was imported"))?;
        let kind = match &line.kind {
            Some(kind) => parse_type(kind)
                .map_err(|error| anyhow::anyhow!("line {line_number}: {error}; nothing was imported"))?,
            None => MemoryType::Fact,
        };
        let importance = line.importance.unwrap_or(DEFAULT_IMPORTANCE);
        if line.content.trim().is_empty() || !(0.0..=1.0).contains(&importance) {
            bail!("line {line_number}: content must not be empty and importance must be 0..1; nothing was imported");
        }
        batch.push(NewMemory {
            context: context.to_owned(),
            kind,
            content: line.content,
            importance,
            tags: line.tags,
            source: "import".into(),
            expires_at: None,
            links: Vec::new(),
        });
    }
    Ok(batch)
}

fn line(memory: &Memory) -> String {
    let tags = if memory.tags.is_empty() { String::new() } else { format!("  [{}]", memory.tags.join(", ")) };
    format!("#{:<6} {:<11} {:.2}  {}{tags}", memory.id, memory.kind.as_str(), memory.importance, memory.content)
}

/// Runs a memory action for the owner's context.
pub async fn run(environment: &Environment, action: MemoryAction) -> Result<()> {
    let memories = environment.memories()?;
    let context = OWNER_CONTEXT;
    match action {
        MemoryAction::List { kind, limit, json } => {
            let types = kind.as_deref().map(parse_type).transpose()?.into_iter().collect();
            let rows = memories.list(context, ListFilter { types, limit, offset: 0 }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else if rows.is_empty() {
                println!("no memories yet");
            } else {
                rows.iter().for_each(|memory| println!("{}", line(memory)));
            }
        }
        MemoryAction::Search { query, limit, json } => {
            let recall = memories.recall(context, &query, limit, &[]).await?;
            if json {
                let hits: Vec<_> = recall
                    .hits
                    .iter()
                    .map(|hit| json!({"memory": hit.memory, "score": hit.score, "found": format!("{:?}", hit.found).to_lowercase()}))
                    .collect();
                let report = json!({"mode": recall.mode.describe(), "warning": recall.warning, "hits": hits});
                println!("{}", serde_json::to_string_pretty(&report)?);
                return Ok(());
            }
            println!("recall: {}", recall.mode.describe());
            if let Some(warning) = recall.warning {
                eprintln!("warning: {warning}");
            }
            if recall.hits.is_empty() {
                println!("no memories match");
            }
            for hit in recall.hits {
                println!("{}  (score {:.3}, {:?})", line(&hit.memory), hit.score, hit.found);
            }
        }
        MemoryAction::Add { text, kind, importance, tags, json } => {
            let kind = parse_type(&kind)?;
            if !(0.0..=1.0).contains(&importance) {
                bail!("--importance must be between 0 and 1, not {importance}");
            }
            let outcome = memories
                .save(NewMemory {
                    context: context.to_owned(),
                    kind,
                    content: text,
                    importance: if importance.is_nan() { DEFAULT_IMPORTANCE } else { importance },
                    tags: tags.into_iter().map(|tag| tag.trim().to_owned()).filter(|tag| !tag.is_empty()).collect(),
                    source: "cli".into(),
                    expires_at: None,
                    links: Vec::new(),
                })
                .await?;
            let created = matches!(outcome, SaveOutcome::Created(_));
            if json {
                println!("{}", json!({"id": outcome.id(), "created": created}));
            } else if created {
                println!("saved memory #{}", outcome.id());
            } else {
                println!("updated memory #{} (it said nearly the same)", outcome.id());
            }
        }
        MemoryAction::Import { file } => {
            let text = if file == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(&file).map_err(|error| anyhow::anyhow!("can't read {file}: {error}"))?
            };
            let batch = parse_import(&text, context)?;
            let total = batch.len();
            let mut merged = 0;
            for chunk in batch.chunks(IMPORT_BATCH) {
                let outcomes = memories.save_many(chunk.to_vec()).await?;
                merged += outcomes.iter().filter(|outcome| matches!(outcome, SaveOutcome::Updated(_))).count();
            }
            println!("imported {total} memories ({} new, {merged} merged into existing ones)", total - merged);
        }
        MemoryAction::Rm { id } => {
            memories.delete(context, id).await?;
            println!("deleted memory #{id}");
        }
        MemoryAction::Doc { json } => {
            let documents = environment.documents();
            let location = documents.location(context);
            let text = tokio::task::spawn_blocking(move || documents.read(OWNER_CONTEXT)).await??;
            if json {
                println!("{}", json!({"path": location, "content": text}));
            } else {
                match text {
                    Some(text) => print!("{text}"),
                    None => eprintln!("{location} does not exist yet; the assistant writes it with memory_write"),
                }
            }
        }
    }
    Ok(())
}
