//! `squidbot skills list|show|install`; installs, done or refused, go to the audit trail.

use anyhow::{Context as _, Result, bail};
use squidbot_skills::install::GIT_TIMEOUT;
use squidbot_skills::{Discovery, InstallIsolation as _, InstallRequest, SandboxedInstall, Skill, SkillProblem};

use serde_json::json;
use squidbot_types::people::AuditKind;

use crate::cli::SkillsAction;
use crate::wiring::Environment;

/// Runs a skills action.
pub fn run(environment: &Environment, action: SkillsAction) -> Result<()> {
    match action {
        SkillsAction::List(flags) => list(environment, flags.json),
        SkillsAction::Show { name } => show(environment, &name),
        SkillsAction::Install { source, force } => install(environment, source, force),
    }
}

/// Malformed skills are skipped, never fatal: each is one warning line naming the file.
fn warn_about(problems: &[SkillProblem]) {
    for problem in problems {
        eprintln!("warning: skipped skill {problem}");
    }
}

fn discover(environment: &Environment) -> Discovery {
    let discovery = environment.skill_catalog().discover();
    warn_about(&discovery.problems);
    discovery
}

fn list(environment: &Environment, as_json: bool) -> Result<()> {
    let discovery = discover(environment);
    if as_json {
        let skills: Vec<_> = discovery.skills.iter().map(Skill::summary).collect();
        println!("{}", serde_json::to_string_pretty(&skills)?);
        return Ok(());
    }
    if discovery.skills.is_empty() {
        println!("no skills");
    }
    let status = |skill: &Skill| {
        if skill.available() {
            "available".to_owned()
        } else {
            format!("unavailable (missing {})", skill.missing.describe())
        }
    };
    let width = discovery.skills.iter().map(|skill| skill.name().len()).max().unwrap_or(0);
    let status_width = discovery.skills.iter().map(|skill| status(skill).len()).max().unwrap_or(0);
    for skill in &discovery.skills {
        println!(
            "{:<width$}  {:<9}  {:<status_width$}  {}",
            skill.name(),
            skill.source.as_str(),
            status(skill),
            skill.directory.display()
        );
    }
    for skill in &discovery.skills {
        for line in addon_lines(environment, skill) {
            println!("{}: {line}", skill.name());
        }
    }
    if !environment.config().skills.enabled {
        println!("note: skills.enabled is false, so the prompt lists none of these");
    }
    Ok(())
}

/// Where each `addons.env` variable of `skill` gets its value: the vault secret of its
/// name, set for the skill's commands in a turn that read its SKILL.md.
fn addon_lines(environment: &Environment, skill: &Skill) -> Vec<String> {
    let names = &skill.manifest.addon_env;
    if names.is_empty() {
        return Vec::new();
    }
    if !squidbot_skills::addons::gets_secrets(skill.source) {
        return names
            .iter()
            .map(|name| format!("addons env {name}: never set (a workspace skill, which the assistant can write)"))
            .collect();
    }
    let known = crate::config::vault::known_secrets(environment.config().vault.key);
    names
        .iter()
        .map(|name| match (known.get(name), known.unread()) {
            (Some(_), _) => format!("addons env {name}: from the vault, set once a turn reads SKILL.md"),
            (None, Some(reason)) => format!("addons env {name}: can't check the vault ({reason})"),
            (None, None) => format!("addons env {name}: not in the vault (squidbot secrets set {name})"),
        })
        .collect()
}

