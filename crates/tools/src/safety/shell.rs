//! A small POSIX-shell lexer that splits a command line into simple commands, so the
//! safety rules can look at each command word: it knows quotes, escapes, operators,
//! subshells, `$(…)`, backticks, process substitution, redirections and here-documents.
//! It never fails: malformed input (an unclosed quote) ends where the text ends.

/// One simple command of a command line, after quote removal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    /// The words, command word first (assignments such as `A=1` included).
    pub words: Vec<String>,
    /// Targets of output redirections (`> file`, `>> file`, `&> file`).
    pub output_targets: Vec<String>,
    /// Files read through input redirections (`< file`).
    pub input_sources: Vec<String>,
    /// Bodies of here-documents fed to this command.
    pub heredocs: Vec<String>,
    /// True when this command reads the previous command's output through `|`.
    pub piped_from_previous: bool,
}

/// Splits `line` into its simple commands: first the top-level ones in order, then those
/// found inside substitutions.
pub(crate) fn split(line: &str) -> Vec<SimpleCommand> {
    let characters: Vec<char> = line.chars().collect();
    let mut parser = Parser::new(&characters);
    parser.parse(Terminator::EndOfInput);
    parser.finish()
}

/// What ends the text being parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Terminator {
    EndOfInput,
    ClosingParenthesis,
}

/// Where the next finished word goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Redirect {
    Output,
    Input,
    HereDocument { strip_tabs: bool },
}

/// A here-document waiting for its body, which starts on the next line.
#[derive(Debug, Clone)]
struct PendingHereDocument {
    delimiter: String,
    strip_tabs: bool,
    command_index: usize,
}

struct Parser<'a> {
    characters: &'a [char],
    position: usize,
    commands: Vec<SimpleCommand>,
    nested: Vec<SimpleCommand>,
    current: SimpleCommand,
    word: String,
    in_word: bool,
    redirect: Option<Redirect>,
    here_documents: Vec<PendingHereDocument>,
}

impl<'a> Parser<'a> {
    fn new(characters: &'a [char]) -> Self {
        Self {
            characters,
            position: 0,
            commands: Vec::new(),
            nested: Vec::new(),
            current: SimpleCommand::default(),
            word: String::new(),
            in_word: false,
            redirect: None,
            here_documents: Vec::new(),
        }
    }

    fn finish(mut self) -> Vec<SimpleCommand> {
        self.end_command(false);
        self.commands.append(&mut self.nested);
        self.commands
    }

    fn peek(&self) -> Option<char> {
        self.characters.get(self.position).copied()
    }

    fn next(&mut self) -> Option<char> {
        let character = self.peek()?;
        self.position += 1;
        Some(character)
    }

    fn eat(&mut self, expected: char) -> bool {
        if self.peek() == Some(expected) {
            self.position += 1;
            true
        } else {
            false
        }
    }

    /// Parses until the terminator; for `)` returns just after the matching parenthesis.
    fn parse(&mut self, terminator: Terminator) {
        let mut depth = 0usize;
        while let Some(character) = self.next() {
            match character {
                ' ' | '\t' | '\r' => self.finish_word(),
                '\n' => {
                    self.end_command(false);
                    self.read_here_document_bodies();
                }
                '#' if !self.in_word => self.skip_comment(),
                '\'' => self.single_quoted(),
                '"' => self.double_quoted(),
                '\\' => self.escaped(),
                '$' => self.dollar(),
                '`' => self.backticks(),
                ';' => self.end_command(false),
                '&' if self.eat('&') => self.end_command(false),
                '&' if self.peek() == Some('>') => {
                    self.position += 1;
                    self.eat('>');
                    self.start_redirect(Redirect::Output);
                }
                '&' => self.end_command(false),
                '|' if self.eat('|') => self.end_command(false),
                '|' => {
                    self.eat('&');
                    self.end_command(true);
                }
                '(' => {
                    depth += 1;
                    self.end_command(false);
                }
                ')' if depth == 0 && terminator == Terminator::ClosingParenthesis => {
                    self.end_command(false);
                    return;
                }
                ')' => {
                    depth = depth.saturating_sub(1);
                    self.end_command(false);
                }
                '>' | '<' => self.redirection(character),
                other => {
                    self.word.push(other);
                    self.in_word = true;
                }
            }
        }
    }

    fn skip_comment(&mut self) {
        while let Some(character) = self.peek() {
            if character == '\n' {
                return;
            }
            self.position += 1;
        }
    }

    fn single_quoted(&mut self) {
        self.in_word = true;
        while let Some(character) = self.next() {
            if character == '\'' {
                return;
            }
            self.word.push(character);
        }
    }

    fn double_quoted(&mut self) {
        self.in_word = true;
        while let Some(character) = self.next() {
            match character {
                '"' => return,
                '\\' => match self.next() {
                    Some('\n') => {}
                    Some(escaped @ ('$' | '`' | '"' | '\\')) => self.word.push(escaped),
                    Some(other) => {
                        self.word.push('\\');
                        self.word.push(other);
                    }
                    None => self.word.push('\\'),
                },
                '$' if self.peek() == Some('(') => {
                    self.position += 1;
                    self.substitution();
                }
                '`' => self.backticks(),
                other => self.word.push(other),
            }
        }
    }

    fn escaped(&mut self) {
        match self.next() {
            Some('\n') | None => {}
            Some(character) => {
                self.word.push(character);
                self.in_word = true;
            }
        }
    }

