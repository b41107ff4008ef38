//! The IO side: the terminal in raw mode on the alternate screen, keys read on a thread
//! of their own, the transport as a task, and the loop that feeds them all to
//! [`App::update`] and draws after each change.

use std::io::Stdout;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, DisableBracketedPaste, EnableBracketedPaste, Event as TerminalEvent};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::app::{App, Effect, Input, Options};
use crate::transport::{EventSink, Request, Transport};

/// How often the screen refreshes on its own (running tools' durations, the spinner).
const TICK: Duration = Duration::from_millis(200);

/// How long the key thread waits for a key before checking whether to stop.
const KEY_POLL: Duration = Duration::from_millis(100);

/// Why the client could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// The terminal refused raw mode, the alternate screen or drawing.
    #[error("can't use the terminal: {0}")]
    Terminal(#[from] std::io::Error),
}

/// Puts the terminal back as it was, also when the client fails.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(error) = disable_raw_mode() {
            tracing::warn!(%error, "can't leave raw mode");
        }
        if let Err(error) = execute!(std::io::stdout(), DisableBracketedPaste, LeaveAlternateScreen) {
            tracing::warn!(%error, "can't leave the alternate screen");
        }
    }
}

/// Runs the client over `transport` until the user quits.
pub async fn run<T: Transport>(transport: T, options: Options) -> Result<(), TuiError> {
    let started = Instant::now();
    enable_raw_mode()?;
    let restore = Restore;
    execute!(std::io::stdout(), EnterAlternateScreen, EnableBracketedPaste)?;
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    let (mut app, effects) = App::new(options);
    let size = terminal.size()?;
    app.update(Input::Resize { width: size.width, height: size.height });
    terminal.draw(|frame| crate::render::render(&app, frame))?;
    tracing::debug!(elapsed = ?started.elapsed(), "first screen drawn");

    let cancel = CancellationToken::new();
    let (requests, transport_requests) = mpsc::unbounded_channel();
    let (sink, mut events) = EventSink::channel();
    let transport_task = tokio::spawn(transport.run(transport_requests, sink, cancel.clone()));
    let stop_keys = Arc::new(AtomicBool::new(false));
    let mut keys = read_keys(stop_keys.clone());
    let outcome = async {
        if carry_out(effects, &requests) {
            return Ok(());
        }
        let mut tick = tokio::time::interval(TICK);
        loop {
            let input = tokio::select! {
                key = keys.recv() => match key {
                    Some(Ok(input)) => input,
                    Some(Err(error)) => return Err(TuiError::Terminal(error)),
                    None => return Ok(()),
                },
                event = events.recv() => match event {
                    Some(event) => Input::Transport(event),
                    None => return Ok(()),
                },
                _ = tick.tick() => Input::Tick(started.elapsed().as_millis() as u64),
            };
            if carry_out(app.update(input), &requests) {
                return Ok(());
            }
            // Take what else is waiting before drawing, so a burst of deltas draws once.
            while let Ok(event) = events.try_recv() {
                if carry_out(app.update(Input::Transport(event)), &requests) {
                    return Ok(());
                }
            }
            draw(&mut terminal, &app)?;
        }
    }
    .await;
    stop_keys.store(true, Ordering::Relaxed);
    cancel.cancel();
    drop(requests);
    if let Err(error) = transport_task.await {
        tracing::warn!(%error, "the transport task ended badly");
    }
    drop(restore);
    outcome
}

fn draw(terminal: &mut Terminal<CrosstermBackend<Stdout>>, app: &App) -> Result<(), TuiError> {
    terminal.draw(|frame| crate::render::render(app, frame))?;
    Ok(())
}

/// Sends the requests among `effects`; true when one of them is to quit.
fn carry_out(effects: Vec<Effect>, requests: &mpsc::UnboundedSender<Request>) -> bool {
    for effect in effects {
        match effect {
            Effect::Request(request) => {
                if requests.send(request).is_err() {
                    tracing::debug!("the transport has ended; a request is dropped");
                }
            }
            Effect::Quit => return true,
        }
    }
    false
}

/// Reads the terminal's events on a thread (crossterm's reads block) until `stop`.
fn read_keys(stop: Arc<AtomicBool>) -> mpsc::UnboundedReceiver<Result<Input, std::io::Error>> {
    let (sender, receiver) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let input = match event::poll(KEY_POLL) {
                Ok(false) => continue,
                Ok(true) => match event::read() {
                    Ok(TerminalEvent::Key(key)) => Ok(Input::Key(key)),
                    Ok(TerminalEvent::Paste(text)) => Ok(Input::Paste(text)),
                    Ok(TerminalEvent::Resize(width, height)) => Ok(Input::Resize { width, height }),
                    Ok(TerminalEvent::Mouse(mouse)) => match mouse.kind {
                        event::MouseEventKind::ScrollUp => Ok(Input::ScrollUp),
                        event::MouseEventKind::ScrollDown => Ok(Input::ScrollDown),
                        _ => continue,
                    },
                    Ok(TerminalEvent::FocusGained | TerminalEvent::FocusLost) => continue,
                    Err(error) => Err(error),
                },
                Err(error) => Err(error),
            };
            let failed = input.is_err();
            if sender.send(input).is_err() || failed {
                return;
            }
        }
    });
    receiver
}