fn show(environment: &Environment, name: &str) -> Result<()> {
    let discovery = discover(environment);
    let Some(skill) = discovery.get(name) else {
        let malformed = discovery.problems.iter().any(|problem| {
            problem.path.parent().and_then(|parent| parent.file_name()).is_some_and(|file| file == name)
        });
        if malformed {
            bail!("skill {name:?} is malformed (see the warning above)");
        }
        bail!("no skill named {name:?}; `squidbot skills list` shows them");
    };
    let manifest = &skill.manifest;
    let yes_no = |flag: bool| if flag { "yes" } else { "no" };
    println!("name         {}", manifest.name);
    println!("description  {}", manifest.description);
    let overrides: Vec<&str> = skill.overrides.iter().map(|source| source.as_str()).collect();
    let replaces = if overrides.is_empty() { String::new() } else { format!(" (replaces {})", overrides.join(", ")) };
    println!("source       {}{replaces}", skill.source.as_str());
    println!("location     {}", skill.directory.display());
    if skill.available() {
        println!("available    yes");
    } else {
        println!("available    no (missing {})", skill.missing.describe());
    }
    println!("always       {}", yes_no(manifest.always));
    let requirements = &manifest.requirements;
    if !requirements.is_empty() {
        let mut parts = Vec::new();
        for (label, items) in [
            ("bins", &requirements.bins),
            ("one of", &requirements.any_bins),
            ("env", &requirements.env),
            ("os", &requirements.os),
        ] {
            if !items.is_empty() {
                parts.push(format!("{label}: {}", items.join(", ")));
            }
        }
        println!("requires     {}", parts.join("; "));
    }
    if let Some(license) = &manifest.license {
        println!("license      {license}");
    }
    if let Some(emoji) = &manifest.emoji {
        println!("emoji        {emoji}");
    }
    if let Some(key) = manifest.metadata_key {
        println!("metadata     read from metadata.{key}");
    }
    for line in addon_lines(environment, skill) {
        println!("addons       {line}");
    }
    println!();
    print!("{}", manifest.body);
    if !manifest.body.ends_with('\n') {
        println!();
    }
    Ok(())
}

fn install(environment: &Environment, source: String, force: bool) -> Result<()> {
    // Opened first: an install that can't be audited does not happen.
    let people = crate::people::open(environment)?.policy(environment.config());
    let request = InstallRequest {
        source: source.clone(),
        skills_root: environment.paths.user_skills(),
        log_file: environment.paths.logs().join("skills-install.jsonl"),
        force,
        git_timeout: GIT_TIMEOUT,
    };
    // The clone and the validation touch untrusted data: they run in the sandbox, the
    // validator as this very binary re-executed.
    let program = std::env::current_exe().context("can't find this program to run the skill validator")?;
    let isolation = SandboxedInstall::new(environment.sandbox(), program);
    if !isolation.confined() {
        eprintln!(
            "warning: the {} sandbox confines nothing here; the skill is cloned and validated unconfined (in a separate process)",
            isolation.backend()
        );
    }
    let installed = match squidbot_skills::install_with(&request, &isolation) {
        Ok(installed) => {
            people.audit_as(
                AuditKind::SkillInstall,
                "cli",
                &installed.name,
                true,
                json!({
                    "source": source,
                    "name": installed.name,
                    "directory": installed.directory.display().to_string(),
                    "replaced": installed.replaced,
                    "files": installed.files,
                    "bytes": installed.bytes,
                    "confined": installed.confined,
                    "backend": installed.backend.to_string(),
                }),
            );
            installed
        }
        Err(error) => {
            people.audit_as(
                AuditKind::SkillInstall,
                "cli",
                &source,
                false,
                json!({"source": source, "error": error.to_string()}),
            );
            return Err(error.into());
        }
    };
    let verb = if installed.replaced { "replaced" } else { "installed" };
    let confinement = if installed.confined {
        format!("validated in the {} sandbox", installed.backend)
    } else {
        format!("validated unconfined (sandbox backend {})", installed.backend)
    };
    println!(
        "{verb} skill {} in {} ({} files, {} bytes; {confinement})",
        installed.name,
        installed.directory.display(),
        installed.files,
        installed.bytes
    );
    let discovery = environment.skill_catalog().discover();
    if let Some(skill) = discovery.get(&installed.name) {
        if skill.directory != installed.directory {
            eprintln!(
                "warning: the {} skill at {} takes precedence over the one just installed",
                skill.source.as_str(),
                skill.directory.display()
            );
        } else if !skill.available() {
            eprintln!("note: {} is unavailable until it has {}", installed.name, skill.missing.describe());
        }
    }
    Ok(())
}
