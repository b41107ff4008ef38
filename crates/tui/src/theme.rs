//! The two colour themes, dark and light, as the styles every part of the screen uses.

use ratatui::style::{Color, Modifier, Style};

/// Which theme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThemeName {
    /// Light text on the terminal's dark background.
    #[default]
    Dark,
    /// Dark text on a light background.
    Light,
}

impl ThemeName {
    /// `dark` or `light`; `None` for anything else.
    pub fn parse(name: &str) -> Option<ThemeName> {
        match name {
            "dark" => Some(ThemeName::Dark),
            "light" => Some(ThemeName::Light),
            _ => None,
        }
    }
}

/// The styles of one theme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// Reply text.
    pub text: Style,
    /// Secondary text: hints, thinking, tool details.
    pub dim: Style,
    /// The user's messages.
    pub user: Style,
    /// Headings, the prompt marker, selected items.
    pub accent: Style,
    /// Inline code and code blocks.
    pub code: Style,
    /// Keywords in code blocks.
    pub keyword: Style,
    /// String literals in code blocks.
    pub string: Style,
    /// Comments in code blocks.
    pub comment: Style,
    /// Numbers in code blocks.
    pub number: Style,
    /// Links and quotes.
    pub link: Style,
    /// Borders of cards, the editor and panels.
    pub border: Style,
    /// The status line.
    pub status: Style,
    /// Errors and failed tools.
    pub error: Style,
    /// Finished tools.
    pub success: Style,
    /// The selected card or list row.
    pub selected: Style,
}

impl Theme {
    /// The theme called `name`.
    pub fn named(name: ThemeName) -> Theme {
        match name {
            ThemeName::Dark => Theme {
                text: Style::new().fg(Color::Gray),
                dim: Style::new().fg(Color::DarkGray),
                user: Style::new().fg(Color::White).add_modifier(Modifier::BOLD),
                accent: Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
                code: Style::new().fg(Color::LightYellow),
                keyword: Style::new().fg(Color::LightMagenta),
                string: Style::new().fg(Color::LightGreen),
                comment: Style::new().fg(Color::DarkGray).add_modifier(Modifier::ITALIC),
                number: Style::new().fg(Color::LightCyan),
                link: Style::new().fg(Color::LightBlue).add_modifier(Modifier::UNDERLINED),
                border: Style::new().fg(Color::DarkGray),
                status: Style::new().fg(Color::Black).bg(Color::Cyan),
                error: Style::new().fg(Color::LightRed),
                success: Style::new().fg(Color::LightGreen),
                selected: Style::new().fg(Color::Black).bg(Color::Gray),
            },
            ThemeName::Light => Theme {
                text: Style::new().fg(Color::Black),
                dim: Style::new().fg(Color::Gray),
                user: Style::new().fg(Color::Blue).add_modifier(Modifier::BOLD),
                accent: Style::new().fg(Color::Blue).add_modifier(Modifier::BOLD),
                code: Style::new().fg(Color::Rgb(0x80, 0x40, 0x00)),
                keyword: Style::new().fg(Color::Magenta),
                string: Style::new().fg(Color::Green),
                comment: Style::new().fg(Color::Gray).add_modifier(Modifier::ITALIC),
                number: Style::new().fg(Color::Cyan),
                link: Style::new().fg(Color::Blue).add_modifier(Modifier::UNDERLINED),
                border: Style::new().fg(Color::Gray),
                status: Style::new().fg(Color::White).bg(Color::Blue),
                error: Style::new().fg(Color::Red),
                success: Style::new().fg(Color::Green),
                selected: Style::new().fg(Color::White).bg(Color::Blue),
            },
        }
    }
}
