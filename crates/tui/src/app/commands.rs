//! The `/commands`: what each does, and the help that lists them.

use super::transcript::Item;
use super::{App, Effect};
use crate::transport::Request;

/// The commands, as Tab completes them (without the slash).
pub const NAMES: &[&str] = &[
    "new", "resume", "sessions", "tree", "fork", "model", "compact", "export", "status", "usage", "archive", "approve",
    "deny", "help", "quit",
];

/// What `/help` shows.
const HELP: &[&str] = &[
    "/new                start a fresh conversation (the old one stays in the session)",
    "/sessions           pick a session to resume (arrows, Enter)",
    "/resume KEY         open session KEY",
    "/model [NAME]       list the models, or switch to NAME",
    "/status             the assistant's status",
    "/usage              tokens and cost of this session",
    "/tree               the session's entries and branches",
    "/fork ID [KEY]      a new branch from entry ID (into session KEY when given)",
    "/export [md|html] [PATH]  write the active branch to a file",
    "/compact            summarise all but the last turn now",
    "/archive            archive this session (using it again resumes it)",
    "/approve ID, /deny ID [REASON]  decide a tool call waiting for an admin",
    "/skill:NAME [TEXT]  ask the assistant to use skill NAME",
    "/quit               leave (also Ctrl-D on an empty line)",
    "Enter sends; Alt+Enter, Shift+Enter or Ctrl-J adds a line; Up/Down on an empty line browse history",
    "Tab completes /commands and @paths; on an empty line Tab selects the newest card, Tab/Enter folds it,",
    "Alt+Up/Down (Ctrl-P/N) move between cards; PageUp/PageDown scroll; Esc or Ctrl-C stops a reply",
];

impl App {
    /// Runs the command line `line` (it starts with `/`).
    pub(super) fn command(&mut self, line: &str) -> Vec<Effect> {
        let (name, argument) = match line[1..].split_once(char::is_whitespace) {
            Some((name, argument)) => (name, argument.trim()),
            None => (&line[1..], ""),
        };
        let session = self.session.clone();
        match name {
            "quit" | "exit" => return vec![Effect::Quit],
            "help" => self.transcript.push(Item::Output(HELP.iter().map(|line| (*line).to_owned()).collect())),
            "new" => {
                self.transcript.clear();
                self.selected = None;
                self.transcript.push(Item::Notice("new conversation; the old one stays in the session file".into()));
                return vec![Effect::Request(Request::Reset { session })];
            }
            "sessions" => return vec![Effect::Request(Request::Sessions)],
            "resume" if argument.is_empty() => return vec![Effect::Request(Request::Sessions)],
            "resume" => return self.resume(argument),
            "model" if argument.is_empty() => return vec![Effect::Request(Request::Models)],
            "model" => return vec![Effect::Request(Request::SetModel { model: argument.to_owned() })],
            "status" => return vec![Effect::Request(Request::Status)],
            "usage" => {
                let usage = self.usage;
                let cost = usage.cost.map_or_else(|| "unknown".to_owned(), |cost| format!("${cost:.4}"));
                self.transcript.push(Item::Output(vec![format!(
                    "this session here: {} input tokens, {} output tokens, cost {cost}",
                    usage.input_tokens, usage.output_tokens
                )]));
            }
            "approve" | "deny" if argument.is_empty() => {
                self.transcript.push(Item::Error(format!("/{name} needs a request id: /{name} ID")));
            }
            "fork" | "tree" | "export" | "compact" | "archive" | "approve" | "deny" => {
                return vec![Effect::Request(Request::Extension {
                    command: name.to_owned(),
                    session,
                    argument: argument.to_owned(),
                })];
            }
            skill if skill.starts_with("skill:") => {
                let skill = &skill["skill:".len()..];
                let mut prompt = format!("Use the {skill} skill: read its SKILL.md and follow it.");
                if !argument.is_empty() {
                    prompt.push_str("\n\n");
                    prompt.push_str(argument);
                }
                return self.send(prompt);
            }
            unknown => self.transcript.push(Item::Error(format!("unknown command /{unknown}; /help lists them"))),
        }
        Vec::new()
    }
}
