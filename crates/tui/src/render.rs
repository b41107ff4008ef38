//! Drawing the [`App`] on a frame: the transcript (scrolled), the sub-agents panel, the
//! completion hint, the editor, the status line and a picker on top. Pure: the same
//! state draws the same screen, which the snapshot tests pin on ratatui's test backend.

pub(crate) mod transcript;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, List, ListItem, ListState, Paragraph};
use unicode_width::UnicodeWidthStr;

use crate::app::{App, Overlay};
pub use transcript::duration;

/// Width of the sub-agents panel.
const PANEL_WIDTH: u16 = 34;

/// Most lines the editor grows to.
const EDITOR_LINES: u16 = 6;

/// Width of the transcript when the screen is `width` wide.
fn transcript_width(app: &App, width: u16) -> u16 {
    if app.workers.is_empty() { width } else { width.saturating_sub(PANEL_WIDTH) }
}

/// How many lines the transcript has at the app's size (to bound scrolling).
pub fn transcript_height(app: &App) -> usize {
    transcript::lines(app, usize::from(transcript_width(app, app.size.0))).len()
}

/// Draws `app`.
pub fn render(app: &App, frame: &mut Frame<'_>) {
    let area = frame.area();
    let editor_rows = (app.editor.text().split('\n').count() as u16).clamp(1, EDITOR_LINES);
    let hint = u16::from(!app.completions.is_empty() || app.selected.is_some());
    let [body, hint_area, editor_area, status_area] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(hint),
        Constraint::Length(editor_rows + 2),
        Constraint::Length(1),
    ])
    .areas(area);
    let (transcript_area, panel) = if app.workers.is_empty() {
        (body, None)
    } else {
        let [left, right] = Layout::horizontal([Constraint::Min(1), Constraint::Length(PANEL_WIDTH)]).areas(body);
        (left, Some(right))
    };
    draw_transcript(app, frame, transcript_area);
    if let Some(panel) = panel {
        draw_workers(app, frame, panel);
    }
    if hint > 0 {
        let text = if app.completions.is_empty() {
            "Tab/Enter fold or unfold · Alt+↑/↓ other cards · Esc back to typing".to_owned()
        } else {
            app.completions.join("  ")
        };
        frame.render_widget(Paragraph::new(Span::styled(text, app.theme.dim)), hint_area);
    }
    draw_editor(app, frame, editor_area);
    draw_status(app, frame, status_area);
    if let Some(overlay) = &app.overlay {
        draw_overlay(app, overlay, frame, area);
    }
}

fn draw_transcript(app: &App, frame: &mut Frame<'_>, area: Rect) {
    let lines = transcript::lines(app, usize::from(area.width));
    let height = usize::from(area.height);
    if lines.is_empty() {
        let welcome = vec![
            Line::from(Span::styled("squidbot", app.theme.accent)),
            Line::from(Span::styled(
                "Type a message and press Enter. /help lists the commands, Ctrl-D leaves.",
                app.theme.dim,
            )),
        ];
        frame.render_widget(Paragraph::new(welcome), area);
        return;
    }
    let scroll = app.scroll.min(lines.len().saturating_sub(height));
    let end = lines.len() - scroll;
    let start = end.saturating_sub(height);
    let mut visible: Vec<Line<'static>> = lines[start..end].to_vec();
    if scroll > 0
        && let Some(last) = visible.last_mut()
    {
        *last = Line::from(Span::styled(format!("↓ {scroll} more lines (PageDown)"), app.theme.dim));
    }
    frame.render_widget(Paragraph::new(visible), area);
}

