//! The client's state and how it changes: [`App::update`] takes one [`Input`] (a key, a
//! paste, a transport event, a tick) and returns the [`Effect`]s for the IO side to
//! carry out. No IO here, so every behaviour is testable by feeding inputs.

mod commands;
mod events;
pub mod transcript;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::editor::Editor;
use crate::theme::{Theme, ThemeName};
use crate::transport::{Event, Mode, Request, SessionSummary, Worker};
use transcript::Item;

/// Something that happened to the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A key was pressed.
    Key(KeyEvent),
    /// Text was pasted.
    Paste(String),
    /// The mouse wheel turned up.
    ScrollUp,
    /// The mouse wheel turned down.
    ScrollDown,
    /// The terminal has this size now.
    Resize {
        /// Columns.
        width: u16,
        /// Rows.
        height: u16,
    },
    /// Time passed: milliseconds since the client started.
    Tick(u64),
    /// The transport said something.
    Transport(Event),
}

/// What the IO side should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Ask the transport.
    Request(Request),
    /// Leave.
    Quit,
}

/// A list the user picks from, over the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    /// The sessions, to resume one.
    Sessions {
        /// The sessions.
        sessions: Vec<SessionSummary>,
        /// The highlighted row.
        selected: usize,
    },
    /// The models, to switch.
    Models {
        /// `provider/model` ids.
        models: Vec<String>,
        /// The highlighted row.
        selected: usize,
    },
}

/// What the client is set up with.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The session to open.
    pub session: String,
    /// The colours.
    pub theme: ThemeName,
    /// Skill names, completed as `/skill:NAME`.
    pub skills: Vec<String>,
    /// Workspace paths (directories end in `/`), completed after `@`.
    pub paths: Vec<String>,
}

/// Tokens and cost of the session, as this client saw them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Prompt tokens of every model call.
    pub input_tokens: u64,
    /// Tokens the model wrote.
    pub output_tokens: u64,
    /// Prompt tokens of the last call: how full the context is.
    pub last_input_tokens: u64,
    /// What the calls cost, when the transport says.
    pub cost: Option<f64>,
}

/// The whole state of the client.
#[derive(Debug, Clone)]
pub struct App {
    /// The session shown.
    pub session: String,
    /// Where the assistant runs; `None` until the transport is ready.
    pub mode: Option<Mode>,
    /// The model answering.
    pub model: String,
    /// Its context window, when known.
    pub context_window: Option<u64>,
    /// The colours.
    pub theme: Theme,
    /// What was said and done.
    pub transcript: Vec<Item>,
    /// The input.
    pub editor: Editor,
    /// Completions offered by the last Tab.
    pub completions: Vec<String>,
    /// The index in `transcript` of the selected card.
    pub selected: Option<usize>,
    /// Lines scrolled up from the bottom of the transcript.
    pub scroll: usize,
    /// A picker over the transcript.
    pub overlay: Option<Overlay>,
    /// Tokens and cost.
    pub usage: Usage,
    /// The running sub-agents.
    pub workers: Vec<Worker>,
    /// A turn is running.
    pub busy: bool,
    /// Milliseconds since the client started.
    pub now_ms: u64,
    /// The terminal's size.
    pub size: (u16, u16),
    /// Settled messages already wrapped, so a frame does not render them again.
    pub(crate) rendered: crate::render::transcript::LineCache,
    commands: Vec<String>,
    paths: Vec<String>,
}

impl App {
    /// A fresh client; the first effects ask for the session's history.
    pub fn new(options: Options) -> (App, Vec<Effect>) {
        let mut commands: Vec<String> = commands::NAMES.iter().map(|name| format!("/{name}")).collect();
        commands.extend(options.skills.iter().map(|skill| format!("/skill:{skill}")));
        let app = App {
            session: options.session.clone(),
            mode: None,
            model: String::new(),
            context_window: None,
            theme: Theme::named(options.theme),
            transcript: Vec::new(),
            editor: Editor::default(),
            completions: Vec::new(),
            selected: None,
            scroll: 0,
            overlay: None,
            usage: Usage::default(),
            workers: Vec::new(),
            busy: false,
            now_ms: 0,
            size: (80, 24),
            rendered: Default::default(),
            commands,
            paths: options.paths,
        };
        (app, vec![Effect::Request(Request::History { session: options.session })])
    }

    /// Applies `input`; what the IO side must do next.
    pub fn update(&mut self, input: Input) -> Vec<Effect> {
        match input {
            Input::Key(key) if key.kind == KeyEventKind::Release => Vec::new(),
            Input::Key(key) => self.key(key),
            Input::Paste(text) => {
                self.editor.insert_text(&text);
                Vec::new()
            }
            Input::ScrollUp => {
                self.scroll_by(3);
                Vec::new()
            }
            Input::ScrollDown => {
                self.scroll = self.scroll.saturating_sub(3);
                Vec::new()
            }
            Input::Resize { width, height } => {
                self.size = (width, height);
                Vec::new()
            }
            Input::Tick(now_ms) => {
                self.now_ms = now_ms;
                Vec::new()
            }
            Input::Transport(event) => self.event(event),
        }
    }

