//! Finding the command that really runs in a simple command: past `A=1` assignments,
//! shell keywords and wrappers (`env`, `nohup`, `time`, `xargs`, `timeout`, …), and the
//! scripts a command runs in turn (`sh -c`, `eval`, `find -exec`, `watch`).

/// What a simple command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Head {
    /// Nothing runs (only assignments, or a query such as `command -v x`).
    Nothing,
    /// A wrapper with nothing to run prints the environment (`env` alone).
    EnvironmentDump(String),
    /// The command word is `words[index]`.
    Command(usize),
}

/// Code a command runs besides itself, to be checked in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Nested<'a> {
    /// A shell script given as text (`sh -c '…'`, `eval …`, `watch …`).
    Script(String),
    /// A simple command given as words (`find -exec … ;`).
    Words(&'a [String]),
    /// A shell reading its script from standard input (here-documents, pipes).
    StandardInput,
}

const KEYWORDS: [&str; 12] = ["!", "{", "}", "if", "then", "else", "elif", "do", "while", "until", "fi", "done"];

/// Shells whose `-c` argument is a script.
pub(crate) const SHELLS: [&str; 8] = ["sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish"];

/// The last path component of `word`, lowercased, so `/usr/bin/SUDO` reads as `sudo`.
pub(crate) fn basename(word: &str) -> String {
    word.rsplit('/').next().unwrap_or(word).to_lowercase()
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let mut characters = name.chars();
            characters.next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
                && characters.all(|rest| rest.is_ascii_alphanumeric() || rest == '_')
        }
        None => false,
    }
}

/// Skips options starting at `index`; options in `with_value` consume the next word too.
/// Stops after `--`.
fn skip_options(words: &[String], mut index: usize, with_value: &[&str]) -> usize {
    while let Some(word) = words.get(index) {
        if word == "--" {
            return index + 1;
        }
        if !word.starts_with('-') || word.len() == 1 {
            break;
        }
        index += if with_value.contains(&word.as_str()) { 2 } else { 1 };
    }
    index
}

/// Finds the command word of `words`.
pub(crate) fn head(words: &[String]) -> Head {
    let mut index = 0;
    loop {
        while words.get(index).is_some_and(|word| is_assignment(word) || KEYWORDS.contains(&word.as_str())) {
            index += 1;
        }
        let Some(word) = words.get(index) else {
            return Head::Nothing;
        };
        let after = index + 1;
        index = match basename(word).as_str() {
            "nohup" | "builtin" | "busybox" => after,
            "time" | "setsid" => skip_options(words, after, &[]),
            "exec" => skip_options(words, after, &["-a"]),
            "nice" => skip_options(words, after, &["-n"]),
            "ionice" => skip_options(words, after, &["-c", "-n", "-p"]),
            "stdbuf" => skip_options(words, after, &["-i", "-o", "-e"]),
            "timeout" => skip_options(words, after, &["-s", "-k", "--signal", "--kill-after"]) + 1,
            "xargs" => skip_options(
                words,
                after,
                &[
                    "-I",
                    "-n",
                    "-P",
                    "-d",
                    "-L",
                    "-s",
                    "-E",
                    "-a",
                    "--max-args",
                    "--max-procs",
                    "--delimiter",
                    "--arg-file",
                ],
            ),
            "command" => {
                let rest = &words[after..];
                let query = rest
                    .iter()
                    .take_while(|word| word.starts_with('-'))
                    .any(|option| option.contains('v') || option.contains('V'));
                if query {
                    return Head::Nothing;
                }
                skip_options(words, after, &[])
            }
            "env" => {
                let mut next = skip_options(words, after, &["-u", "-C", "--unset", "--chdir", "-S", "--split-string"]);
                while words.get(next).is_some_and(|word| is_assignment(word)) {
                    next = skip_options(words, next + 1, &["-u", "-C"]);
                }
                if next >= words.len() {
                    return Head::EnvironmentDump(word.clone());
                }
                next
            }
            _ => return Head::Command(index),
        };
    }
}

/// Code that `name arguments` runs in turn.
pub(crate) fn nested<'a>(name: &str, arguments: &'a [String]) -> Vec<Nested<'a>> {
    match name {
        "eval" => vec![Nested::Script(arguments.join(" "))],
        "watch" => {
            let start = skip_options(arguments, 0, &["-n", "--interval", "-d"]);
            vec![Nested::Script(arguments[start.min(arguments.len())..].join(" "))]
        }
        "find" => find_actions(arguments),
        shell if SHELLS.contains(&shell) => shell_script(arguments).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// What a shell invocation runs: its `-c` script, a script file (unknowable, treated as
/// nothing) or standard input.
fn shell_script(arguments: &[String]) -> Option<Nested<'_>> {
    let mut index = 0;
    let mut takes_command_string = false;
    while let Some(argument) = arguments.get(index) {
        if argument == "--" {
            index += 1;
            break;
        }
        let is_option = (argument.starts_with('-') || argument.starts_with('+')) && argument.len() > 1;
        if !is_option {
            break;
        }
        if argument == "-o" || argument == "+o" {
            index += 1;
        } else if !argument.starts_with("--") && argument.contains('c') {
            takes_command_string = true;
        }
        index += 1;
    }
    match arguments.get(index) {
        Some(script) if takes_command_string => Some(Nested::Script(script.clone())),
        Some(_) => None,
        None => Some(Nested::StandardInput),
    }
}

/// The commands of `find … -exec cmd … ;` (and `-execdir`, `-ok`, `-okdir`).
fn find_actions(arguments: &[String]) -> Vec<Nested<'_>> {
    let mut actions = Vec::new();
    let mut index = 0;
    while index < arguments.len() {
        if matches!(arguments[index].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = index + 1;
            let mut end = start;
            while end < arguments.len() && arguments[end] != ";" && arguments[end] != "+" {
                end += 1;
            }
            actions.push(Nested::Words(&arguments[start..end]));
            index = end;
        }
        index += 1;
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn wrappers_and_assignments_are_skipped() {
        let words = owned(&["A=1", "env", "-i", "B=2", "nohup", "time", "-p", "xargs", "-n", "1", "sudo"]);
        assert_eq!(head(&words), Head::Command(10));
        assert_eq!(head(&owned(&["timeout", "-s", "KILL", "5", "curl"])), Head::Command(4));
    }

    #[test]
    fn env_alone_dumps_the_environment() {
        assert_eq!(head(&owned(&["env"])), Head::EnvironmentDump("env".to_owned()));
        assert_eq!(head(&owned(&["env", "A=1"])), Head::EnvironmentDump("env".to_owned()));
        assert_eq!(head(&owned(&["A=1"])), Head::Nothing);
    }

    #[test]
    fn shell_scripts_are_found() {
        let arguments = owned(&["-lc", "sudo x"]);
        assert_eq!(nested("bash", &arguments), [Nested::Script("sudo x".to_owned())]);
        assert_eq!(nested("sh", &[]), [Nested::StandardInput]);
    }

    #[test]
    fn find_exec_commands_are_found() {
        let arguments = owned(&[".", "-exec", "rm", "-rf", "/", ";"]);
        assert_eq!(nested("find", &arguments), [Nested::Words(&arguments[2..5])]);
    }
}
