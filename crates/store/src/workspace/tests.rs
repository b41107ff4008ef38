//! Reading workspace files: names, symlinks, special files, and the cache of what was read.

use std::time::Duration;

use super::*;

fn workspace() -> (tempfile::TempDir, FsWorkspace) {
    let directory = tempfile::tempdir().unwrap();
    let workspace = FsWorkspace::new(directory.path().to_path_buf());
    (directory, workspace)
}

#[test]
fn reads_top_level_and_one_directory_deep() {
    let (directory, workspace) = workspace();
    fs::write(directory.path().join("SOUL.md"), "be kind").unwrap();
    fs::create_dir(directory.path().join("prompts")).unwrap();
    fs::write(directory.path().join("prompts/system.md"), "system").unwrap();
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be kind"));
    assert_eq!(workspace.read("prompts/system.md").as_deref(), Some("system"));
}

#[test]
fn refuses_names_that_are_not_plain() {
    for name in ["", ".", "./SOUL.md", "../x", "a/../SOUL.md", "/etc/passwd"] {
        assert!(check_name(name).is_err(), "{name:?}");
    }
    assert!(matches!(check_name("a/b/c.md"), Err(Refusal::TooDeep)));
    assert!(check_name("prompts/system.md").is_ok());
}

#[test]
fn refuses_missing_files_directories_and_non_utf8() {
    let (directory, workspace) = workspace();
    fs::create_dir(directory.path().join("prompts")).unwrap();
    fs::write(directory.path().join("binary.md"), [0xFF, 0xFE, 0x00]).unwrap();
    assert_eq!(workspace.read("missing.md"), None);
    assert_eq!(workspace.read("prompts"), None);
    assert_eq!(workspace.read("binary.md"), None);
}

#[test]
fn reads_nothing_when_the_root_is_missing() {
    let workspace = FsWorkspace::new(PathBuf::from("/nonexistent/squidbot-workspace"));
    assert_eq!(workspace.read("SOUL.md"), None);
}

#[cfg(unix)]
#[test]
fn refuses_symlinks_leading_outside() {
    let (directory, workspace) = workspace();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "secret").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), directory.path().join("SOUL.md")).unwrap();
    std::os::unix::fs::symlink(outside.path(), directory.path().join("prompts")).unwrap();
    assert_eq!(workspace.read("SOUL.md"), None);
    assert_eq!(workspace.read("prompts/secret"), None);
}

#[cfg(unix)]
#[test]
fn follows_symlinks_that_stay_inside() {
    let (directory, workspace) = workspace();
    fs::write(directory.path().join("real.md"), "real").unwrap();
    std::os::unix::fs::symlink("real.md", directory.path().join("SOUL.md")).unwrap();
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("real"));
}

fn opened(workspace: &FsWorkspace) -> usize {
    workspace.cache.lock().unwrap().opened
}

/// Sets a file's mtime an hour back, out of the racy window, as for a file not just
/// written.
fn age(path: &Path) {
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    File::open(path).unwrap().set_modified(hour_ago).unwrap();
}

#[test]
fn an_unchanged_file_is_read_once() {
    let (directory, workspace) = workspace();
    let soul = directory.path().join("SOUL.md");
    fs::write(&soul, "be kind").unwrap();
    age(&soul);
    fs::create_dir(directory.path().join("prompts")).unwrap();
    let system = directory.path().join("prompts/system.md");
    fs::write(&system, "system").unwrap();
    age(&system);
    for _ in 0..3 {
        assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be kind"));
        assert_eq!(workspace.read("prompts/system.md").as_deref(), Some("system"));
    }
    assert_eq!(opened(&workspace), 2);
    let clone = workspace.clone();
    assert_eq!(clone.read("SOUL.md").as_deref(), Some("be kind"));
    assert_eq!(opened(&workspace), 2, "clones share what was read");
}

#[test]
fn an_edit_is_seen_at_the_next_read() {
    let (directory, workspace) = workspace();
    let soul = directory.path().join("SOUL.md");
    fs::write(&soul, "be kind").unwrap();
    age(&soul);
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be kind"));

    fs::write(&soul, "be calm").unwrap();
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be calm"));

    // Same size with the mtime set back: the status-change time still moved.
    let modified = fs::metadata(&soul).unwrap().modified().unwrap();
    age(&soul);
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be calm"));
    let aged = fs::metadata(&soul).unwrap().modified().unwrap();
    fs::write(&soul, "be bold").unwrap();
    File::options().write(true).open(&soul).unwrap().set_modified(aged).unwrap();
    assert_ne!(modified, aged);
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be bold"));

    // Replaced by another file (a new inode) of the same size and mtime.
    let replacement = directory.path().join("replacement");
    fs::write(&replacement, "be wise").unwrap();
    File::options().write(true).open(&replacement).unwrap().set_modified(aged).unwrap();
    fs::rename(&replacement, &soul).unwrap();
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be wise"));
}

#[test]
fn a_file_just_written_is_read_again_until_its_mtime_is_old_enough() {
    let (directory, workspace) = workspace();
    fs::write(directory.path().join("SOUL.md"), "be kind").unwrap();
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be kind"));
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be kind"));
    assert_eq!(opened(&workspace), 2, "a write within the same clock tick would not move the mtime");
}

#[test]
fn a_removed_file_is_gone() {
    let (directory, workspace) = workspace();
    let soul = directory.path().join("SOUL.md");
    fs::write(&soul, "be kind").unwrap();
    age(&soul);
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be kind"));
    fs::remove_file(&soul).unwrap();
    assert_eq!(workspace.read("SOUL.md"), None);
    fs::create_dir(&soul).unwrap();
    assert_eq!(workspace.read("SOUL.md"), None, "a directory in its place");
}

