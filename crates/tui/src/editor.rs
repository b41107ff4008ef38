//! The multi-line input: the text and its cursor, history of sent messages, and Tab
//! completion of `/commands`, `@paths` from the workspace and skill names.

use unicode_width::UnicodeWidthStr;

/// What the editor holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Editor {
    text: String,
    /// Byte offset of the cursor in `text`, always on a character boundary.
    cursor: usize,
    /// Messages sent, oldest first.
    history: Vec<String>,
    /// The history entry shown, while browsing it.
    browsing: Option<usize>,
}

/// How many messages the history keeps.
const HISTORY_LIMIT: usize = 500;

impl Editor {
    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether nothing is typed.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Replaces the text, the cursor at its end.
    pub fn set_text(&mut self, text: &str) {
        self.text = text.to_owned();
        self.cursor = self.text.len();
    }

    /// Takes the text out (to send it), remembering it in the history.
    pub fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.browsing = None;
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
            if self.history.len() > HISTORY_LIMIT {
                self.history.remove(0);
            }
        }
        text
    }

    /// Types `character` at the cursor.
    pub fn insert(&mut self, character: char) {
        self.text.insert(self.cursor, character);
        self.cursor += character.len_utf8();
    }

    /// Pastes `text` at the cursor.
    pub fn insert_text(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        self.text.insert_str(self.cursor, &text);
        self.cursor += text.len();
    }

    /// Deletes the character before the cursor.
    pub fn backspace(&mut self) {
        if let Some(previous) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= previous.len_utf8();
            self.text.remove(self.cursor);
        }
    }

    /// Deletes the character under the cursor.
    pub fn delete(&mut self) {
        if self.cursor < self.text.len() {
            self.text.remove(self.cursor);
        }
    }

    /// Moves the cursor one character left.
    pub fn left(&mut self) {
        if let Some(previous) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= previous.len_utf8();
        }
    }

    /// Moves the cursor one character right.
    pub fn right(&mut self) {
        if let Some(next) = self.text[self.cursor..].chars().next() {
            self.cursor += next.len_utf8();
        }
    }

    /// Moves the cursor to the start of its line.
    pub fn home(&mut self) {
        self.cursor = self.text[..self.cursor].rfind('\n').map_or(0, |index| index + 1);
    }

    /// Moves the cursor to the end of its line.
    pub fn end(&mut self) {
        self.cursor += self.text[self.cursor..].find('\n').unwrap_or(self.text.len() - self.cursor);
    }

    /// Up: the line above, or the previous history entry when the editor is empty or
    /// shows history.
    pub fn up(&mut self) {
        if self.text.is_empty() || self.browsing.is_some() {
            let index = match self.browsing {
                Some(0) => return,
                Some(index) => index - 1,
                None if self.history.is_empty() => return,
                None => self.history.len() - 1,
            };
            self.browsing = Some(index);
            let entry = self.history[index].clone();
            self.set_text(&entry);
            return;
        }
        let (row, column) = self.position();
        if row > 0 {
            self.move_to(row - 1, column);
        }
    }

    /// Down: the line below, or the next history entry while browsing it.
    pub fn down(&mut self) {
        if let Some(index) = self.browsing {
            if index + 1 < self.history.len() {
                self.browsing = Some(index + 1);
                let entry = self.history[index + 1].clone();
                self.set_text(&entry);
            } else {
                self.browsing = None;
                self.set_text("");
            }
            return;
        }
        let (row, column) = self.position();
        if row + 1 < self.text.split('\n').count() {
            self.move_to(row + 1, column);
        }
    }

    /// The cursor's line and column (in characters' display width).
    pub fn position(&self) -> (usize, usize) {
        let before = &self.text[..self.cursor];
        let row = before.matches('\n').count();
        let line_start = before.rfind('\n').map_or(0, |index| index + 1);
        (row, before[line_start..].width())
    }

    fn move_to(&mut self, row: usize, column: usize) {
        let mut offset = 0;
        for (index, line) in self.text.split('\n').enumerate() {
            if index == row {
                let mut width = 0;
                let mut cursor = offset;
                for character in line.chars() {
                    let next = width + unicode_width::UnicodeWidthChar::width(character).unwrap_or(0);
                    if next > column {
                        break;
                    }
                    width = next;
                    cursor += character.len_utf8();
                }
                self.cursor = cursor;
                return;
            }
            offset += line.len() + 1;
        }
    }

    /// Completes the word before the cursor from `candidates` (`/commands` at the start,
    /// `@paths` anywhere); the candidates that fit when more than one does.
    pub fn complete(&mut self, commands: &[String], paths: &[String]) -> Vec<String> {
        let before = &self.text[..self.cursor];
        let start = before.rfind(char::is_whitespace).map_or(0, |index| index + 1);
        let word = &before[start..];
        let matches: Vec<String> = if word.starts_with('/') && start == 0 {
            commands.iter().filter(|command| command.starts_with(word)).cloned().collect()
        } else if let Some(partial) = word.strip_prefix('@') {
            paths.iter().filter(|path| path.starts_with(partial)).map(|path| format!("@{path}")).collect()
        } else {
            return Vec::new();
        };
        let Some(first) = matches.first() else { return Vec::new() };
        let common = matches.iter().fold(first.as_str(), |common, candidate| {
            let length = common
                .char_indices()
                .zip(candidate.chars())
                .find(|((_, left), right)| left != right)
                .map_or(common.len().min(candidate.len()), |((index, _), _)| index);
            &common[..length]
        });
        let mut replacement = common.to_owned();
        if matches.len() == 1 && !replacement.ends_with('/') {
            replacement.push(' ');
        }
        if replacement.len() >= word.len() {
            self.text.replace_range(start..self.cursor, &replacement);
            self.cursor = start + replacement.len();
        }
        if matches.len() == 1 { Vec::new() } else { matches }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_shows_when_the_editor_is_empty() {
        let mut editor = Editor::default();
        editor.set_text("first");
        editor.take();
        editor.set_text("second");
        editor.take();
        editor.up();
        assert_eq!(editor.text(), "second");
        editor.up();
        assert_eq!(editor.text(), "first");
        editor.down();
        assert_eq!(editor.text(), "second");
        editor.down();
        assert_eq!(editor.text(), "");
    }

    #[test]
    fn up_and_down_move_between_lines_of_a_message() {
        let mut editor = Editor::default();
        editor.set_text("abc\nde");
        editor.up();
        assert_eq!(editor.position(), (0, 2));
        editor.end();
        editor.down();
        assert_eq!(editor.position(), (1, 2));
    }

    #[test]
    fn tab_completes_commands_and_paths() {
        let commands = vec!["/model".to_owned(), "/new".to_owned(), "/sessions".to_owned()];
        let paths = vec!["notes/".to_owned(), "notes/a.md".to_owned(), "readme.md".to_owned()];
        let mut editor = Editor::default();
        editor.set_text("/mo");
        assert!(editor.complete(&commands, &paths).is_empty());
        assert_eq!(editor.text(), "/model ");
        editor.set_text("/n");
        editor.complete(&commands, &paths);
        assert_eq!(editor.text(), "/new ");
        editor.set_text("read @no");
        let shown = editor.complete(&commands, &paths);
        assert_eq!(editor.text(), "read @notes/");
        assert_eq!(shown, vec!["@notes/", "@notes/a.md"]);
    }
}
