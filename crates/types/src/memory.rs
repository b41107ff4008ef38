//! Long-term memories: their types, links and the shapes stores and tools exchange.

use serde::{Deserialize, Serialize};

/// What kind of thing a memory records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryType {
    /// Something true about the world or the user.
    Fact,
    /// How the user likes things.
    Preference,
    /// A choice that was made.
    Decision,
    /// Who someone (or the assistant) is.
    Identity,
    /// Something that happened.
    Event,
    /// Something noticed, less certain than a fact.
    Observation,
    /// Something still to do.
    Todo,
}

impl MemoryType {
    /// Every type, in display order.
    pub const ALL: [MemoryType; 7] =
        [Self::Fact, Self::Preference, Self::Decision, Self::Identity, Self::Event, Self::Observation, Self::Todo];

    /// Name as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fact => "fact",
            Self::Preference => "preference",
            Self::Decision => "decision",
            Self::Identity => "identity",
            Self::Event => "event",
            Self::Observation => "observation",
            Self::Todo => "todo",
        }
    }

    /// Parses a stored or typed name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str().eq_ignore_ascii_case(name.trim()))
    }
}

/// How two memories relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// Loosely related.
    RelatedTo,
    /// The source supersedes the target.
    Updates,
    /// The source contradicts the target.
    Contradicts,
    /// The source was caused by the target.
    CausedBy,
    /// The source is part of the target.
    PartOf,
}

impl LinkKind {
    /// Every kind.
    pub const ALL: [LinkKind; 5] = [Self::RelatedTo, Self::Updates, Self::Contradicts, Self::CausedBy, Self::PartOf];

    /// Name as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RelatedTo => "related_to",
            Self::Updates => "updates",
            Self::Contradicts => "contradicts",
            Self::CausedBy => "caused_by",
            Self::PartOf => "part_of",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str().eq_ignore_ascii_case(name.trim()))
    }
}

/// A link from one memory to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryLink {
    /// How they relate.
    pub kind: LinkKind,
    /// The other memory's id.
    pub target: i64,
}

/// A stored memory. Times are Unix seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Id, unique in the database.
    pub id: i64,
    /// Context (user or group) it belongs to.
    pub context: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: MemoryType,
    /// What it says.
    pub content: String,
    /// 0 (trivia) to 1 (essential).
    pub importance: f32,
    /// Free-form labels.
    pub tags: Vec<String>,
    /// Where it came from (`tool`, `cli`, `compaction`, `archive`, …).
    pub source: String,
    /// When it stops being recalled and is deleted, if ever.
    pub expires_at: Option<i64>,
    /// Creation time.
    pub created_at: i64,
    /// Last change.
    pub updated_at: i64,
    /// Last time recall returned it.
    pub accessed_at: Option<i64>,
    /// How often recall returned it.
    pub access_count: u64,
    /// Links to other memories.
    pub links: Vec<MemoryLink>,
}

/// A memory about to be saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewMemory {
    /// Context it belongs to.
    pub context: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: MemoryType,
    /// What it says.
    pub content: String,
    /// 0 to 1.
    pub importance: f32,
    /// Labels.
    pub tags: Vec<String>,
    /// Where it came from.
    pub source: String,
    /// Absolute expiry time (Unix seconds), if any.
    pub expires_at: Option<i64>,
    /// Links to existing memories.
    pub links: Vec<MemoryLink>,
}

/// Default importance when none is given.
pub const DEFAULT_IMPORTANCE: f32 = 0.5;

/// Default largest memory.md, in characters (`memory.document_cap`).
pub const DEFAULT_DOCUMENT_CAP: usize = 12_000;
