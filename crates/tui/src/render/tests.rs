//! Snapshot tests of [`render`] on ratatui's test backend: the start screen, a streamed
//! Markdown reply with code, tool cards folded and unfolded, the sessions picker, the
//! light theme.

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::render;
use crate::app::{App, Input, Options};
use crate::theme::ThemeName;
use crate::transport::{Event, Mode, SessionSummary, Worker};

fn app(theme: ThemeName) -> App {
    let options = Options { session: "cli:local".into(), theme, ..Options::default() };
    let (mut app, _) = App::new(options);
    app.update(Input::Resize { width: 80, height: 24 });
    app.update(Input::Transport(Event::Ready {
        mode: Mode::Local,
        model: "local/test-model".into(),
        context_window: Some(128_000),
    }));
    app
}

fn screen(app: &App) -> TestBackend {
    let mut terminal = Terminal::new(TestBackend::new(app.size.0, app.size.1)).unwrap();
    terminal.draw(|frame| render(app, frame)).unwrap();
    terminal.backend().clone()
}

fn send(app: &mut App, text: &str) {
    app.update(Input::Paste(text.into()));
    app.update(Input::Key(ratatui::crossterm::event::KeyCode::Enter.into()));
}

#[test]
fn the_start_screen() {
    insta::assert_snapshot!(screen(&app(ThemeName::Dark)));
}

#[test]
fn a_streamed_markdown_reply_with_a_code_block() {
    let mut app = app(ThemeName::Dark);
    send(&mut app, "show me rust");
    let reply = "## Hello\n\nHere is **bold** and `code`:\n\n```rust\nfn main() {\n    let answer = 42; // the answer\n    println!(\"{answer}\");\n}\n```\n\n- one\n- two";
    for piece in reply.as_bytes().chunks(17) {
        app.update(Input::Transport(Event::Delta { text: String::from_utf8_lossy(piece).into_owned() }));
    }
    app.update(Input::Transport(Event::Usage {
        model: "local/test-model".into(),
        input_tokens: 6400,
        output_tokens: 120,
        cost: Some(0.0123),
    }));
    insta::assert_snapshot!("streaming", screen(&app));
    app.update(Input::Transport(Event::Finished { reply: reply.into() }));
    insta::assert_snapshot!("finished", screen(&app));
}

fn with_tool_card() -> App {
    let mut app = app(ThemeName::Dark);
    send(&mut app, "say hi in the shell");
    app.update(Input::Tick(1000));
    app.update(Input::Transport(Event::ToolStarted {
        id: "call-1".into(),
        name: "exec".into(),
        arguments: r#"{"command":"echo hi"}"#.into(),
    }));
    app.update(Input::Transport(Event::ToolFinished {
        id: "call-1".into(),
        is_error: false,
        duration_ms: 42,
        result: Some("hi\n".into()),
    }));
    app.update(Input::Transport(Event::ToolStarted {
        id: "call-2".into(),
        name: "read_file".into(),
        arguments: r#"{"path":"notes/today.md"}"#.into(),
    }));
    app.update(Input::Tick(2500));
    app
}

#[test]
fn tool_cards_fold_and_unfold() {
    let mut app = with_tool_card();
    insta::assert_snapshot!("folded", screen(&app));
    // Tab on an empty line selects the newest card; Alt+Up the one before; Tab unfolds.
    app.update(Input::Key(ratatui::crossterm::event::KeyCode::Tab.into()));
    app.update(Input::Key(ratatui::crossterm::event::KeyEvent::new(
        ratatui::crossterm::event::KeyCode::Up,
        ratatui::crossterm::event::KeyModifiers::ALT,
    )));
    app.update(Input::Key(ratatui::crossterm::event::KeyCode::Tab.into()));
    insta::assert_snapshot!("unfolded", screen(&app));
}

#[test]
fn the_sessions_picker() {
    let mut app = app(ThemeName::Dark);
    let session = |key: &str, title: &str, messages| SessionSummary {
        key: key.into(),
        title: title.into(),
        messages,
        updated: String::new(),
    };
    app.update(Input::Transport(Event::Sessions(vec![
        session("cli:local", "hello there", 4),
        session("telegram:42", "what is the weather", 12),
        session("web:abc", "plan the trip", 30),
    ])));
    app.update(Input::Key(ratatui::crossterm::event::KeyCode::Down.into()));
    insta::assert_snapshot!(screen(&app));
}

#[test]
fn the_sub_agents_panel() {
    let mut app = app(ThemeName::Dark);
    send(&mut app, "research this");
    app.update(Input::Transport(Event::Workers(vec![Worker {
        id: "w1".into(),
        role: "researcher".into(),
        state: "running".into(),
        status: "reading three pages".into(),
        elapsed_ms: 12_000,
    }])));
    insta::assert_snapshot!(screen(&app));
}

#[test]
fn the_light_theme() {
    let mut app = app(ThemeName::Light);
    send(&mut app, "hi");
    app.update(Input::Transport(Event::Finished { reply: "Hello *there*, `code`.".into() }));
    app.update(Input::Resize { width: 40, height: 8 });
    // The styles matter here, so the buffer is shown with them.
    insta::assert_debug_snapshot!(screen(&app).buffer());
}