    fn dollar(&mut self) {
        self.in_word = true;
        if self.eat('(') {
            self.substitution();
        } else if self.peek() == Some('{') {
            self.word.push('$');
            while let Some(character) = self.next() {
                self.word.push(character);
                if character == '}' {
                    break;
                }
            }
        } else {
            self.word.push('$');
        }
    }

    /// Parses the inside of `$(…)` or `<(…)`, positioned just after the `(`.
    fn substitution(&mut self) {
        let mut inner = Parser::new(self.characters);
        inner.position = self.position;
        inner.parse(Terminator::ClosingParenthesis);
        self.position = inner.position;
        let mut found = inner.finish();
        self.nested.append(&mut found);
    }

    fn backticks(&mut self) {
        self.in_word = true;
        let mut inner = String::new();
        while let Some(character) = self.next() {
            match character {
                '`' => break,
                '\\' => match self.next() {
                    Some(escaped) => inner.push(escaped),
                    None => break,
                },
                other => inner.push(other),
            }
        }
        self.nested.append(&mut split(&inner));
    }

    fn redirection(&mut self, first: char) {
        if self.in_word && !self.word.is_empty() && self.word.chars().all(|digit| digit.is_ascii_digit()) {
            self.word.clear();
            self.in_word = false;
        } else {
            self.finish_word();
        }
        if self.peek() == Some('(') {
            self.position += 1;
            self.substitution();
            return;
        }
        let redirect = if first == '>' {
            if !self.eat('>') && !self.eat('|') {
                self.eat('&');
            }
            Redirect::Output
        } else if self.eat('<') {
            if self.eat('<') { Redirect::Input } else { Redirect::HereDocument { strip_tabs: self.eat('-') } }
        } else if self.eat('>') {
            Redirect::Output
        } else {
            self.eat('&');
            Redirect::Input
        };
        self.start_redirect(redirect);
    }

    fn start_redirect(&mut self, redirect: Redirect) {
        self.finish_word();
        self.redirect = Some(redirect);
    }

    fn finish_word(&mut self) {
        if !self.in_word {
            return;
        }
        let word = std::mem::take(&mut self.word);
        self.in_word = false;
        match self.redirect.take() {
            None => self.current.words.push(word),
            Some(Redirect::Output) => self.current.output_targets.push(word),
            Some(Redirect::Input) => self.current.input_sources.push(word),
            Some(Redirect::HereDocument { strip_tabs }) => self.here_documents.push(PendingHereDocument {
                delimiter: word,
                strip_tabs,
                command_index: self.commands.len(),
            }),
        }
    }

    fn end_command(&mut self, next_is_piped: bool) {
        self.finish_word();
        self.redirect = None;
        let finished = std::mem::take(&mut self.current);
        if !finished.words.is_empty() || !finished.output_targets.is_empty() || self.has_here_document_for_current() {
            self.commands.push(finished);
        }
        self.current.piped_from_previous = next_is_piped;
    }

    fn has_here_document_for_current(&self) -> bool {
        self.here_documents.iter().any(|pending| pending.command_index == self.commands.len())
    }

    /// Reads the bodies of here-documents declared on the line just ended.
    fn read_here_document_bodies(&mut self) {
        for pending in std::mem::take(&mut self.here_documents) {
            let mut body = String::new();
            while self.position < self.characters.len() {
                let start = self.position;
                while self.peek().is_some_and(|character| character != '\n') {
                    self.position += 1;
                }
                let line: String = self.characters[start..self.position].iter().collect();
                self.eat('\n');
                let compared = if pending.strip_tabs { line.trim_start_matches('\t') } else { &line };
                if compared == pending.delimiter {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if let Some(command) = self.commands.get_mut(pending.command_index) {
                command.heredocs.push(body);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        split(line).into_iter().map(|command| command.words).collect()
    }

    #[test]
    fn operators_split_commands() {
        assert_eq!(
            words("a 1; b && c || d | e & f\ng"),
            [vec!["a", "1"], vec!["b"], vec!["c"], vec!["d"], vec!["e"], vec!["f"], vec!["g"]]
        );
    }

    #[test]
    fn quotes_keep_operators_as_text() {
        assert_eq!(words(r#"echo "a; b" 'c | d' e\;f"#), [vec!["echo", "a; b", "c | d", "e;f"]]);
    }

    #[test]
    fn substitutions_and_subshells_are_commands_too() {
        assert_eq!(
            words("echo $(whoami) \"`id -u`\" (cd x && ls)"),
            [vec!["echo", "", ""], vec!["cd", "x"], vec!["ls"], vec!["whoami"], vec!["id", "-u"]]
        );
    }

    #[test]
    fn redirections_are_recorded_not_words() {
        let commands = split("echo hi 2>&1 > /dev/sda < input");
        assert_eq!(commands[0].words, ["echo", "hi"]);
        assert_eq!(commands[0].output_targets, ["1", "/dev/sda"]);
    }

    #[test]
    fn pipes_are_marked() {
        let commands = split("curl x | sh");
        assert!(!commands[0].piped_from_previous);
        assert!(commands[1].piped_from_previous);
    }

    #[test]
    fn here_documents_are_bodies_not_commands() {
        let commands = split("cat <<'EOF' > out\nsudo rm x\nEOF\nls");
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[0].heredocs, ["sudo rm x\n"]);
        assert_eq!(commands[1].words, ["ls"]);
    }

    #[test]
    fn comments_are_ignored() {
        assert_eq!(words("ls # sudo"), [vec!["ls"]]);
    }
}
