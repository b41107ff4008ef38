//! Skills end to end: the bundled set with availability, installing, a broken skill
//! skipped with a warning, and the `<skills>` block in the prompt the model receives.

use std::path::Path;

use squidbot_testkit::{Reply, ScriptedLlm};

use crate::harness::{Home, messages};

fn skills_json(stdout: &str) -> Vec<serde_json::Value> {
    serde_json::from_str::<serde_json::Value>(stdout).expect("JSON output").as_array().cloned().expect("an array")
}

fn find<'a>(skills: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    skills.iter().find(|skill| skill["name"] == name).unwrap_or_else(|| panic!("no {name} in {skills:#?}"))
}

fn write_skill(directory: &Path, name: &str, description: &str) {
    std::fs::create_dir_all(directory.join("references")).unwrap();
    std::fs::write(
        directory.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n\nDo it well.\n"),
    )
    .unwrap();
    std::fs::write(directory.join("references/notes.md"), "More detail.\n").unwrap();
}

/// A PATH holding only a `git` that is never run: availability is decided by looking.
fn path_with_only_git(home: &Home) -> String {
    let bin = home.path().join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let git = bin.join("git");
    std::fs::write(&git, "#!/bin/sh\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_bundled_skills_with_availability_and_show_prints_the_body() {
    let home = Home::new();
    let path = path_with_only_git(&home);
    let run = home.run_with(&["skills", "list", "--json"], &[("PATH", &path)]).await.success();
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    let skills = skills_json(&run.stdout);
    for name in [
        "memory",
        "cron",
        "github",
        "git",
        "python",
        "web-search",
        "summarize",
        "research",
        "code-review",
        "skill-creator",
    ] {
        let skill = find(&skills, name);
        assert_eq!(skill["source"], "bundled", "{skill}");
        let location = Path::new(skill["location"].as_str().unwrap());
        assert!(location.starts_with(home.path().join("bundled-skills")), "{skill}");
        assert!(location.join("SKILL.md").is_file(), "written out for the file tools: {skill}");
    }
    assert_eq!(find(&skills, "git")["available"], true);
    let github = find(&skills, "github");
    assert_eq!(github["available"], false);
    assert_eq!(github["missing"]["bins"], serde_json::json!(["gh"]));
    assert_eq!(find(&skills, "python")["missing"]["bins"], serde_json::json!(["python3"]));
    assert_eq!(find(&skills, "memory")["always"], true);

    let run = home.run_with(&["skills", "list"], &[("PATH", &path)]).await.success();
    let github_line = run.stdout.lines().find(|line| line.starts_with("github ")).unwrap();
    assert!(github_line.contains("bundled") && github_line.contains("unavailable (missing bins: gh)"), "{github_line}");

    let run = home.run_with(&["skills", "show", "github"], &[("PATH", &path)]).await.success();
    assert!(run.stdout.contains("available    no (missing bins: gh)"), "{}", run.stdout);
    assert!(run.stdout.contains("# GitHub via `gh`"), "{}", run.stdout);
    let run = home.run(&["skills", "show", "nope"]).await.failure();
    assert!(run.stderr.contains("no skill named \"nope\""), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_from_a_directory_then_list_shows_it_and_a_second_install_needs_force() {
    let home = Home::new();
    let source = tempfile::tempdir().unwrap();
    let skill = source.path().join("my-weekly-report");
    write_skill(&skill, "weekly-report", "Write the weekly report.");
    let source_text = skill.display().to_string();
    let run = home.run(&["skills", "install", &source_text]).await.success();
    assert!(run.stdout.contains("installed skill weekly-report"), "{}", run.stdout);
    let installed = home.path().join("skills/weekly-report");
    assert!(installed.join("references/notes.md").is_file());

    let skills = skills_json(&home.run(&["skills", "list", "--json"]).await.success().stdout);
    let listed = find(&skills, "weekly-report");
    assert_eq!(listed["source"], "user");
    assert_eq!(listed["available"], true);
    assert_eq!(listed["location"], installed.display().to_string());

    let run = home.run(&["skills", "install", &source_text]).await.failure();
    assert!(run.stderr.contains("already installed") && run.stderr.contains("--force"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "one-line error: {}", run.stderr);
    home.run(&["skills", "install", &source_text, "--force"]).await.success();

    std::os::unix::fs::symlink("/etc/passwd", skill.join("references/passwd")).unwrap();
    let run = home.run(&["skills", "install", &source_text, "--force"]).await.failure();
    assert!(run.stderr.contains("symbolic links are not allowed"), "{}", run.stderr);
    assert!(!installed.join("references/passwd").exists());

    let log = std::fs::read_to_string(home.path().join("logs/skills-install.jsonl")).unwrap();
    let results: Vec<String> = log
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["result"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results, ["installed", "failed", "replaced", "failed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_skill_is_skipped_with_a_warning_naming_the_file() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let skills = home.workspace().join("skills");
    write_skill(&skills.join("fine"), "fine", "A fine skill.");
    let broken = skills.join("broken").join("SKILL.md");
    std::fs::create_dir_all(broken.parent().unwrap()).unwrap();
    std::fs::write(&broken, "---\nname: broken\ndescription: [never closed\n---\nbody\n").unwrap();

    let run = home.run(&["skills", "list", "--json"]).await.success();
    let warning = run.stderr.lines().find(|line| line.contains("warning")).unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(warning.contains(&broken.display().to_string()) && warning.contains("broken YAML"), "{warning}");
    let listed = skills_json(&run.stdout);
    assert!(listed.iter().all(|skill| skill["name"] != "broken"));
    assert_eq!(find(&listed, "fine")["source"], "workspace");

    // The agent still answers; the prompt lists the good skill only.
    server.push(Reply::text("fine"));
    let run = home.run(&["agent", "-m", "hi"]).await.success();
    assert_eq!(run.stdout, "fine\n");
    assert!(run.stderr.contains(&broken.display().to_string()), "{}", run.stderr);
    let system = messages(&server.requests()[0].body)[0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("<name>fine</name>"), "{system}");
    assert!(!system.contains("<name>broken</name>"), "{system}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_prompt_carries_the_skills_block_and_always_on_bodies() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    write_skill(&home.workspace().join("skills/deploy"), "deploy", "Deploy <the> app & check it.");
    server.push(Reply::text("ok"));
    home.run(&["agent", "-m", "hello"]).await.success();
    let system = messages(&server.requests()[0].body)[0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("# Skills\n\n"), "{system}");
    assert!(system.contains("<skills>\n  <skill available="), "{system}");
    assert!(
        system.contains("<name>deploy</name>\n    <description>Deploy &lt;the&gt; app &amp; check it.</description>")
    );
    let location = home.workspace().join("skills/deploy").display().to_string();
    assert!(system.contains(&format!("<location>{location}</location>")), "{system}");
    assert!(system.contains("<name>skill-creator</name>"), "{system}");
    assert!(system.contains("# Skill: memory (always on;"), "{system}");
    assert!(system.contains("memory_recall"), "the memory skill's body is injected: {system}");
    assert!(!system.contains("<name>memory</name>"), "an injected skill is not listed twice");
    let skills_at = system.find("<skills>").unwrap();
    let runtime_at = system.find("## Runtime").unwrap();
    assert!(skills_at < runtime_at, "the runtime line stays last");

    // A skill written between turns is in the next prompt; disabling skills removes all.
    write_skill(&home.workspace().join("skills/later"), "later", "Added later.");
    server.push(Reply::text("ok"));
    home.run(&["agent", "-m", "again"]).await.success();
    let system = messages(&server.requests()[1].body)[0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("<name>later</name>"), "{system}");
    home.append_config("[skills]\nenabled = false\n");
    server.push(Reply::text("ok"));
    home.run(&["agent", "-m", "third"]).await.success();
    let system = messages(&server.requests()[2].body)[0]["content"].as_str().unwrap().to_owned();
    assert!(!system.contains("<skills>") && !system.contains("Skill: memory"), "{system}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundled_skill_files_are_readable_but_not_writable_through_the_file_tools() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let skill = home.path().join(format!("bundled-skills/{}/summarize/SKILL.md", env!("CARGO_PKG_VERSION")));
    let skill = skill.display().to_string();
    server.push(Reply::tool_call("read_file", serde_json::json!({"path": skill})));
    server.push(Reply::tool_call("write_file", serde_json::json!({"path": skill, "content": "overwritten"})));
    server.push(Reply::text("read it"));
    home.run(&["agent", "-m", "how do I summarize?"]).await.success();
    let results = crate::harness::tool_results(&server.requests()[2].body);
    let text = serde_json::to_string(&results).unwrap();
    assert!(text.contains("name: summarize"), "the skill's file was read: {text}");
    assert!(text.contains("can't write") && text.contains("escapes the workspace"), "{text}");
    assert!(std::fs::read_to_string(&skill).unwrap().contains("name: summarize"));
}

/// Runs `git` in `directory`, failing the test when it fails.
fn git(directory: &Path, arguments: &[&str]) {
    let output = std::process::Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main"])
        .args(arguments)
        .current_dir(directory)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {arguments:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// The install log's entries.
fn install_log(home: &Home) -> Vec<serde_json::Value> {
    std::fs::read_to_string(home.path().join("logs/skills-install.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// A home whose `[sandbox]` names `backend`, or `None` (announced) when the environment
/// declares that backend unavailable on this machine.
fn home_with_backend(backend: &str) -> Option<Home> {
    let declared = std::env::var("SQUIDBOT_TEST_SANDBOX_UNAVAILABLE").unwrap_or_default();
    if declared.split(',').any(|name| name.trim() == backend) {
        eprintln!("NOT TESTED: SQUIDBOT_TEST_SANDBOX_UNAVAILABLE declares the {backend} sandbox unavailable");
        return None;
    }
    let home = Home::new();
    home.write_config(&format!("[sandbox]\nbackend = \"{backend}\"\n"));
    Some(home)
}

/// Installs from a local git repository (as a path and as a `file://` URL) and from a
/// local directory, the clone and the validation confined by `backend`; then a skill
/// with a symlink pointing out and a malformed one are refused with nothing copied.
async fn installs_are_cloned_and_validated_in_the_sandbox(backend: &str) {
    let Some(home) = home_with_backend(backend) else { return };
    let sources = tempfile::tempdir().unwrap();
    let repository = sources.path().join("repo");
    write_skill(&repository, "from-git", "Installed from a repository.");
    git(&repository, &["init", "--quiet"]);
    git(&repository, &["add", "."]);
    git(&repository, &["commit", "--quiet", "-m", "skill"]);
    let run = home.run(&["skills", "install", &repository.display().to_string()]).await.success();
    let sandboxed = format!("validated in the {backend} sandbox");
    assert!(run.stdout.contains("installed skill from-git") && run.stdout.contains(&sandboxed), "{}", run.stdout);
    let installed = home.path().join("skills/from-git");
    assert!(installed.join("references/notes.md").is_file());
    assert!(!installed.join(".git").exists(), "the clone's .git is never copied");
    let url = format!("file://{}", repository.display());
    let run = home.run(&["skills", "install", &url, "--force"]).await.success();
    assert!(run.stdout.contains("replaced skill from-git") && run.stdout.contains(&sandboxed), "{}", run.stdout);

    let directory = sources.path().join("plain");
    write_skill(&directory, "from-dir", "Installed from a directory.");
    let run = home.run(&["skills", "install", &directory.display().to_string()]).await.success();
    assert!(run.stdout.contains("installed skill from-dir") && run.stdout.contains(&sandboxed), "{}", run.stdout);
    assert!(home.path().join("skills/from-dir/SKILL.md").is_file());

    let linked = sources.path().join("linked");
    write_skill(&linked, "linked", "Points out.");
    std::os::unix::fs::symlink(home.path().join("config.toml"), linked.join("references/config")).unwrap();
    let run = home.run(&["skills", "install", &linked.display().to_string()]).await.failure();
    assert!(run.stderr.contains("references/config: symbolic links are not allowed in a skill"), "{}", run.stderr);
    assert!(!home.path().join("skills/linked").exists(), "nothing of it is copied");

    let malformed = sources.path().join("malformed");
    std::fs::create_dir_all(&malformed).unwrap();
    std::fs::write(malformed.join("SKILL.md"), "---\nname: [unclosed\ndescription: broken\n---\nbody\n").unwrap();
    let run = home.run(&["skills", "install", &malformed.display().to_string()]).await.failure();
    assert!(run.stderr.contains("SKILL.md") && run.stderr.contains("YAML"), "{}", run.stderr);
    assert!(!home.path().join("skills/malformed").exists());
    let staging: Vec<_> = std::fs::read_dir(home.path().join("skills"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(".staging"))
        .collect();
    assert!(staging.is_empty(), "staging left behind: {staging:?}");

    let log = install_log(&home);
    let results: Vec<&str> = log.iter().map(|entry| entry["result"].as_str().unwrap()).collect();
    assert_eq!(results, ["installed", "replaced", "installed", "failed", "failed"]);
    for entry in &log {
        assert_eq!(entry["sandbox"], backend, "{entry}");
        assert_eq!(entry["confined"], true, "{entry}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_are_cloned_and_validated_in_the_landlock_sandbox() {
    installs_are_cloned_and_validated_in_the_sandbox("landlock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_are_cloned_and_validated_in_the_bubblewrap_sandbox() {
    installs_are_cloned_and_validated_in_the_sandbox("bubblewrap").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_sandbox_the_validator_still_runs_apart_and_says_it_was_unconfined() {
    let home = Home::new();
    home.write_config("[sandbox]\nbackend = \"none\"\n");
    let source = tempfile::tempdir().unwrap();
    write_skill(source.path(), "loose", "Installed without a sandbox.");
    let run = home.run(&["skills", "install", &source.path().display().to_string()]).await.success();
    assert!(run.stdout.contains("validated unconfined (sandbox backend none)"), "{}", run.stdout);
    assert!(run.stderr.contains("unconfined"), "{}", run.stderr);
    let log = install_log(&home);
    assert_eq!((&log[0]["sandbox"], &log[0]["confined"]), (&serde_json::json!("none"), &serde_json::json!(false)));
}
