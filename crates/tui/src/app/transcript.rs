//! What the transcript holds: messages, tool cards, thinking, notices.

/// One entry of the transcript.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// What the user sent.
    User(String),
    /// The assistant's reply (Markdown), still growing while `streaming`.
    Assistant {
        /// The text so far.
        text: String,
        /// Whether more is coming.
        streaming: bool,
    },
    /// The model's thinking, shown dimmed.
    Thinking {
        /// The text so far.
        text: String,
        /// Folded to one line.
        collapsed: bool,
    },
    /// A tool call.
    Tool(ToolCard),
    /// Something to know that is not part of the reply.
    Notice(String),
    /// Something that went wrong.
    Error(String),
    /// The output of a command (`/status`, `/help`), as lines.
    Output(Vec<String>),
}

impl Item {
    /// Whether Tab/Enter can fold or unfold it.
    pub fn is_collapsible(&self) -> bool {
        matches!(self, Item::Tool(_) | Item::Thinking { .. })
    }

    /// Folds or unfolds it.
    pub fn toggle(&mut self) {
        match self {
            Item::Tool(card) => card.collapsed = !card.collapsed,
            Item::Thinking { collapsed, .. } => *collapsed = !*collapsed,
            Item::User(_) | Item::Assistant { .. } | Item::Notice(_) | Item::Error(_) | Item::Output(_) => {}
        }
    }
}

/// Where a tool call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    /// Running.
    Running,
    /// Finished without error.
    Done,
    /// Finished with an error (the model sees it).
    Failed,
}

/// A tool call as a card.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCard {
    /// The call's id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments, JSON text.
    pub arguments: String,
    /// Where it is.
    pub status: ToolStatus,
    /// When it started, in milliseconds since the client started.
    pub started_ms: u64,
    /// How long it ran, once finished.
    pub duration_ms: Option<u64>,
    /// What it returned, when the transport says.
    pub result: Option<String>,
    /// Folded to its title line.
    pub collapsed: bool,
}
