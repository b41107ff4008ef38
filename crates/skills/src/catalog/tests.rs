//! Discovery: precedence, the mtime cache, malformed skills, availability.

use std::time::{Duration, SystemTime};

use super::*;

fn write_skill(root: &Path, name: &str, description: &str, extra: &str) -> PathBuf {
    let directory = root.join(name);
    std::fs::create_dir_all(&directory).unwrap();
    let file = directory.join(SKILL_FILE);
    std::fs::write(&file, format!("---\nname: {name}\ndescription: {description}\n{extra}---\n\nBody of {name}.\n"))
        .unwrap();
    file
}

/// Moves a file's or directory's mtime an hour back, out of the racy window.
/// A skill `good` and a skill `broken` with broken YAML under `root`; the broken file.
fn good_and_broken(root: &Path) -> PathBuf {
    write_skill(root, "good", "fine", "");
    let broken = root.join("broken").join(SKILL_FILE);
    std::fs::create_dir_all(broken.parent().unwrap()).unwrap();
    std::fs::write(&broken, "---\nname: broken\ndescription: [oops\n---\n").unwrap();
    broken
}

fn age(path: &Path) {
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::open(path).unwrap().set_modified(hour_ago).unwrap();
}

struct FakeHost;

impl Host for FakeHost {
    fn has_bin(&self, name: &str) -> bool {
        name == "present"
    }
    fn has_env(&self, name: &str) -> bool {
        name == "SET_VAR"
    }
    fn os(&self) -> &str {
        "linux"
    }
}

fn catalog(roots: SkillRoots) -> SkillCatalog {
    SkillCatalog::new(roots).with_host(Arc::new(FakeHost))
}

#[test]
fn later_sources_replace_earlier_ones_by_name() {
    let directory = tempfile::tempdir().unwrap();
    let base = directory.path();
    let [bundled, extra_one, extra_two, user, group, workspace] =
        ["bundled", "extra1", "extra2", "user", "group", "workspace"].map(|name| base.join(name));
    write_skill(&extra_one, "shared", "from extra one", "");
    write_skill(&extra_two, "shared", "from extra two", "");
    write_skill(&user, "shared", "from user", "");
    write_skill(&user, "mine", "only in user", "");
    write_skill(&group, "shared", "from group", "");
    write_skill(&workspace, "git", "workspace git", "");
    let catalog = catalog(SkillRoots {
        bundled: Some(bundled.clone()),
        extra: vec![extra_one, extra_two],
        user: Some(user),
        workspace: Some(workspace.clone()),
    });
    let discovery = catalog.discover();
    assert!(discovery.problems.is_empty(), "{:?}", discovery.problems);
    let shared = discovery.get("shared").unwrap();
    assert_eq!(shared.manifest.description, "from user");
    assert_eq!(shared.source, SkillSource::User);
    assert_eq!(shared.overrides, [SkillSource::Extra, SkillSource::Extra]);
    let git = discovery.get("git").unwrap();
    assert_eq!(git.source, SkillSource::Workspace);
    assert_eq!(git.overrides, [SkillSource::Bundled]);
    assert_eq!(git.directory, workspace.join("git"));
    let memory = discovery.get("memory").unwrap();
    assert_eq!(memory.source, SkillSource::Bundled);
    assert!(memory.file().starts_with(&bundled), "bundled skills are readable files: {}", memory.file().display());
    assert!(memory.file().is_file());

    let grouped = catalog.discover_with_group(&group);
    assert_eq!(grouped.get("shared").unwrap().manifest.description, "from group");
    assert_eq!(grouped.get("shared").unwrap().source, SkillSource::Group);
    let absent_group = catalog.discover_with_group(&base.join("no-such-group"));
    assert_eq!(absent_group.get("shared").unwrap().source, SkillSource::User);
    let names: Vec<&str> = discovery.skills.iter().map(Skill::name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "skills come sorted by name");
}

