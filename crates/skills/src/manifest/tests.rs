//! Parsing SKILL.md: good frontmatter of each flavour, and every kind of bad input.

use super::*;

fn parse(text: &str) -> Manifest {
    parse_skill(text).unwrap_or_else(|problem| panic!("{problem}"))
}

fn problem(text: &str) -> String {
    match parse_skill(text) {
        Ok(manifest) => panic!("expected a problem, parsed {manifest:?}"),
        Err(kind) => kind.to_string(),
    }
}

#[test]
fn squidbot_frontmatter_reads_every_field() {
    let manifest = parse(
        "---\nname: github\ndescription: \"Interact with GitHub: PRs, issues, CI.\"\nalways: false\n\
         requires:\n  bins: [gh]\n  env: []\nlicense: MIT\nmetadata: {\"squidbot\": {\"emoji\": \"🐙\"}}\n\
         addons:\n  packages:\n    - name: gh\n      source: apt\n---\n\n# GitHub\n\nUse gh.\n",
    );
    assert_eq!(manifest.name, "github");
    assert_eq!(manifest.description, "Interact with GitHub: PRs, issues, CI.");
    assert!(!manifest.always);
    assert_eq!(manifest.requirements.bins, ["gh"]);
    assert!(manifest.requirements.env.is_empty());
    assert_eq!(manifest.license.as_deref(), Some("MIT"));
    assert_eq!(manifest.emoji.as_deref(), Some("🐙"));
    assert_eq!(manifest.metadata_key, Some("squidbot"));
    assert_eq!(manifest.addons.as_ref().unwrap()["packages"][0]["name"], "gh");
    assert!(manifest.addon_env.is_empty());
    assert_eq!(manifest.body, "# GitHub\n\nUse gh.\n");
}

#[test]
fn openclaw_metadata_as_a_json_line_supplies_requirements_and_always() {
    let manifest = parse(
        "---\nname: weather\ndescription: Get the weather.\n\
         metadata: '{\"openclaw\": {\"emoji\": \"☔\", \"always\": true, \"os\": [\"linux\", \"darwin\"], \
         \"requires\": {\"bins\": [\"curl\"], \"anyBins\": [\"jq\", \"gojq\"], \"env\": [\"WEATHER_KEY\"]}}}'\n---\nbody",
    );
    assert_eq!(manifest.metadata_key, Some("openclaw"));
    assert!(manifest.always);
    assert_eq!(manifest.requirements.bins, ["curl"]);
    assert_eq!(manifest.requirements.any_bins, ["jq", "gojq"]);
    assert_eq!(manifest.requirements.env, ["WEATHER_KEY"]);
    assert_eq!(manifest.requirements.os, ["linux", "darwin"]);
}

#[test]
fn squidbot_section_wins_over_openclaw_and_nanobot_and_merges_with_top_level_requires() {
    let manifest = parse(
        "---\nname: mixed\ndescription: d\nrequires: [git]\nmetadata:\n  nanobot: {requires: {bins: [nano]}}\n  \
         openclaw: {requires: {bins: [claw]}}\n  squidbot: {requires: {bins: [squid, git]}, emoji: x}\n---\n",
    );
    assert_eq!(manifest.metadata_key, Some("squidbot"));
    assert_eq!(manifest.requirements.bins, ["git", "squid"]);
    let nanobot =
        parse("---\nname: n\ndescription: d\nmetadata: {nanobot: {always: true, requires: {env: [K]}}}\n---\n");
    assert_eq!(nanobot.metadata_key, Some("nanobot"));
    assert!(nanobot.always);
    assert_eq!(nanobot.requirements.env, ["K"]);
}

#[test]
fn plain_agent_skills_metadata_is_kept_and_ignored() {
    let manifest = parse(
        "---\nname: code-review\ndescription: Reviews code.\nmetadata:\n  author: someone\n  version: \"1.0\"\nallowed-tools: Read\n---\n",
    );
    assert_eq!(manifest.metadata_key, None);
    assert_eq!(manifest.metadata.as_ref().unwrap()["author"], "someone");
    assert!(manifest.requirements.is_empty());
}

#[test]
fn crlf_and_bom_are_accepted() {
    let manifest = parse("\u{feff}---\r\nname: win\r\ndescription: From Windows.\r\n---\r\nbody\r\n");
    assert_eq!(manifest.name, "win");
    assert_eq!(manifest.body, "body\r\n");
}

