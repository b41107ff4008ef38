//! Validation and installs from a directory and from git repositories made on the spot.

use std::process::Command;

use super::*;
use crate::catalog::{SkillCatalog, SkillRoots, SkillSource};

fn write_skill(directory: &Path, name: &str) {
    std::fs::create_dir_all(directory.join("scripts")).unwrap();
    std::fs::write(
        directory.join(SKILL_FILE),
        format!("---\nname: {name}\ndescription: The {name} skill.\n---\n\nSteps.\n"),
    )
    .unwrap();
    std::fs::write(directory.join("scripts/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
}

fn request(source: &Path, home: &Path) -> InstallRequest {
    InstallRequest {
        source: source.display().to_string(),
        skills_root: home.join("skills"),
        log_file: home.join("logs/skills-install.jsonl"),
        force: false,
        git_timeout: Duration::from_secs(30),
    }
}

fn problems(directory: &Path) -> Vec<String> {
    match validate_skill_dir(directory) {
        Ok(valid) => panic!("expected problems, got {valid:?}"),
        Err(problems) => problems.iter().map(ToString::to_string).collect(),
    }
}

fn log_lines(home: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(home.join("logs/skills-install.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn no_staging_left(root: &Path) {
    let hidden: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "staging left behind: {hidden:?}");
}

#[test]
fn a_good_skill_validates_with_counts() {
    let directory = tempfile::tempdir().unwrap();
    write_skill(directory.path(), "tidy");
    let valid = validate_skill_dir(directory.path()).unwrap();
    assert_eq!(valid.manifest.name, "tidy");
    assert_eq!(valid.files, 2);
    assert!(valid.bytes > 20);
}

#[cfg(unix)]
#[test]
fn symlinks_and_special_files_are_refused() {
    let directory = tempfile::tempdir().unwrap();
    write_skill(directory.path(), "linky");
    std::os::unix::fs::symlink("/etc/passwd", directory.path().join("references")).unwrap();
    std::os::unix::fs::symlink("SKILL.md", directory.path().join("scripts/inside")).unwrap();
    let found = problems(directory.path());
    assert_eq!(found.iter().filter(|text| text.contains("symbolic links are not allowed")).count(), 2, "{found:?}");
    assert!(found.iter().any(|text| text.contains("references")), "the problem names the link: {found:?}");

    let special = tempfile::tempdir().unwrap();
    write_skill(special.path(), "sockety");
    let _listener = std::os::unix::net::UnixListener::bind(special.path().join("assets.sock")).unwrap();
    let found = problems(special.path());
    assert!(found[0].contains("only regular files and directories"), "{found:?}");

    let linked_skill_file = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/etc/hostname", linked_skill_file.path().join(SKILL_FILE)).unwrap();
    let found = problems(linked_skill_file.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("symbolic links"), "{found:?}");
}

#[test]
fn size_file_count_and_depth_caps_hold() {
    let directory = tempfile::tempdir().unwrap();
    write_skill(directory.path(), "heavy");
    std::fs::write(directory.path().join("assets.bin"), vec![0_u8; MAX_SKILL_BYTES as usize + 1]).unwrap();
    assert!(problems(directory.path())[0].contains("total more than 5242880 bytes"));

    let many = tempfile::tempdir().unwrap();
    write_skill(many.path(), "many");
    for index in 0..MAX_SKILL_FILES {
        std::fs::write(many.path().join(format!("f{index}")), "x").unwrap();
    }
    assert!(problems(many.path())[0].contains("more than 500 files"));

    let deep = tempfile::tempdir().unwrap();
    write_skill(deep.path(), "deep");
    let nested = (0..=MAX_SKILL_DEPTH).fold(deep.path().to_path_buf(), |path, level| path.join(format!("d{level}")));
    std::fs::create_dir_all(nested).unwrap();
    assert!(problems(deep.path())[0].contains("nested more than 10 deep"));
}

#[test]
fn bad_names_and_missing_files_are_refused() {
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(directory.path().join(SKILL_FILE), "---\nname: ../../etc\ndescription: d\n---\n").unwrap();
    assert!(problems(directory.path())[0].contains("invalid name \"../../etc\""));
    let empty = tempfile::tempdir().unwrap();
    assert!(problems(empty.path())[0].contains("there is no SKILL.md"));
}

#[test]
fn install_from_a_directory_then_refuse_then_force() {
    let home = tempfile::tempdir().unwrap();
    let source = tempfile::tempdir().unwrap();
    let skill = source.path().join("some-folder");
    write_skill(&skill, "tidy");
    let installed = install(&request(&skill, home.path())).unwrap();
    assert_eq!(installed.name, "tidy");
    assert!(!installed.replaced);
    assert_eq!(installed.directory, home.path().join("skills/tidy"));
    assert_eq!(installed.files, 2);
    assert!(home.path().join("skills/tidy/scripts/run.sh").is_file());
    no_staging_left(&home.path().join("skills"));

    let catalog = SkillCatalog::new(SkillRoots { user: Some(home.path().join("skills")), ..SkillRoots::default() });
    let discovery = catalog.discover();
    assert_eq!(discovery.get("tidy").unwrap().source, SkillSource::User);
    assert!(discovery.problems.is_empty(), "{:?}", discovery.problems);

    let error = install(&request(&skill, home.path())).unwrap_err();
    assert!(matches!(error, InstallError::AlreadyInstalled { .. }), "{error}");
    assert!(error.to_string().contains("use --force"), "{error}");

    std::fs::write(skill.join(SKILL_FILE), "---\nname: tidy\ndescription: Version two.\n---\n").unwrap();
    let installed = install(&InstallRequest { force: true, ..request(&skill, home.path()) }).unwrap();
    assert!(installed.replaced);
    assert_eq!(installed.description, "Version two.");
    assert_eq!(catalog.discover().get("tidy").unwrap().manifest.description, "Version two.");
    no_staging_left(&home.path().join("skills"));

    let lines = log_lines(home.path());
    let results: Vec<&str> = lines.iter().map(|line| line["result"].as_str().unwrap()).collect();
    assert_eq!(results, ["installed", "failed", "replaced"]);
    assert_eq!(lines[0]["name"], "tidy");
    assert_eq!(lines[0]["source"], skill.display().to_string());
    assert!(lines[0]["time"].as_str().unwrap().contains('T'));
    assert!(lines[1]["error"].as_str().unwrap().contains("already installed"));
}

#[test]
fn invalid_and_unknown_sources_fail_cleanly_and_are_logged() {
    let home = tempfile::tempdir().unwrap();
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join(SKILL_FILE), "---\nname: broken\ndescription: [\n---\n").unwrap();
    let error = install(&request(source.path(), home.path())).unwrap_err();
    assert!(matches!(error, InstallError::Invalid { .. }), "{error}");
    assert!(error.to_string().contains("broken YAML"), "{error}");
    assert!(!home.path().join("skills/broken").exists());
    no_staging_left(&home.path().join("skills"));

    for hostile in ["/no/such/dir", "-uploadpack=evil", "ext::sh -c touch% /tmp/pwned", "ftp://example.invalid/x", ""] {
        let error =
            install(&InstallRequest { source: hostile.into(), ..request(source.path(), home.path()) }).unwrap_err();
        assert!(matches!(error, InstallError::BadSource { .. }), "{hostile}: {error}");
    }
    assert_eq!(log_lines(home.path()).len(), 6);
}

fn git(directory: &Path, arguments: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main"])
        .args(arguments)
        .current_dir(directory)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", directory)
        .status()
        .unwrap();
    assert!(status.success(), "git {arguments:?}");
}

#[test]
fn install_from_a_local_git_repository_and_a_file_url() {
    if Command::new("git").arg("--version").output().is_err() {
        eprintln!("SKIPPED install_from_a_local_git_repository_and_a_file_url: `git` is not installed");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let repository = tempfile::tempdir().unwrap();
    write_skill(repository.path(), "from-git");
    std::fs::write(repository.path().join("uncommitted.txt"), "not in the commit").unwrap();
    git(repository.path(), &["init", "--quiet"]);
    git(repository.path(), &["add", "SKILL.md", "scripts"]);
    git(repository.path(), &["commit", "--quiet", "-m", "skill"]);

    let installed = install(&request(repository.path(), home.path())).unwrap();
    assert_eq!(installed.name, "from-git");
    let directory = home.path().join("skills/from-git");
    assert!(directory.join("scripts/run.sh").is_file());
    assert!(!directory.join(".git").exists(), "the clone's .git is not copied");
    assert!(!directory.join("uncommitted.txt").exists(), "only committed files come along");
    no_staging_left(&home.path().join("skills"));

    let url = format!("file://{}", repository.path().display());
    let installed =
        install(&InstallRequest { source: url, force: true, ..request(repository.path(), home.path()) }).unwrap();
    assert!(installed.replaced);

    let missing = format!("file://{}/nothing-here", repository.path().display());
    let error = install(&InstallRequest { source: missing, ..request(repository.path(), home.path()) }).unwrap_err();
    assert!(matches!(error, InstallError::Fetch { .. }), "{error}");
    no_staging_left(&home.path().join("skills"));
}