fn draw_workers(app: &App, frame: &mut Frame<'_>, area: Rect) {
    let theme = &app.theme;
    let block = Block::bordered().title(" sub-agents ").border_style(theme.border);
    let mut lines = Vec::new();
    for worker in &app.workers {
        lines.push(Line::from(vec![
            Span::styled(worker.role.clone(), theme.accent),
            Span::styled(format!(" {} · {}", worker.state, duration(worker.elapsed_ms)), theme.dim),
        ]));
        if !worker.status.is_empty() {
            lines.extend(crate::wrap::wrap_text(&worker.status, theme.text, usize::from(area.width.saturating_sub(2))));
        }
    }
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn draw_editor(app: &App, frame: &mut Frame<'_>, area: Rect) {
    let theme = &app.theme;
    let block = Block::default().borders(Borders::TOP | Borders::BOTTOM).border_style(theme.border);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let prompt = Span::styled("› ", theme.accent);
    if app.editor.is_empty() {
        let placeholder = if app.busy { "replying… (Esc stops)" } else { "Message squidbot, /help for commands" };
        frame.render_widget(Paragraph::new(Line::from(vec![prompt, Span::styled(placeholder, theme.dim)])), inner);
        frame.set_cursor_position(Position::new(inner.x + 2, inner.y));
        return;
    }
    let (row, column) = app.editor.position();
    let rows = usize::from(inner.height.max(1));
    let first = (row + 1).saturating_sub(rows);
    let lines: Vec<Line<'static>> = app
        .editor
        .text()
        .split('\n')
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(index, line)| {
            let lead = if index == 0 { prompt.clone() } else { Span::raw("  ") };
            Line::from(vec![lead, Span::styled(line.to_owned(), theme.user)])
        })
        .collect();
    // Long lines scroll sideways so the cursor stays on screen.
    let width = usize::from(inner.width.saturating_sub(3));
    let sideways = column.saturating_sub(width);
    frame.render_widget(Paragraph::new(lines).scroll((0, sideways as u16)), inner);
    let x = inner.x + 2 + (column - sideways) as u16;
    frame.set_cursor_position(Position::new(x, inner.y + (row - first) as u16));
}

fn draw_status(app: &App, frame: &mut Frame<'_>, area: Rect) {
    let mode = app.mode.map_or("connecting", |mode| mode.name());
    let mut parts = vec![format!(" {mode}")];
    if app.busy {
        const SPINNER: [&str; 4] = ["◐", "◓", "◑", "◒"];
        parts.push(format!("{} working", SPINNER[(app.now_ms / 150 % 4) as usize]));
    }
    parts.extend([app.model.clone(), app.session.clone()]);
    if let Some(window) = app.context_window.filter(|window| *window > 0) {
        let percent = app.usage.last_input_tokens * 100 / window;
        parts.push(format!("ctx {percent}%"));
    }
    parts.push(format!("{}↑ {}↓ tokens", tokens(app.usage.input_tokens), tokens(app.usage.output_tokens)));
    if let Some(cost) = app.usage.cost {
        parts.push(format!("${cost:.4}"));
    }
    let text = parts.into_iter().filter(|part| !part.is_empty()).collect::<Vec<_>>().join(" │ ");
    let padding = usize::from(area.width).saturating_sub(text.width());
    let line = Line::from(Span::styled(format!("{text}{}", " ".repeat(padding)), app.theme.status));
    frame.render_widget(Paragraph::new(line), area);
}

/// `950`, `12.3k`, `1.2M`.
fn tokens(count: u64) -> String {
    match count {
        0..10_000 => count.to_string(),
        10_000..1_000_000 => format!("{:.1}k", count as f64 / 1000.0),
        _ => format!("{:.1}M", count as f64 / 1_000_000.0),
    }
}

fn draw_overlay(app: &App, overlay: &Overlay, frame: &mut Frame<'_>, area: Rect) {
    let theme = &app.theme;
    let (title, rows, selected): (&str, Vec<String>, usize) = match overlay {
        Overlay::Sessions { sessions, selected } => (
            " sessions · Enter resumes · Esc closes ",
            sessions
                .iter()
                .map(|session| {
                    let marker = if session.key == app.session { "●" } else { " " };
                    format!("{marker} {:<28} {:>4} msgs  {}", session.key, session.messages, session.title)
                })
                .collect(),
            *selected,
        ),
        Overlay::Models { models, selected } => (
            " models · Enter switches · Esc closes ",
            models.iter().map(|model| format!("{} {model}", if *model == app.model { "●" } else { " " })).collect(),
            *selected,
        ),
    };
    let width = (area.width * 4 / 5).max(20).min(area.width);
    let height = (rows.len() as u16 + 2).min(area.height.saturating_sub(4)).max(3);
    let popup = Rect::new(area.x + (area.width - width) / 2, area.y + 1, width, height);
    frame.render_widget(Clear, popup);
    let items: Vec<ListItem<'_>> = rows.into_iter().map(|row| ListItem::new(Span::styled(row, theme.text))).collect();
    let list = List::new(items)
        .block(Block::bordered().title(title).border_style(theme.accent))
        .highlight_style(theme.selected);
    let mut state = ListState::default().with_selected(Some(selected));
    frame.render_stateful_widget(list, popup, &mut state);
}

#[cfg(test)]
mod tests;
