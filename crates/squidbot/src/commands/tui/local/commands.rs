//! The `/commands` the in-process transport runs itself: the session tree, forks, export,
//! compaction, archiving and approvals, as `squidbot sessions` and `squidbot approvals` do.

use squidbot_core::clock::rfc3339;
use squidbot_core::people::OWNER_CONTEXT;
use squidbot_core::session::branches::{self, LeafMove};
use squidbot_core::session::export::{ExportFormat, ExportScope, export};
use squidbot_tui::Event;

use super::{Bridge, Local};

/// What `/approve` and `/deny` decide.
#[derive(Debug, Clone, Copy)]
enum Verdict {
    Approve,
    Deny,
}

impl Local {
    /// Runs `/command argument` for session `key`: its answer, or an error, goes to the client.
    pub(super) async fn extension(&mut self, command: &str, key: &str, argument: &str) {
        let outcome = match command {
            "tree" | "fork" | "export" | "compact" => {
                if self.open(key).await.is_none() {
                    return;
                }
                match command {
                    "tree" => self.tree(),
                    "fork" => self.fork(argument).await,
                    "export" => self.export(argument),
                    _ => self.compact().await,
                }
            }
            "archive" => self.archive(key).await,
            "approve" => self.decide(argument, Verdict::Approve),
            "deny" => self.decide(argument, Verdict::Deny),
            other => Err(format!("/{other} is not available in local mode")),
        };
        match outcome {
            Ok(event) => self.events.send(event),
            Err(message) => self.error(message),
        }
    }

    fn tree(&self) -> Result<Event, String> {
        let session = self.session.as_ref().ok_or("no session is open")?;
        let mut lines = vec![format!("tree of {} (* active branch, > leaf):", session.key())];
        lines.extend(session.tree().into_iter().map(|node| {
            let mark = if node.leaf {
                ">"
            } else if node.active {
                "*"
            } else {
                " "
            };
            let who = node.role.map_or_else(|| node.kind.to_owned(), |role| format!("{role:?}").to_lowercase());
            format!("{}{mark} {} {who}: {}", "  ".repeat(node.depth), node.id, node.text)
        }));
        Ok(Event::Output { lines })
    }

    /// `/fork ENTRY [NEW_KEY]`: a new branch from ENTRY, in this session or a copy.
    async fn fork(&mut self, argument: &str) -> Result<Event, String> {
        let session = self.session.as_mut().ok_or("no session is open")?;
        let key = session.key().to_owned();
        let mut words = argument.split_whitespace();
        let Some(entry) = words.next() else {
            return Err("can't fork: name an entry, /fork ENTRY_ID [NEW_KEY] (/tree lists them)".into());
        };
        let now = rfc3339(self.agent.clock().now());
        let store = self.agent.store().as_ref();
        match words.next() {
            Some(new_key) => {
                let header = branches::fork_header(session, new_key, now);
                let copy = branches::fork_into(store, session, entry, header)
                    .await
                    .map_err(|error| format!("can't fork {key} at {entry}: {error}"))?;
                self.session = Some(copy);
                Ok(Event::Switched { session: new_key.to_owned() })
            }
            None => {
                branches::move_leaf(store, session, entry, LeafMove::Fork, now)
                    .await
                    .map_err(|error| format!("can't fork {key} at {entry}: {error}"))?;
                Ok(Event::Switched { session: key })
            }
        }
    }

    /// `/export [md|html] [PATH]`: the active branch, secrets redacted, into a file.
    fn export(&self, argument: &str) -> Result<Event, String> {
        let session = self.session.as_ref().ok_or("no session is open")?;
        let key = session.key();
        let mut words = argument.split_whitespace();
        let format_name = words.next().unwrap_or("md");
        let format = ExportFormat::parse(format_name)
            .ok_or_else(|| format!("can't export as {format_name:?}: the formats are html and md"))?;
        let document = export(session, format, ExportScope::ActiveBranch, self.agent.leak_scanner());
        let path = words.next().map_or_else(
            || {
                let name: String =
                    key.chars().map(|character| if character.is_alphanumeric() { character } else { '-' }).collect();
                format!("{name}.{format_name}")
            },
            str::to_owned,
        );
        std::fs::write(&path, &document.text).map_err(|error| format!("can't write {path}: {error}"))?;
        Ok(Event::Output {
            lines: vec![format!("exported {key} to {path} ({} secrets redacted)", document.redactions)],
        })
    }

    /// `/compact`: all but the last turn summarised now.
    async fn compact(&mut self) -> Result<Event, String> {
        let session = self.session.as_mut().ok_or("no session is open")?;
        let bridge = Bridge { sink: self.events.clone(), started: Default::default(), durations: Default::default() };
        match self.agent.compact_now(session, &bridge).await {
            Ok(Some(condensed)) => Ok(Event::Output {
                lines: vec![format!("compacted {}: {condensed} messages summarised", session.key())],
            }),
            Ok(None) => Ok(Event::Output {
                lines: vec!["nothing to compact (only one turn so far, or compaction is off)".into()],
            }),
            Err(error) => Err(format!("can't compact {}: {error}", session.key())),
        }
    }

    /// `/archive`: the session archived (its memories extracted); using it again resumes it.
    async fn archive(&mut self, key: &str) -> Result<Event, String> {
        let housekeeping =
            self.environment.housekeeping().map_err(|error| format!("can't archive {key}: {error:#}"))?;
        let archived = housekeeping.archive(key).await.map_err(|error| format!("can't archive {key}: {error}"))?;
        if self.session.as_ref().is_some_and(|session| session.key() == key) {
            self.session = None;
        }
        Ok(Event::Output {
            lines: vec![format!(
                "archived {key} ({} memories extracted); using it again resumes it",
                archived.memories
            )],
        })
    }

    /// `/approve ID` and `/deny ID [REASON]`, decided as the owner; a waiting turn finds the
    /// decision in the database.
    fn decide(&self, argument: &str, verdict: Verdict) -> Result<Event, String> {
        let (id, reason) = match argument.split_once(char::is_whitespace) {
            Some((id, reason)) => (id, Some(reason.trim().to_owned()).filter(|reason| !reason.is_empty())),
            None => (argument, None),
        };
        let database = crate::people::open(&self.environment)
            .map_err(|error| format!("can't open the approval requests: {error:#}"))?;
        let people = database.policy(self.environment.config());
        let admin = people.actor_for_context(OWNER_CONTEXT);
        let approve = match verdict {
            Verdict::Approve => true,
            Verdict::Deny => false,
        };
        let request =
            people.decide(id.trim(), &admin, approve, reason).map_err(|error| format!("can't decide {id}: {error}"))?;
        Ok(Event::Output { lines: vec![format!("{} `{}`: {}", request.id, request.tool, request.status.name())] })
    }
}
