//! Tests of the App state machine: keys and events in, state and effects out.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{App, Effect, Input, Options};
use crate::transport::{Event, Request};

fn app() -> App {
    App::new(Options { session: "cli:local".into(), ..Options::default() }).0
}

fn key(code: KeyCode) -> Input {
    Input::Key(code.into())
}

#[test]
fn enter_sends_and_alt_enter_adds_a_line() {
    let mut app = app();
    app.update(Input::Paste("one".into()));
    app.update(Input::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT)));
    app.update(key(KeyCode::Char('2')));
    let effects = app.update(key(KeyCode::Enter));
    assert_eq!(effects, vec![Effect::Request(Request::Send { session: "cli:local".into(), message: "one\n2".into() })]);
    assert!(app.busy);
    // Esc while a reply runs stops it.
    assert_eq!(app.update(key(KeyCode::Esc)), vec![Effect::Request(Request::Abort { session: "cli:local".into() })]);
}

#[test]
fn commands_become_requests() {
    let mut app = app();
    app.update(Input::Paste("/resume web:abc".into()));
    assert_eq!(app.update(key(KeyCode::Enter)), vec![Effect::Request(Request::History { session: "web:abc".into() })]);
    assert_eq!(app.session, "web:abc");
    app.update(Input::Paste("/quit".into()));
    assert_eq!(app.update(key(KeyCode::Enter)), vec![Effect::Quit]);
}

#[test]
fn the_final_reply_replaces_the_streamed_text() {
    let mut app = app();
    app.update(Input::Transport(Event::Delta { text: "partial".into() }));
    app.update(Input::Transport(Event::Finished { reply: "whole reply".into() }));
    assert_eq!(
        app.transcript,
        vec![super::transcript::Item::Assistant { text: "whole reply".into(), streaming: false }]
    );
}

#[test]
fn picking_a_model_asks_to_switch() {
    let mut app = app();
    app.update(Input::Transport(Event::Models {
        models: vec!["a/one".into(), "b/two".into()],
        current: "a/one".into(),
    }));
    app.update(key(KeyCode::Down));
    assert_eq!(app.update(key(KeyCode::Enter)), vec![Effect::Request(Request::SetModel { model: "b/two".into() })]);
    assert!(app.overlay.is_none());
}

#[test]
fn approvals_and_skills_become_requests() {
    let mut app = app();
    let run = |app: &mut App, line: &str| {
        app.update(Input::Paste(line.into()));
        app.update(key(KeyCode::Enter))
    };
    assert_eq!(
        run(&mut app, "/deny 7F3K2Q too risky"),
        vec![Effect::Request(Request::Extension {
            command: "deny".into(),
            session: "cli:local".into(),
            argument: "7F3K2Q too risky".into(),
        })]
    );
    assert_eq!(run(&mut app, "/approve"), Vec::new(), "no id: the client says so, nothing is sent");
    assert_eq!(
        run(&mut app, "/skill:pdf the report"),
        vec![Effect::Request(Request::Send {
            session: "cli:local".into(),
            message: "Use the pdf skill: read its SKILL.md and follow it.\n\nthe report".into(),
        })]
    );
}

#[test]
fn a_settled_message_is_wrapped_once_per_width() {
    let mut app = app();
    app.update(Input::Transport(Event::History {
        session: "cli:local".into(),
        messages: vec![crate::transport::HistoryMessage {
            role: crate::transport::Role::Assistant,
            text: "## Title\n\nsome **bold** text".into(),
        }],
    }));
    let first = crate::render::transcript::lines(&app, 40);
    assert_eq!(crate::render::transcript::lines(&app, 40), first, "the cached lines are the rendered ones");
    app.transcript.clear();
    app.update(Input::Transport(Event::History {
        session: "cli:local".into(),
        messages: vec![crate::transport::HistoryMessage {
            role: crate::transport::Role::Assistant,
            text: "another reply".into(),
        }],
    }));
    let replaced = crate::render::transcript::lines(&app, 40);
    assert!(format!("{replaced:?}").contains("another reply"), "a changed message is rendered again: {replaced:?}");
}
