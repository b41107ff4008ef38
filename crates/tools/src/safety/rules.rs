//! The named rules of the command safety policy: which commands, arguments and
//! redirections are refused, and why.

use super::command_word::{Head, SHELLS, basename, head};
use super::shell::SimpleCommand;
use super::{Refusal, Rule};

/// Where earlier `cd` commands on the same line left the shell, for `rm -rf *`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location {
    Root,
    Home,
    Elsewhere,
}

/// Commands refused by name alone, with the reason given.
const REFUSED_COMMANDS: [(&[&str], Rule); 8] = [
    (&["sudo", "su", "doas", "pkexec", "runuser"], Rule::PrivilegeEscalation),
    (&["chown", "chgrp"], Rule::PrivilegeEscalation),
    (&["docker", "podman", "nerdctl", "container", "ctr", "crictl"], Rule::ContainerCli),
    (&["curl", "wget", "nc", "netcat", "ncat", "socat", "telnet", "ssh", "scp", "sftp"], Rule::NetworkTool),
    (&["printenv"], Rule::EnvironmentDump),
    (&["shutdown", "reboot", "halt", "poweroff"], Rule::SystemShutdown),
    (&["mke2fs", "mkswap", "wipefs", "format"], Rule::DiskFormat),
    (&["fdisk", "sfdisk", "parted", "diskpart"], Rule::DiskPartitioning),
];

/// Programs that run a script read from a pipe.
const INTERPRETERS: [&str; 6] = ["python", "python3", "perl", "ruby", "node", "php"];

