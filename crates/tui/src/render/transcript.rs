//! The transcript as lines: messages, Markdown replies, tool cards, thinking, notices.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::app::App;
use crate::app::transcript::{Item, ToolCard, ToolStatus};
use crate::markdown;
use crate::theme::Theme;
use crate::wrap::{wrap, wrap_text};

/// Longest argument summary on a folded card's title line.
const SUMMARY_CHARS: usize = 60;

/// Lines of a result shown on an unfolded card; the rest is counted.
const RESULT_LINES: usize = 20;

/// The wrapped lines of settled messages (user messages, finished replies) by transcript
/// index: re-rendering a long session's Markdown on every frame (a tick is 200 ms) costs
/// more than the frame. An entry is used only while its width and text are unchanged, and
/// the cache never holds more entries than the transcript has items.
#[derive(Debug, Default)]
pub struct LineCache(Mutex<Vec<Option<Cached>>>);

impl Clone for LineCache {
    /// A copy starts empty: it fills again on its first frame.
    fn clone(&self) -> Self {
        Self::default()
    }
}

#[derive(Debug)]
struct Cached {
    width: usize,
    fingerprint: u64,
    lines: Vec<Line<'static>>,
}

/// Every line of the transcript at `width` columns.
pub fn lines(app: &App, width: usize) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let mut lines = Vec::new();
    let mut cache = app.rendered.0.lock().unwrap_or_else(PoisonError::into_inner);
    cache.resize_with(app.transcript.len(), || None);
    for (index, item) in app.transcript.iter().enumerate() {
        let selected = app.selected == Some(index);
        match item {
            Item::User(text) | Item::Assistant { text, streaming: false } => {
                let fingerprint = fingerprint(matches!(item, Item::User(_)), text);
                let slot = &mut cache[index];
                match slot {
                    Some(cached) if cached.width == width && cached.fingerprint == fingerprint => {}
                    _ => {
                        let rendered = match item {
                            Item::User(_) => user_lines(text, theme, width),
                            _ => markdown::render(text, width, theme),
                        };
                        *slot = Some(Cached { width, fingerprint, lines: rendered });
                    }
                }
                if let Some(cached) = slot {
                    lines.extend(cached.lines.iter().cloned());
                }
            }
            Item::Assistant { text, streaming: true } => {
                let mut reply = markdown::render(text, width, theme);
                match reply.last_mut() {
                    Some(last) => last.spans.push(Span::styled("▍", theme.accent)),
                    None => reply.push(Line::from(Span::styled("▍", theme.accent))),
                }
                lines.extend(reply);
            }
            Item::Thinking { text, collapsed } => {
                let style = theme.dim.add_modifier(Modifier::ITALIC);
                let title = if *collapsed {
                    format!("▸ thinking ({} words)", text.split_whitespace().count())
                } else {
                    "▾ thinking".to_owned()
                };
                lines.push(Line::from(Span::styled(title, title_style(theme, theme.dim, selected))));
                if !collapsed {
                    let bar = [Span::styled("┆ ", theme.dim)];
                    for line in text.split('\n') {
                        lines.extend(wrap(&bar, &bar, vec![Span::styled(line.to_owned(), style)], width));
                    }
                }
            }
            Item::Tool(card) => card_lines(card, app.now_ms, theme, selected, width, &mut lines),
            Item::Notice(message) => lines.extend(wrap_text(&format!("· {message}"), theme.dim, width)),
            Item::Error(message) => lines.extend(wrap_text(&format!("✗ {message}"), theme.error, width)),
            Item::Output(output) => {
                for line in output {
                    lines.extend(wrap_text(line, theme.text, width));
                }
            }
        }
        lines.push(Line::default());
    }
    lines
}