#[test]
fn unchanged_skills_come_from_the_cache_and_a_new_mtime_is_picked_up() {
    let directory = tempfile::tempdir().unwrap();
    let root = directory.path().join("skills");
    let file = write_skill(&root, "notes", "first", "");
    age(&file);
    age(&root);
    let catalog = catalog(SkillRoots { workspace: Some(root.clone()), ..SkillRoots::default() });
    let first = catalog.discover();
    let second = catalog.discover();
    assert!(Arc::ptr_eq(&first.skills[0].manifest, &second.skills[0].manifest), "parsed once");

    // Same size, same mtime: the cache is trusted (this is what makes it cheap).
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    std::fs::write(&file, "---\nname: notes\ndescription: other\n---\n\nBody of notes.\n").unwrap();
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(modified).unwrap();
    assert_eq!(catalog.discover().skills[0].manifest.description, "first");

    // A new mtime is a change.
    age(&file);
    assert_eq!(catalog.discover().skills[0].manifest.description, "other");

    // A skill written while running appears at the next call.
    write_skill(&root, "fresh", "written just now", "");
    let discovery = catalog.discover();
    assert_eq!(discovery.get("fresh").unwrap().manifest.description, "written just now");

    // A SKILL.md added to an existing directory too (the root's mtime does not move).
    std::fs::create_dir(root.join("late")).unwrap();
    age(&root);
    assert!(catalog.discover().get("late").is_none());
    let late = write_skill(&root, "late", "added later", "");
    age(&late);
    assert_eq!(catalog.discover().get("late").unwrap().manifest.description, "added later");

    // And removing one makes it disappear.
    std::fs::remove_dir_all(root.join("fresh")).unwrap();
    assert!(catalog.discover().get("fresh").is_none());
}

#[test]
fn malformed_skills_are_skipped_with_a_problem_naming_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let root = directory.path().join("skills");
    let broken = good_and_broken(&root);
    let mismatch = write_skill(&root, "dirname", "d", "").parent().unwrap().join(SKILL_FILE);
    std::fs::write(&mismatch, "---\nname: othername\ndescription: d\n---\n").unwrap();
    std::fs::create_dir_all(root.join("no-skill-file")).unwrap();
    write_skill(&root.join(".hidden"), "secret", "d", "");
    std::fs::create_dir_all(root.join("Bad Name")).unwrap();
    std::fs::write(root.join("Bad Name").join(SKILL_FILE), "---\nname: Bad Name\ndescription: d\n---\n").unwrap();
    for path in [&broken, &mismatch] {
        age(path);
    }
    let catalog = catalog(SkillRoots { workspace: Some(root.clone()), ..SkillRoots::default() });
    let discovery = catalog.discover();
    let names: Vec<&str> = discovery.skills.iter().map(Skill::name).collect();
    assert_eq!(names, ["good"]);
    let problems: Vec<String> = discovery.problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems.iter().any(|text| text.starts_with(&broken.display().to_string()) && text.contains("broken YAML"))
    );
    assert!(problems.iter().any(|text| text.contains("\"othername\" does not match its directory \"dirname\"")));
    assert!(problems.iter().any(|text| text.contains("invalid name \"Bad Name\"")));
    assert_eq!(discovery.new_problems.len(), 3);
    let again = catalog.discover();
    assert_eq!(again.problems.len(), 3, "still reported");
    assert!(again.new_problems.iter().all(|problem| problem.path != broken), "but not new: {:?}", again.new_problems);

    std::fs::write(directory.path().join("not-a-dir"), "x").unwrap();
    let file_root = catalog_with_workspace(directory.path().join("not-a-dir"));
    let first = file_root.discover();
    assert!(first.problems[0].to_string().contains("not a directory"));
    assert_eq!(first.new_problems.len(), 1);
    let second = file_root.discover();
    assert_eq!((second.problems.len(), second.new_problems.len()), (1, 0), "reported once, listed always");
}