    fn key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let control = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        if self.overlay.is_some() {
            return self.overlay_key(key);
        }
        if key.code != KeyCode::Tab {
            self.completions.clear();
        }
        match key.code {
            KeyCode::Char('c') if control => {
                if self.busy {
                    return vec![Effect::Request(Request::Abort { session: self.session.clone() })];
                }
                if self.editor.is_empty() {
                    return vec![Effect::Quit];
                }
                self.editor.set_text("");
            }
            KeyCode::Char('d') if control && self.editor.is_empty() => return vec![Effect::Quit],
            KeyCode::Char('j') if control => self.editor.insert('\n'),
            KeyCode::Char('p') if control => self.select_card(-1),
            KeyCode::Char('n') if control => self.select_card(1),
            KeyCode::Up if alt => self.select_card(-1),
            KeyCode::Down if alt => self.select_card(1),
            KeyCode::Enter if alt || key.modifiers.contains(KeyModifiers::SHIFT) => self.editor.insert('\n'),
            KeyCode::Enter => {
                if self.editor.is_empty() {
                    self.toggle_selected();
                    return Vec::new();
                }
                return self.submit();
            }
            KeyCode::Tab => {
                if self.editor.is_empty() {
                    match self.selected {
                        Some(_) => self.toggle_selected(),
                        None => self.select_card(-1),
                    }
                } else {
                    self.completions = self.editor.complete(&self.commands, &self.paths);
                }
            }
            KeyCode::Esc if self.selected.is_none() && self.busy => {
                return vec![Effect::Request(Request::Abort { session: self.session.clone() })];
            }
            KeyCode::Esc => self.selected = None,
            KeyCode::PageUp => self.scroll_by(self.page()),
            KeyCode::PageDown => self.scroll = self.scroll.saturating_sub(self.page()),
            KeyCode::Up => self.editor.up(),
            KeyCode::Down => self.editor.down(),
            KeyCode::Left => self.editor.left(),
            KeyCode::Right => self.editor.right(),
            KeyCode::Home => self.editor.home(),
            KeyCode::End => self.editor.end(),
            KeyCode::Backspace => self.editor.backspace(),
            KeyCode::Delete => self.editor.delete(),
            KeyCode::Char(character) if !control => {
                self.selected = None;
                self.editor.insert(character);
            }
            _ => {}
        }
        Vec::new()
    }

    fn overlay_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let Some(overlay) = &mut self.overlay else { return Vec::new() };
        let (selected, length) = match overlay {
            Overlay::Sessions { sessions, selected } => (selected, sessions.len()),
            Overlay::Models { models, selected } => (selected, models.len()),
        };
        match key.code {
            KeyCode::Up => *selected = selected.saturating_sub(1),
            KeyCode::Down => *selected = (*selected + 1).min(length.saturating_sub(1)),
            KeyCode::Esc => self.overlay = None,
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => self.overlay = None,
            KeyCode::Enter => {
                let overlay = self.overlay.take();
                match overlay {
                    Some(Overlay::Sessions { sessions, selected }) => {
                        if let Some(session) = sessions.get(selected) {
                            return self.resume(&session.key.clone());
                        }
                    }
                    Some(Overlay::Models { models, selected }) => {
                        if let Some(model) = models.get(selected) {
                            return vec![Effect::Request(Request::SetModel { model: model.clone() })];
                        }
                    }
                    None => {}
                }
            }
            _ => {}
        }
        Vec::new()
    }

    /// Sends the editor's text, or runs it as a command.
    fn submit(&mut self) -> Vec<Effect> {
        let text = self.editor.take();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Vec::new();
        }
        self.scroll = 0;
        if trimmed.starts_with('/') && !trimmed.starts_with("//") {
            return self.command(trimmed);
        }
        self.send(text)
    }

    /// Sends `text` as the user's message, unless a reply is still on its way.
    fn send(&mut self, text: String) -> Vec<Effect> {
        if self.busy {
            self.editor.set_text(&text);
            self.transcript.push(Item::Notice("a reply is on its way; Esc stops it".into()));
            return Vec::new();
        }
        self.busy = true;
        self.transcript.push(Item::User(text.clone()));
        vec![Effect::Request(Request::Send { session: self.session.clone(), message: text })]
    }

    /// Switches to session `key`.
    fn resume(&mut self, key: &str) -> Vec<Effect> {
        self.session = key.to_owned();
        self.transcript.clear();
        self.selected = None;
        self.scroll = 0;
        self.usage = Usage::default();
        vec![Effect::Request(Request::History { session: key.to_owned() })]
    }

    /// Rows the transcript scrolls by on PageUp/PageDown.
    fn page(&self) -> usize {
        usize::from(self.size.1.saturating_sub(6)).max(1)
    }

    fn scroll_by(&mut self, lines: usize) {
        let total = crate::render::transcript_height(self);
        let visible = usize::from(self.size.1.saturating_sub(4));
        self.scroll = (self.scroll + lines).min(total.saturating_sub(visible));
    }

    /// Moves the card selection by `step` (negative: towards older cards).
    fn select_card(&mut self, step: isize) {
        let cards: Vec<usize> = self
            .transcript
            .iter()
            .enumerate()
            .filter(|(_, item)| item.is_collapsible())
            .map(|(index, _)| index)
            .collect();
        let Some(&last) = cards.last() else { return };
        self.selected =
            Some(match self.selected.and_then(|selected| cards.iter().position(|card| *card == selected)) {
                None => last,
                Some(position) => {
                    let next = position.saturating_add_signed(step).min(cards.len() - 1);
                    cards[next]
                }
            });
    }

    fn toggle_selected(&mut self) {
        if let Some(item) = self.selected.and_then(|index| self.transcript.get_mut(index)) {
            item.toggle();
        }
    }

    /// The completion candidates for Tab (the commands, then `/skill:` names).
    pub fn commands(&self) -> &[String] {
        &self.commands
    }
}

#[cfg(test)]
mod tests;