fn user_lines(text: &str, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    let marker = [Span::styled("› ", theme.accent)];
    let indent = [Span::raw("  ")];
    let mut lines = Vec::new();
    for (number, line) in text.split('\n').enumerate() {
        let first: &[Span<'static>] = if number == 0 { &marker } else { &indent };
        lines.extend(wrap(first, &indent, vec![Span::styled(line.to_owned(), theme.user)], width));
    }
    lines
}

/// Tells a cached message from the one now at its index.
fn fingerprint(from_user: bool, text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    from_user.hash(&mut hasher);
    text.hash(&mut hasher);
    hasher.finish()
}

fn title_style(theme: &Theme, style: Style, selected: bool) -> Style {
    if selected { theme.selected } else { style }
}

/// A tool card: a title line (status, name, arguments in short, duration) and, unfolded,
/// the arguments and the result.
fn card_lines(
    card: &ToolCard,
    now_ms: u64,
    theme: &Theme,
    selected: bool,
    width: usize,
    lines: &mut Vec<Line<'static>>,
) {
    let (icon, status_style) = match card.status {
        ToolStatus::Running => ("◌", theme.accent),
        ToolStatus::Done => ("✓", theme.success),
        ToolStatus::Failed => ("✗", theme.error),
    };
    let elapsed = card.duration_ms.unwrap_or_else(|| now_ms.saturating_sub(card.started_ms));
    let status = match card.status {
        ToolStatus::Running => format!("running {}", duration(elapsed)),
        ToolStatus::Done => duration(elapsed),
        ToolStatus::Failed => format!("failed · {}", duration(elapsed)),
    };
    let fold = if card.collapsed { "▸" } else { "▾" };
    let mut title = vec![
        Span::styled(format!("{fold} "), title_style(theme, theme.border, selected)),
        Span::styled(format!("{icon} "), status_style),
        Span::styled(card.name.clone(), title_style(theme, theme.accent, selected)),
    ];
    if card.collapsed {
        title.push(Span::styled(format!(" {}", summary(&card.arguments)), theme.dim));
    }
    title.push(Span::styled(format!(" · {status}"), status_style));
    lines.extend(wrap(&[], &[Span::raw("  ")], title, width));
    if card.collapsed {
        return;
    }
    let bar = [Span::styled("│ ", theme.border)];
    let arguments = serde_json::from_str::<serde_json::Value>(&card.arguments)
        .and_then(|value| serde_json::to_string_pretty(&value))
        .unwrap_or_else(|_| card.arguments.clone());
    lines.push(Line::from(vec![bar[0].clone(), Span::styled("arguments", theme.dim)]));
    for line in arguments.lines() {
        lines.extend(wrap(&bar, &bar, vec![Span::styled(line.to_owned(), theme.code)], width));
    }
    match &card.result {
        Some(result) => {
            lines.push(Line::from(vec![bar[0].clone(), Span::styled("result", theme.dim)]));
            let all: Vec<&str> = result.lines().collect();
            for line in all.iter().take(RESULT_LINES) {
                lines.extend(wrap(&bar, &bar, vec![Span::styled((*line).to_owned(), theme.text)], width));
            }
            if all.len() > RESULT_LINES {
                let more = format!("… {} more lines", all.len() - RESULT_LINES);
                lines.push(Line::from(vec![bar[0].clone(), Span::styled(more, theme.dim)]));
            }
        }
        None if card.status == ToolStatus::Running => {}
        None => lines.push(Line::from(vec![bar[0].clone(), Span::styled("(the result went to the model)", theme.dim)])),
    }
}

/// The arguments on one line: the values of a JSON object, else the text, cut short.
fn summary(arguments: &str) -> String {
    let text = match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(object)) => object
            .values()
            .map(|value| match value {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => arguments.to_owned(),
    };
    let text = text.replace('\n', " ");
    if text.chars().count() > SUMMARY_CHARS {
        format!("{}…", text.chars().take(SUMMARY_CHARS).collect::<String>())
    } else {
        text
    }
}

/// `840 ms`, `1.2 s`, `2m05s`.
pub fn duration(milliseconds: u64) -> String {
    match milliseconds {
        0..1000 => format!("{milliseconds} ms"),
        1000..60_000 => format!("{:.1} s", milliseconds as f64 / 1000.0),
        _ => format!("{}m{:02}s", milliseconds / 60_000, (milliseconds / 1000) % 60),
    }
}
