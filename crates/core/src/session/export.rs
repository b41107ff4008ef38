//! Exporting a session for people to read: Markdown, or one self-contained HTML file
//! (inline CSS, no scripts) that reads well offline. Either shows the whole tree with
//! its branch points marked, or only the active branch; tool calls with their arguments
//! and results, timestamps and model changes. Every text passes the leak scanner first.

mod html;

use squidbot_types::session::{EntryBody, MessageRole, SessionEntry};

use super::Session;
use crate::leaks::LeakScanner;

/// The file format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Markdown.
    Markdown,
    /// One HTML page, CSS inline, no scripts.
    Html,
}

impl ExportFormat {
    /// Reads `md`/`markdown` or `html`.
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "md" | "markdown" => Some(Self::Markdown),
            "html" | "htm" => Some(Self::Html),
            _ => None,
        }
    }
}

/// Which entries an export shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportScope {
    /// Every branch, each branch point marked.
    WholeTree,
    /// Only the branch the next message continues.
    ActiveBranch,
}

/// A finished export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The document.
    pub text: String,
    /// How many secrets the leak scanner replaced.
    pub redactions: usize,
}

/// Renders `session` as `format`.
pub fn export(session: &Session, format: ExportFormat, scope: ExportScope, scanner: &LeakScanner) -> Export {
    let mut walk = Walk { session, scanner, redactions: 0, items: Vec::new() };
    walk.collect(scope);
    let Walk { items, redactions, .. } = walk;
    let text = match format {
        ExportFormat::Markdown => markdown(session, &items),
        ExportFormat::Html => html::render(session, &items),
    };
    Export { text, redactions }
}

/// One step of the walk both formats render.
#[derive(Debug)]
enum Item {
    /// A branch starts after entry `from`; `number` counts the branches there from 1.
    BranchStart { from: String, number: usize, of: usize, active: bool },
    /// The branch that started last ends.
    BranchEnd,
    /// An entry, its texts already redacted.
    Entry { entry: SessionEntry, active: bool },
}

struct Walk<'a> {
    session: &'a Session,
    scanner: &'a LeakScanner,
    redactions: usize,
    items: Vec<Item>,
}

impl Walk<'_> {
    fn collect(&mut self, scope: ExportScope) {
        let active: std::collections::HashSet<String> =
            self.session.active_path().iter().map(|entry| entry.id.clone()).collect();
        match scope {
            ExportScope::ActiveBranch => {
                for entry in self.session.active_path() {
                    self.push_entry(entry, true);
                }
            }
            ExportScope::WholeTree => {
                let roots: Vec<&SessionEntry> = self.session.children(None);
                self.chains(&roots, None, &active);
            }
        }
    }

    /// Renders `starts` as consecutive branches after `from` (a single one needs no mark).
    fn chains(&mut self, starts: &[&SessionEntry], from: Option<&str>, active: &std::collections::HashSet<String>) {
        let marked = starts.len() > 1;
        for (number, start) in starts.iter().enumerate() {
            if marked {
                self.items.push(Item::BranchStart {
                    from: from.unwrap_or("the start").to_owned(),
                    number: number + 1,
                    of: starts.len(),
                    active: active.contains(&start.id),
                });
            }
            let mut current = *start;
            // A chain is iterated; only a branch point recurses, once per branch.
            for _ in 0..=self.session.entries().len() {
                self.push_entry(current, active.contains(&current.id));
                let next = self.session.children(Some(&current.id));
                match next.as_slice() {
                    [] => break,
                    [only] => current = only,
                    many => {
                        let many = many.to_vec();
                        self.chains(&many, Some(&current.id), active);
                        break;
                    }
                }
            }
            if marked {
                self.items.push(Item::BranchEnd);
            }
        }
    }

    fn push_entry(&mut self, entry: &SessionEntry, active: bool) {
        let mut entry = entry.clone();
        match &mut entry.body {
            EntryBody::Message { content, .. } => self.redact(content),
            EntryBody::ToolCall { arguments, .. } => self.redact(arguments),
            EntryBody::ToolResult { content, .. } => self.redact(content),
            EntryBody::Compaction { summary, .. } => self.redact(summary),
            EntryBody::Delegate { task, result, .. } => {
                self.redact(task);
                self.redact(result);
            }
            EntryBody::ModelChange { .. } => {}
        }
        self.items.push(Item::Entry { entry, active });
    }

    fn redact(&mut self, text: &mut String) {
        let (clean, findings) = self.scanner.redact(text);
        self.redactions += findings.len();
        *text = clean;
    }
}

/// A fence longer than any run of backticks in `text`.
fn fence_for(text: &str) -> String {
    let longest = text.split(|character| character != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

fn markdown(session: &Session, items: &[Item]) -> String {
    let header = session.header();
    let mut out = format!(
        "# Session {}\n\nContext `{}` · created {} · {} entries\n\n",
        header.key,
        header.context,
        header.created,
        session.entries().len()
    );
    let mut depth = 0usize;
    for item in items {
        match item {
            Item::BranchStart { from, number, of, active } => {
                depth += 1;
                let marker = if *active { " (active)" } else { "" };
                out.push_str(&format!(
                    "{} Branch {number} of {of} from entry `{from}`{marker}\n\n",
                    "#".repeat((depth + 1).min(6))
                ));
            }
            Item::BranchEnd => depth = depth.saturating_sub(1),
            Item::Entry { entry, active } => markdown_entry(&mut out, entry, *active),
        }
    }
    out
}

fn markdown_entry(out: &mut String, entry: &SessionEntry, active: bool) {
    let stamp = format!("`{}` · {}{}", entry.id, entry.timestamp, if active { "" } else { " · other branch" });
    match &entry.body {
        EntryBody::Message { role, content, model, interrupted, .. } => {
            let who = match role {
                MessageRole::User => "**User**".to_owned(),
                MessageRole::Assistant => match model {
                    Some(model) => format!("**Assistant** ({model})"),
                    None => "**Assistant**".to_owned(),
                },
            };
            let flag = if *interrupted { " · interrupted" } else { "" };
            out.push_str(&format!("{who} · {stamp}{flag}\n\n{}\n\n", quote(content)));
        }
        EntryBody::ToolCall { name, arguments, .. } => {
            let fence = fence_for(arguments);
            out.push_str(&format!("Tool call `{name}` · {stamp}\n\n{fence}json\n{arguments}\n{fence}\n\n"));
        }
        EntryBody::ToolResult { name, content, is_error, .. } => {
            let fence = fence_for(content);
            let error = if *is_error { " (error)" } else { "" };
            out.push_str(&format!("Tool result `{name}`{error} · {stamp}\n\n{fence}\n{content}\n{fence}\n\n"));
        }
        EntryBody::Compaction { summary, condensed, method, .. } => {
            out.push_str(&format!(
                "*Compaction ({method}): {condensed} messages condensed* · {stamp}\n\n{}\n\n",
                quote(summary)
            ));
        }
        EntryBody::Delegate { agent, worker, status, task, result, session } => {
            out.push_str(&format!(
                "*Background {agent} {worker} {status}* (session `{session}`) · {stamp}\n\nTask: {task}\n\n{}\n\n",
                quote(result)
            ));
        }
        EntryBody::ModelChange { previous, new } => {
            let previous = if previous.is_empty() { "none" } else { previous.as_str() };
            out.push_str(&format!("*Model {previous} → {new}* · {stamp}\n\n"));
        }
    }
}

/// `text` as a Markdown block quote, so its own headings and lines stay inside it.
fn quote(text: &str) -> String {
    text.lines().map(|line| format!("> {line}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests;