/// Device name prefixes under `/dev/` that are disks.
const DISK_DEVICES: [&str; 9] = ["sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "dm-", "md"];

fn refuse(matched: impl Into<String>, rule: Rule) -> Refusal {
    Refusal::new(matched, rule)
}

/// `name arguments` shown in a refusal, cut to a readable length.
fn shown(name: &str, arguments: &[String]) -> String {
    let mut text = std::iter::once(name).chain(arguments.iter().map(String::as_str)).collect::<Vec<_>>().join(" ");
    if text.len() > 60 {
        text.truncate(squidbot_core::text::floor_char_boundary(&text, 60));
        text.push('…');
    }
    text
}

/// Checks one command by its (basename) command word and arguments; `cd` updates `location`.
pub(crate) fn check_command(name: &str, arguments: &[String], location: &mut Location) -> Result<(), Refusal> {
    for (names, rule) in REFUSED_COMMANDS {
        if names.contains(&name) {
            return Err(refuse(name, rule));
        }
    }
    if name.starts_with("mkfs") {
        return Err(refuse(name, Rule::DiskFormat));
    }
    let lowercase: Vec<String> = arguments.iter().map(|argument| argument.to_lowercase()).collect();
    let has = |wanted: &[&str]| lowercase.iter().any(|argument| wanted.contains(&argument.as_str()));
    match name {
        "rm" => remove(arguments, *location),
        "chmod" => setuid(arguments),
        "dd" => match arguments.iter().find(|argument| {
            argument.strip_prefix("of=").is_some_and(|target| target.starts_with("/dev/") && is_disk(target))
        }) {
            Some(target) => Err(refuse(format!("dd {target}"), Rule::RawDiskWrite)),
            None => Ok(()),
        },
        "tee" => raw_disk_targets(arguments),
        "del" | "erase" if lowercase.iter().any(|argument| argument.starts_with("/f")) => {
            Err(refuse(format!("{name} /f"), Rule::ForcedDelete))
        }
        "rmdir" | "rd" if has(&["/s"]) => Err(refuse(format!("{name} /s"), Rule::RecursiveDelete)),
        "systemctl" if has(&["poweroff", "reboot", "halt", "kexec"]) => {
            Err(refuse(shown(name, arguments), Rule::SystemShutdown))
        }
        "init" | "telinit" if has(&["0", "6"]) => Err(refuse(shown(name, arguments), Rule::SystemShutdown)),
        "set" if arguments.is_empty() => Err(refuse(name, Rule::EnvironmentDump)),
        "export" | "declare" | "typeset" if arguments.iter().all(|argument| argument == "-p" || argument == "-x") => {
            Err(refuse(shown(name, arguments), Rule::EnvironmentDump))
        }
        "find" if has(&["-delete"]) && arguments.first().is_some_and(|root| is_precious(root, Location::Elsewhere)) => {
            Err(refuse(shown(name, arguments), Rule::DestructiveDelete))
        }
        "cd" => {
            *location = match arguments.iter().find(|argument| !argument.starts_with('-')) {
                None => Location::Home,
                Some(target) if matches!(target.trim_end_matches('/'), "~" | "$HOME" | "${HOME}") => Location::Home,
                Some(target) if target.trim_end_matches(['/', '.']).is_empty() => Location::Root,
                Some(_) => Location::Elsewhere,
            };
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `rm` with a recursive flag aimed at the root, a top-level directory, the home
/// directory, the parent, or everything after `cd /`.
fn remove(arguments: &[String], location: Location) -> Result<(), Refusal> {
    let mut recursive = false;
    let mut options_ended = false;
    let mut targets = Vec::new();
    for argument in arguments {
        if options_ended || !argument.starts_with('-') || argument.len() == 1 {
            targets.push(argument.as_str());
        } else if argument == "--" {
            options_ended = true;
        } else if argument == "--no-preserve-root" {
            return Err(refuse("rm --no-preserve-root", Rule::DestructiveDelete));
        } else if argument == "--recursive" || (!argument.starts_with("--") && argument.contains(['r', 'R'])) {
            recursive = true;
        }
    }
    if recursive && targets.iter().any(|target| is_precious(target, location)) {
        return Err(refuse(shown("rm", arguments), Rule::DestructiveDelete));
    }
    Ok(())
}

/// True for paths whose recursive deletion wrecks the system or the user's home.
fn is_precious(target: &str, location: Location) -> bool {
    let trimmed = target.trim_end_matches('/');
    let home = ["~", "~/*", "$HOME", "${HOME}", "$HOME/*", "${HOME}/*"];
    let everything_here = ["*", ".", "./*", ".*"];
    if trimmed.is_empty() && !target.is_empty() {
        return true;
    }
    if home.contains(&trimmed) || matches!(trimmed, ".." | "../*" | "/*" | "/.") {
        return true;
    }
    if location != Location::Elsewhere && everything_here.contains(&trimmed) {
        return true;
    }
    if let Some(below_root) = trimmed.strip_prefix('/') {
        let below_root = below_root.trim_start_matches('/');
        let top = below_root.strip_suffix("/*").unwrap_or(below_root);
        return !top.contains('/');
    }
    false
}

/// `chmod` setting the setuid or setgid bit (`+s`, `u+s`, `4755`).
fn setuid(arguments: &[String]) -> Result<(), Refusal> {
    let Some(mode) = arguments.iter().find(|argument| !argument.starts_with('-')) else {
        return Ok(());
    };
    let symbolic = mode
        .split(',')
        .any(|clause| clause.find(['+', '=']).is_some_and(|operator| clause[operator + 1..].contains('s')));
    let numeric = mode.len() >= 4
        && mode.chars().all(|digit| digit.is_digit(8))
        && mode
            .chars()
            .nth(mode.len() - 4)
            .and_then(|digit| digit.to_digit(8))
            .is_some_and(|special| special & 0o6 != 0);
    if symbolic || numeric {
        return Err(refuse(format!("chmod {mode}"), Rule::SetuidBit));
    }
    Ok(())
}

fn is_disk(path: &str) -> bool {
    path.strip_prefix("/dev/").is_some_and(|device| DISK_DEVICES.iter().any(|prefix| device.starts_with(prefix)))
}

/// Output redirections (or `tee` arguments) aimed at a disk device.
pub(crate) fn raw_disk_targets(targets: &[String]) -> Result<(), Refusal> {
    match targets.iter().find(|target| is_disk(target)) {
        Some(target) => Err(refuse(format!("> {target}"), Rule::RawDiskWrite)),
        None => Ok(()),
    }
}

/// Any word naming a process environment file.
pub(crate) fn environment_files(words: &[String]) -> Result<(), Refusal> {
    match words.iter().find(|word| word.starts_with("/proc/") && word.ends_with("/environ")) {
        Some(word) => Err(refuse(word.as_str(), Rule::EnvironmentDump)),
        None => Ok(()),
    }
}

/// A fork bomb: a function that pipes itself into itself, like `:(){ :|:& };:`.
pub(crate) fn fork_bomb(line: &str, definition: &regex::Regex) -> Result<(), Refusal> {
    for captures in definition.captures_iter(line) {
        let (Some(name), Some(body)) = (captures.get(1), captures.get(2)) else {
            continue;
        };
        let body: String = body.as_str().chars().filter(|character| !character.is_whitespace()).collect();
        if body.contains(&format!("{}|{}", name.as_str(), name.as_str())) {
            return Err(refuse(format!("{}(){{ … }}", name.as_str()), Rule::ForkBomb));
        }
    }
    Ok(())
}

/// The pattern [`fork_bomb`] looks for: a function definition, name and body captured.
pub(crate) const FUNCTION_DEFINITION: &str = r"(?s)([A-Za-z_:.][A-Za-z0-9_:.-]*)\s*\(\s*\)\s*\{(.*?)\}";

/// A download (`curl`, `wget`) piped into a shell or interpreter.
pub(crate) fn download_into_shell(commands: &[SimpleCommand]) -> Result<(), Refusal> {
    let mut downloader: Option<String> = None;
    for command in commands {
        if !command.piped_from_previous {
            downloader = None;
        }
        let Head::Command(index) = head(&command.words) else {
            continue;
        };
        let name = basename(&command.words[index]);
        if let Some(source) = &downloader
            && (SHELLS.contains(&name.as_str()) || INTERPRETERS.contains(&name.as_str()))
        {
            return Err(refuse(format!("{source} … | {name}"), Rule::DownloadIntoShell));
        }
        if matches!(name.as_str(), "curl" | "wget") {
            downloader = Some(name);
        }
    }
    Ok(())
}