/// Waits until the catalog's flight state satisfies `condition`.
fn wait_for_flights(catalog: &SkillCatalog, condition: impl Fn(&FlightState) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !condition(&catalog.flights.state.lock().unwrap()) {
        assert!(std::time::Instant::now() < deadline, "the flight state never got there");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn calls_arriving_during_a_discovery_share_the_next_one() {
    let directory = tempfile::tempdir().unwrap();
    let root = directory.path().join("skills");
    let broken = good_and_broken(&root);
    // Out of the racy window, so the second discovery takes the file from the cache.
    age(&broken);
    let catalog = catalog_with_workspace(root);
    std::thread::scope(|scope| {
        // Holding the cache stands in for a slow discovery.
        let cache = catalog.cache.lock().unwrap();
        let first = scope.spawn(|| catalog.discover());
        wait_for_flights(&catalog, |state| state.running.len() == 1);
        let later: Vec<_> = (0..3).map(|_| scope.spawn(|| catalog.discover())).collect();
        wait_for_flights(&catalog, |state| state.waiting == 3);
        drop(cache);
        let mut results = vec![first.join().unwrap()];
        results.extend(later.into_iter().map(|call| call.join().unwrap()));
        // The running one could have missed a change made before the later calls arrived,
        // so they need one more discovery, and one is enough for all three.
        assert_eq!(catalog.flights.state.lock().unwrap().started, 2);
        for result in &results {
            assert_eq!(result.skills.iter().map(Skill::name).collect::<Vec<_>>(), ["good"]);
            assert_eq!(result.problems.len(), 1);
        }
        let reported: usize = results.iter().map(|result| result.new_problems.len()).sum();
        assert_eq!(reported, 1, "a new problem is reported by one call only");
    });
    let state = catalog.flights.state.lock().unwrap();
    assert!(state.running.is_empty() && state.waiting == 0);
}

fn catalog_with_workspace(root: PathBuf) -> SkillCatalog {
    catalog(SkillRoots { workspace: Some(root), ..SkillRoots::default() })
}

#[test]
fn availability_names_missing_bins_and_env() {
    let directory = tempfile::tempdir().unwrap();
    let root = directory.path().join("skills");
    write_skill(&root, "ready", "d", "requires:\n  bins: [present]\n  env: [SET_VAR]\n");
    write_skill(&root, "needs-tools", "d", "requires:\n  bins: [present, absent]\n  env: [UNSET_VAR]\n");
    write_skill(&root, "claw", "d", "metadata: {\"openclaw\": {\"requires\": {\"bins\": [\"clawbin\"]}}}\n");
    let discovery = catalog_with_workspace(root).discover();
    assert!(discovery.get("ready").unwrap().available());
    let needs = discovery.get("needs-tools").unwrap();
    assert!(!needs.available());
    assert_eq!(needs.missing.bins, ["absent"]);
    assert_eq!(needs.missing.env, ["UNSET_VAR"]);
    assert_eq!(discovery.get("claw").unwrap().missing.bins, ["clawbin"]);
}

#[test]
fn every_bundled_skill_parses_with_its_directory_name_and_declares_its_bins() {
    let directory = tempfile::tempdir().unwrap();
    let bundled = directory.path().join("bundled");
    let discovery = catalog(SkillRoots { bundled: Some(bundled.clone()), ..SkillRoots::default() }).discover();
    assert!(discovery.problems.is_empty(), "{:?}", discovery.problems);
    assert_eq!(discovery.skills.len(), crate::bundled::BUNDLED.len());
    for skill in crate::bundled::BUNDLED {
        let manifest = parse_embedded(skill.text, skill.name);
        assert_eq!(manifest.name, skill.name);
        assert!(validate_name_ok(skill.name));
        let found = discovery.get(skill.name).unwrap();
        assert_eq!(found.directory, bundled.join(skill.name));
        assert!(found.manifest.body.len() > 200, "{} has a real body", skill.name);
    }
    for (name, bin) in [("github", "gh"), ("git", "git"), ("python", "python3")] {
        assert_eq!(discovery.get(name).unwrap().manifest.requirements.bins, [bin], "{name} declares {bin}");
    }
    let always: Vec<&str> = discovery.skills.iter().filter(|skill| skill.manifest.always).map(Skill::name).collect();
    assert_eq!(always, ["memory"]);
    // Written read-only, and a second materialization leaves them alone.
    let memory = bundled.join("memory").join(SKILL_FILE);
    assert!(std::fs::metadata(&memory).unwrap().permissions().readonly());
    crate::bundled::materialize(&bundled).unwrap();
}

fn parse_embedded(text: &str, name: &str) -> Manifest {
    crate::manifest::parse_skill(text).unwrap_or_else(|problem| panic!("bundled {name}: {problem}"))
}

fn validate_name_ok(name: &str) -> bool {
    crate::manifest::validate_name(name).is_ok()
}

#[test]
fn bundled_skills_mention_only_real_tools() {
    let known = [
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "grep",
        "find",
        "exec",
        "memory_save",
        "memory_recall",
        "memory_delete",
        "memory_write",
        "web_fetch",
        "web_search",
        "cron_add",
        "cron_list",
        "cron_remove",
        "cron_pause",
        "cron_resume",
    ];
    for skill in crate::bundled::BUNDLED {
        for word in skill.text.split(|character: char| !(character.is_ascii_alphanumeric() || character == '_')) {
            // `cron_*` names the family, not a tool.
            let looks_like_tool = word.contains('_')
                && !word.ends_with('_')
                && word.chars().all(|character| character.is_ascii_lowercase() || character == '_')
                && ["memory_", "cron_", "web_", "_file", "_dir"].iter().any(|part| word.contains(part));
            assert!(!looks_like_tool || known.contains(&word), "{} mentions unknown tool {word}", skill.name);
        }
    }
}

#[test]
fn an_unchanged_discovery_is_handed_out_again_and_an_edit_is_seen_at_the_next_call() {
    let directory = tempfile::tempdir().unwrap();
    let root = directory.path().join("skills");
    let notes = write_skill(&root, "notes", "first", "");
    write_skill(&root, "plain", "plain", "");
    for path in [&notes, &root.join("plain").join(SKILL_FILE), &root] {
        age(path);
    }
    let catalog = catalog_with_workspace(root.clone());
    let first = catalog.shared(&ContextSkills::default());
    let second = catalog.shared(&ContextSkills::default());
    assert!(Arc::ptr_eq(&first.discovery, &second.discovery), "nothing rebuilt");
    assert!(Arc::ptr_eq(&catalog.unchanged(&ContextSkills::default(), usize::MAX).unwrap(), &first.discovery));
    assert!(catalog.unchanged(&ContextSkills::default(), 2).is_none(), "three inputs are more than two stats");

    std::fs::write(&notes, "---\nname: notes\ndescription: second\n---\n").unwrap();
    assert!(catalog.unchanged(&ContextSkills::default(), usize::MAX).is_none());
    let edited = catalog.shared(&ContextSkills::default());
    assert_eq!(edited.discovery.get("notes").unwrap().manifest.description, "second");
    assert!(Arc::ptr_eq(
        &edited.discovery.get("plain").unwrap().manifest,
        &first.discovery.get("plain").unwrap().manifest
    ));

    // A group's discovery is kept apart from the one without a group.
    let group = directory.path().join("group");
    write_skill(&group, "grouped", "in the group", "");
    assert!(catalog.shared(&ContextSkills::group(&group)).discovery.get("grouped").is_some());
    assert!(catalog.shared(&ContextSkills::default()).discovery.get("grouped").is_none());

    std::fs::remove_dir_all(root.join("plain")).unwrap();
    assert!(catalog.shared(&ContextSkills::default()).discovery.get("plain").is_none());
}

/// Answers whether `tool` is installed as told.
struct SwitchHost(std::sync::atomic::AtomicBool);

impl Host for SwitchHost {
    fn has_bin(&self, name: &str) -> bool {
        name == "tool" && self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn has_env(&self, _name: &str) -> bool {
        false
    }
    fn os(&self) -> &str {
        "linux"
    }
}

#[test]
fn requirement_checks_are_trusted_for_a_second() {
    let directory = tempfile::tempdir().unwrap();
    let root = directory.path().join("skills");
    let file = write_skill(&root, "needs-tool", "d", "requires:\n  bins: [tool]\n");
    age(&file);
    age(&root);
    let host = Arc::new(SwitchHost(std::sync::atomic::AtomicBool::new(false)));
    let catalog =
        SkillCatalog::new(SkillRoots { workspace: Some(root), ..SkillRoots::default() }).with_host(host.clone());
    assert!(!catalog.discover().get("needs-tool").unwrap().available());
    host.0.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(!catalog.discover().get("needs-tool").unwrap().available(), "installed a moment ago");

    // A second later the checks run again.
    let mut latest = catalog.latest.lock().unwrap();
    let snapshot = latest.get_mut(&ContextSkills::default()).unwrap();
    let older = snapshot::Snapshot {
        discovery: snapshot.discovery.clone(),
        inputs: std::mem::take(&mut Arc::get_mut(snapshot).unwrap().inputs),
        checked_at: Instant::now() - snapshot::REQUIREMENTS_TTL,
    };
    *snapshot = Arc::new(older);
    drop(latest);
    assert!(catalog.discover().get("needs-tool").unwrap().available());
}

#[test]
fn a_skill_just_written_is_parsed_again_only_until_its_mtime_is_old_enough() {
    let directory = tempfile::tempdir().unwrap();
    let root = directory.path().join("skills");
    let file = write_skill(&root, "fresh", "just written", "");
    let broken = root.join("broken").join(SKILL_FILE);
    std::fs::create_dir_all(broken.parent().unwrap()).unwrap();
    std::fs::write(&broken, "---\nname: broken\ndescription: [oops\n---\n").unwrap();
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    let catalog = catalog_with_workspace(root);
    let first = catalog.discover();
    let second = catalog.discover();
    assert!(
        !Arc::ptr_eq(&first.skills[0].manifest, &second.skills[0].manifest),
        "a write within the same clock tick would not move the mtime"
    );
    assert_eq!(
        (first.new_problems.len(), second.new_problems.len()),
        (1, 0),
        "read again, but broken the same way: reported once"
    );
    if modified.duration_since(SystemTime::UNIX_EPOCH).unwrap().subsec_nanos() == 0 {
        eprintln!("skipped the rest: this filesystem keeps whole seconds");
        return;
    }
    std::thread::sleep(Duration::from_millis(60));
    let settled = catalog.discover();
    let again = catalog.shared(&ContextSkills::default());
    assert!(Arc::ptr_eq(&settled.skills[0].manifest, &again.discovery.skills[0].manifest), "parsed once more");
    assert!(Arc::ptr_eq(&again.discovery, &catalog.shared(&ContextSkills::default()).discovery));
}
