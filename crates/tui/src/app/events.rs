//! How the transport's events change the transcript, the status and the pickers.

use super::transcript::{Item, ToolCard, ToolStatus};
use super::{App, Effect, Overlay};
use crate::transport::{Event, Role};

impl App {
    pub(super) fn event(&mut self, event: Event) -> Vec<Effect> {
        match event {
            Event::Ready { mode, model, context_window } => {
                self.mode = Some(mode);
                self.model = model;
                self.context_window = context_window;
            }
            Event::Delta { text } => match self.transcript.last_mut() {
                Some(Item::Assistant { text: reply, streaming: true }) => reply.push_str(&text),
                _ => self.transcript.push(Item::Assistant { text, streaming: true }),
            },
            Event::StreamReset => {
                if let Some(Item::Assistant { text, streaming: true }) = self.transcript.last_mut() {
                    text.clear();
                }
            }
            Event::Thinking { text } => match self.transcript.last_mut() {
                Some(Item::Thinking { text: thought, .. }) => thought.push_str(&text),
                _ => self.transcript.push(Item::Thinking { text, collapsed: false }),
            },
            Event::ToolStarted { id, name, arguments } => {
                self.end_stream();
                self.transcript.push(Item::Tool(ToolCard {
                    id,
                    name,
                    arguments,
                    status: ToolStatus::Running,
                    started_ms: self.now_ms,
                    duration_ms: None,
                    result: None,
                    collapsed: true,
                }));
            }
            Event::ToolFinished { id, is_error, duration_ms, result } => {
                let card = self.transcript.iter_mut().rev().find_map(|item| match item {
                    Item::Tool(card) if card.id == id => Some(card),
                    _ => None,
                });
                if let Some(card) = card {
                    card.status = if is_error { ToolStatus::Failed } else { ToolStatus::Done };
                    card.duration_ms = Some(duration_ms);
                    card.result = result;
                }
            }
            Event::Usage { model, input_tokens, output_tokens, cost } => {
                if !model.is_empty() {
                    self.model = model;
                }
                self.usage.input_tokens += input_tokens;
                self.usage.output_tokens += output_tokens;
                self.usage.last_input_tokens = input_tokens;
                if let Some(cost) = cost {
                    self.usage.cost = Some(self.usage.cost.unwrap_or(0.0) + cost);
                }
            }
            Event::Finished { reply } => {
                self.busy = false;
                self.workers.clear();
                match self.transcript.last_mut() {
                    Some(Item::Assistant { text, streaming }) if *streaming => {
                        *text = reply;
                        *streaming = false;
                    }
                    _ if !reply.trim().is_empty() => {
                        self.transcript.push(Item::Assistant { text: reply, streaming: false });
                    }
                    _ => {}
                }
            }
            Event::Aborted => {
                self.busy = false;
                self.workers.clear();
                self.end_stream();
                self.transcript.push(Item::Notice("stopped".into()));
            }
            Event::Failed { error } => {
                self.busy = false;
                self.workers.clear();
                self.end_stream();
                self.transcript.push(Item::Error(error));
            }
            Event::Background { text } => {
                self.end_stream();
                self.transcript.push(Item::Assistant { text, streaming: false });
            }
            Event::Notice { message } => self.transcript.push(Item::Notice(message)),
            Event::History { session, messages } => {
                if session == self.session {
                    self.transcript.clear();
                    self.selected = None;
                    for message in messages {
                        self.transcript.push(match message.role {
                            Role::User => Item::User(message.text),
                            Role::Assistant => Item::Assistant { text: message.text, streaming: false },
                        });
                    }
                }
            }
            Event::Switched { session } => {
                let effects = self.resume(&session);
                self.transcript.push(Item::Notice(format!("forked: now on a new branch of {session}")));
                return effects;
            }
            Event::Sessions(sessions) => {
                if sessions.is_empty() {
                    self.transcript.push(Item::Notice("no sessions yet".into()));
                } else {
                    let selected = sessions.iter().position(|session| session.key == self.session).unwrap_or(0);
                    self.overlay = Some(Overlay::Sessions { sessions, selected });
                }
            }
            Event::Models { models, current } => {
                if !current.is_empty() {
                    self.model = current;
                }
                let selected = models.iter().position(|model| *model == self.model).unwrap_or(0);
                self.overlay = Some(Overlay::Models { models, selected });
            }
            Event::ModelChanged { model, context_window } => {
                self.transcript.push(Item::Notice(format!("model: {model}")));
                self.model = model;
                self.context_window = context_window;
            }
            Event::Status(lines) | Event::Output { lines } => self.transcript.push(Item::Output(lines)),
            Event::Workers(workers) => self.workers = workers,
            Event::Unsupported { what } => self.transcript.push(Item::Notice(format!("{what}: not available yet"))),
            Event::Error { message } => self.transcript.push(Item::Error(message)),
            Event::Closed { reason } => {
                self.busy = false;
                self.end_stream();
                self.transcript.push(Item::Error(reason));
            }
        }
        Vec::new()
    }

    /// The streaming reply (if any) is complete as it stands.
    fn end_stream(&mut self) {
        if let Some(Item::Assistant { streaming, .. }) = self.transcript.last_mut() {
            *streaming = false;
        }
    }
}