#[cfg(unix)]
#[test]
fn a_cached_file_replaced_by_a_symlink_leading_out_is_refused() {
    use std::os::unix::fs::symlink;
    let (directory, workspace) = workspace();
    let root = directory.path();
    let outside = tempfile::tempdir().unwrap();
    // The same text outside, so only where the name leads tells the two apart.
    fs::write(outside.path().join("SOUL.md"), "be kind").unwrap();
    fs::write(outside.path().join("system.md"), "system").unwrap();
    for path in [outside.path().join("SOUL.md"), outside.path().join("system.md")] {
        age(&path);
    }
    fs::write(root.join("SOUL.md"), "be kind").unwrap();
    fs::create_dir(root.join("prompts")).unwrap();
    fs::write(root.join("prompts/system.md"), "system").unwrap();
    fs::write(root.join("real.md"), "real").unwrap();
    symlink("real.md", root.join("NOTES.md")).unwrap();
    for path in [root.join("SOUL.md"), root.join("prompts/system.md"), root.join("real.md")] {
        age(&path);
    }
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be kind"));
    assert_eq!(workspace.read("prompts/system.md").as_deref(), Some("system"));
    assert_eq!(workspace.read("NOTES.md").as_deref(), Some("real"));

    fs::remove_file(root.join("SOUL.md")).unwrap();
    symlink(outside.path().join("SOUL.md"), root.join("SOUL.md")).unwrap();
    assert_eq!(workspace.read("SOUL.md"), None);

    fs::rename(root.join("prompts"), root.join("old-prompts")).unwrap();
    symlink(outside.path(), root.join("prompts")).unwrap();
    assert_eq!(workspace.read("prompts/system.md"), None);

    fs::remove_file(root.join("NOTES.md")).unwrap();
    symlink(outside.path().join("SOUL.md"), root.join("NOTES.md")).unwrap();
    assert_eq!(workspace.read("NOTES.md"), None, "a symlink inside retargeted outside");
}

#[cfg(unix)]
#[test]
fn the_root_is_resolved_again_when_it_leads_elsewhere() {
    use std::os::unix::fs::symlink;
    let directory = tempfile::tempdir().unwrap();
    let [first, second] = ["first", "second"].map(|name| directory.path().join(name));
    for root in [&first, &second] {
        fs::create_dir(root).unwrap();
        fs::write(root.join("real.md"), "real").unwrap();
    }
    symlink("real.md", first.join("SOUL.md")).unwrap();
    // From the second root, this leads into the first: outside.
    symlink("../first/real.md", second.join("SOUL.md")).unwrap();
    let link = directory.path().join("workspace");
    symlink(&first, &link).unwrap();
    let workspace = FsWorkspace::new(link.clone());
    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("real"));

    fs::remove_file(&link).unwrap();
    symlink(&second, &link).unwrap();
    assert_eq!(workspace.read("SOUL.md"), None);
}

#[cfg(unix)]
#[test]
fn refuses_a_fifo_without_opening_it() {
    let (directory, workspace) = workspace();
    let fifo = directory.path().join("SOUL.md");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|status| status.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    assert_eq!(workspace.read("SOUL.md"), None);
    assert_eq!(opened(&workspace), 0);
}

/// What one turn's prompt reads: the seven bootstrap files (five present, about 2 KB
/// each) and three prompt overrides that are absent, under a root a few levels deep.
/// Run: `cargo test --release -p squidbot-store --lib -- --ignored --nocapture`.
#[test]
#[ignore = "a timing loop: run in release with --ignored --nocapture"]
fn timing_of_a_turns_workspace_reads() {
    let directory = tempfile::tempdir().unwrap();
    let root = directory.path().join("home").join("user").join(".squidbot").join("workspace");
    fs::create_dir_all(root.join("prompts")).unwrap();
    for name in ["SOUL.md", "IDENTITY.md", "AGENTS.md", "USER.md", "TOOLS.md"] {
        fs::write(root.join(name), format!("# {name}\n\n{}", "Some guidance for the assistant.\n".repeat(60))).unwrap();
    }
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for entry in fs::read_dir(&root).unwrap() {
        File::open(entry.unwrap().path()).unwrap().set_modified(hour_ago).unwrap();
    }
    let names = [
        "prompts/system.md",
        "SOUL.md",
        "IDENTITY.md",
        "AGENTS.md",
        "USER.md",
        "TOOLS.md",
        "ENVIRONMENT.md",
        "MEMORY.md",
        "prompts/delegation.md",
        "prompts/runtime.md",
    ];
    let workspace = FsWorkspace::new(root);
    // This thread's CPU time, to the nanosecond: on a shared machine wall time also
    // counts the time other guests hold the CPU.
    let cpu = || {
        let schedstat = fs::read_to_string("/proc/thread-self/schedstat").unwrap();
        std::time::Duration::from_nanos(schedstat.split_whitespace().next().unwrap().parse().unwrap())
    };
    let turns = 20_000;
    let started = std::time::Instant::now();
    let cpu_before = cpu();
    for _ in 0..turns {
        let present = names.iter().filter_map(|name| workspace.read(name)).count();
        assert_eq!(std::hint::black_box(present), 5);
    }
    println!(
        "workspace reads of one turn: {:?} wall and {:?} cpu",
        started.elapsed() / turns,
        (cpu() - cpu_before) / turns
    );
}