#[test]
fn missing_or_unclosed_frontmatter_is_named() {
    assert!(problem("# just markdown\n").contains("must start with a `---` line"));
    assert!(problem("---\nname: x\ndescription: y\n").contains("no closing `---`"));
    assert!(problem("").contains("must start with a `---` line"));
    assert!(problem("---\n---\nbody").contains("frontmatter is empty"));
}

#[test]
fn broken_yaml_reports_the_file_line() {
    let text = problem("---\nname: broken\ndescription: [unclosed\nalways: true\n---\n");
    assert!(text.starts_with("broken YAML frontmatter:"), "{text}");
    assert!(text.contains("of the file)"), "{text}");
    let text = problem("---\nname: typed\ndescription: d\nalways: sometimes\n---\n");
    assert!(text.contains("always"), "{text}");
    assert!(text.contains("(line 4 of the file)"), "{text}");
    let text = problem("---\nname: t\ndescription: d\nrequires: 7\n---\n");
    assert!(text.contains("`requires` must be a table"), "{text}");
    let text = problem("---\nname: t\ndescription: d\nrequires: {bins: [1, {a: b}]}\n---\n");
    assert!(text.contains("`requires.bins` must be a list of strings"), "{text}");
    let text = problem("---\n- a list\n- not a map\n---\n");
    assert!(text.starts_with("broken YAML frontmatter:"), "{text}");
}

#[test]
fn yaml_alias_bombs_are_refused_not_expanded() {
    let mut text = String::from("---\nname: bomb\ndescription: d\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        let previous = level - 1;
        text.push_str(&format!(
            "a{level}: &a{level} [*a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}]\n"
        ));
    }
    text.push_str("---\n");
    let started = std::time::Instant::now();
    // Unknown keys are skipped, but the parser still has to get past the aliases.
    if let Err(kind) = parse_skill(&text) {
        assert!(kind.to_string().starts_with("broken YAML frontmatter"), "{kind}");
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn name_rules() {
    for good in ["a", "web-search", "x1", &"a".repeat(64)] {
        assert_eq!(validate_name(good), Ok(()), "{good}");
    }
    for (bad, reason) in [
        ("", "empty"),
        (&"a".repeat(65) as &str, "longer than 64"),
        ("Web", "lowercase"),
        ("a_b", "lowercase"),
        ("../etc", "lowercase"),
        ("a/b", "lowercase"),
        ("-a", "start or end"),
        ("a-", "start or end"),
        ("a--b", "`--`"),
        ("ünï", "lowercase"),
    ] {
        let error = validate_name(bad).unwrap_err();
        assert!(error.contains(reason), "{bad:?}: {error}");
    }
    assert!(problem("---\nname: Bad Name\ndescription: d\n---\n").contains("invalid name \"Bad Name\""));
    assert!(problem("---\ndescription: d\n---\n").contains("`name` is required"));
}

#[test]
fn description_is_required_and_capped() {
    assert!(problem("---\nname: a\n---\n").contains("`description` is required"));
    assert!(problem("---\nname: a\ndescription: \"  \"\n---\n").contains("`description` is required"));
    let long = format!("---\nname: a\ndescription: {}\n---\n", "d".repeat(MAX_DESCRIPTION_CHARS + 1));
    assert!(problem(&long).contains("more than the 1024 allowed"));
}

#[test]
fn oversized_and_binary_files_are_refused_by_path() {
    let directory = tempfile::tempdir().unwrap();
    let huge = directory.path().join("SKILL.md");
    let body = "x".repeat(MAX_SKILL_FILE_BYTES as usize);
    std::fs::write(&huge, format!("---\nname: huge\ndescription: d\n---\n{body}")).unwrap();
    let problem = read_skill_file(&huge).unwrap_err();
    assert_eq!(problem.path, huge);
    assert!(problem.to_string().contains("more than the 262144 allowed"), "{problem}");
    std::fs::write(&huge, b"---\nname: bin\ndescription: \xff\xfe\n---\n").unwrap();
    assert!(read_skill_file(&huge).unwrap_err().to_string().contains("not UTF-8"));
}

#[test]
fn addons_env_is_read_and_checked() {
    let manifest =
        parse("---\nname: github\ndescription: GitHub.\naddons:\n  env:\n    - GH_TOKEN\n    - GH_HOST\n---\nbody");
    assert_eq!(manifest.addon_env, ["GH_TOKEN", "GH_HOST"]);
    assert_eq!(
        problem("---\nname: github\ndescription: GitHub.\naddons:\n  env: [PATH]\n---\nbody"),
        "invalid addons: `addons.env` entry \"PATH\": it changes how commands run and is never set by a skill"
    );
}
