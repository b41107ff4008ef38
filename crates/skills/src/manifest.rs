//! `SKILL.md`: YAML frontmatter between `---` lines, then a Markdown body. Reads the
//! fields squidbot knows (`name`, `description`, `always`, `requires`, `license`,
//! `metadata`, `addons`), including the `requires`/`always`/`emoji`/`os` that OpenClaw
//! and nanobot skills keep under `metadata.openclaw` / `metadata.nanobot`.

pub mod addons;

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::problem::{ProblemKind, SkillProblem};

/// The file every skill directory holds.
pub const SKILL_FILE: &str = "SKILL.md";

/// Longest skill name, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// Longest description, in characters: it goes into every prompt.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Largest `SKILL.md`, frontmatter and body together.
pub const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;

/// Keys of `metadata` whose section squidbot reads, most preferred first.
pub const METADATA_KEYS: [&str; 3] = ["squidbot", "openclaw", "nanobot"];

/// What a skill needs from the host before it can work.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Requirements {
    /// Executables that must all be on `PATH`.
    pub bins: Vec<String>,
    /// Executables of which at least one must be on `PATH`.
    pub any_bins: Vec<String>,
    /// Environment variables that must all be set and non-empty.
    pub env: Vec<String>,
    /// Operating systems the skill supports (`linux`, `darwin`, `win32`); empty means any.
    pub os: Vec<String>,
}

impl Requirements {
    fn merge(&mut self, other: Requirements) {
        for (mine, theirs) in [
            (&mut self.bins, other.bins),
            (&mut self.any_bins, other.any_bins),
            (&mut self.env, other.env),
            (&mut self.os, other.os),
        ] {
            for item in theirs {
                if !mine.contains(&item) {
                    mine.push(item);
                }
            }
        }
    }

    /// True when nothing is required.
    pub fn is_empty(&self) -> bool {
        self.bins.is_empty() && self.any_bins.is_empty() && self.env.is_empty() && self.os.is_empty()
    }
}

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifest {
    /// The skill's name (equal to its directory's name once installed).
    pub name: String,
    /// When to use the skill; shown to the model in every prompt.
    pub description: String,
    /// True when the whole body goes into every prompt.
    pub always: bool,
    /// Host requirements, from `requires` and the metadata section together.
    pub requirements: Requirements,
    /// The `license` field.
    pub license: Option<String>,
    /// `emoji` from the metadata section.
    pub emoji: Option<String>,
    /// Which metadata key squidbot read its section from, if any.
    pub metadata_key: Option<&'static str>,
    /// The whole `metadata` field as written.
    pub metadata: Option<Value>,
    /// The `addons` field as written (packages a sandbox may provide later).
    pub addons: Option<Value>,
    /// `addons.env`: variables the skill's commands get while it is in use in a turn,
    /// each valued from the vault secret of the same name (checked names, no repeats).
    pub addon_env: Vec<String>,
    /// The Markdown after the frontmatter.
    pub body: String,
}

/// The frontmatter as written; the loose parts are read by hand for clear errors.
#[derive(Debug, Deserialize)]
struct RawFrontmatter {
    name: Option<String>,
    description: Option<String>,
    always: Option<bool>,
    requires: Option<Value>,
    license: Option<String>,
    metadata: Option<Value>,
    addons: Option<Value>,
}

/// Checks a skill name: 1–64 of `a-z`, `0-9` and `-`, no leading, trailing or doubled `-`.
/// These rules also keep a name from ever being a path.
pub fn validate_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("it is empty");
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err("it is longer than 64 characters");
    }
    if !name.chars().all(|character| character.is_ascii_lowercase() || character.is_ascii_digit() || character == '-') {
        return Err("only lowercase letters, digits and `-` are allowed");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("it must not start or end with `-`");
    }
    if name.contains("--") {
        return Err("it must not contain `--`");
    }
    Ok(())
}

/// Reads and parses a `SKILL.md`, refusing files over [`MAX_SKILL_FILE_BYTES`] before
/// reading them whole.
pub fn read_skill_file(path: &Path) -> Result<Manifest, SkillProblem> {
    let problem = |kind| SkillProblem::new(path, kind);
    let file = std::fs::File::open(path).map_err(|error| problem(ProblemKind::Unreadable(error.to_string())))?;
    let mut bytes = Vec::new();
    // One byte past the cap tells an oversized file apart without reading all of it,
    // even if it grows between a stat and the read.
    file.take(MAX_SKILL_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| problem(ProblemKind::Unreadable(error.to_string())))?;
    if bytes.len() as u64 > MAX_SKILL_FILE_BYTES {
        let size = std::fs::metadata(path).map(|metadata| metadata.len()).unwrap_or(bytes.len() as u64);
        return Err(problem(ProblemKind::TooLarge { size, cap: MAX_SKILL_FILE_BYTES }));
    }
    let text = String::from_utf8(bytes).map_err(|_| problem(ProblemKind::NotText))?;
    parse_skill(&text).map_err(problem)
}

/// Splits `---` frontmatter from the body; returns the YAML and the body.
fn split_frontmatter(text: &str) -> Result<(&str, &str), ProblemKind> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err(ProblemKind::NoFrontmatter("no YAML frontmatter: the file must start with a `---` line"));
    }
    let yaml_start = first.len();
    let mut offset = yaml_start;
    for line in lines {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            let yaml = &text[yaml_start..offset];
            let body = &text[offset + line.len()..];
            return Ok((yaml, body));
        }
        offset += line.len();
    }
    Err(ProblemKind::NoFrontmatter("the YAML frontmatter has no closing `---` line"))
}

/// Rewrites a YAML error's position so it counts lines of the whole file.
fn yaml_error(error: &serde_yaml_ng::Error) -> String {
    let text = error.to_string();
    match error.location() {
        Some(location) => {
            let own = format!(" at line {} column {}", location.line(), location.column());
            let message = text.strip_suffix(&own).unwrap_or(&text);
            // The frontmatter starts on the file's second line.
            format!("{message} (line {} of the file)", location.line() + 1)
        }
        None => text,
    }
}

/// Parses the text of a `SKILL.md`.
pub fn parse_skill(text: &str) -> Result<Manifest, ProblemKind> {
    let (yaml, body) = split_frontmatter(text)?;
    if yaml.trim().is_empty() {
        return Err(ProblemKind::BrokenYaml("the frontmatter is empty; `name` and `description` are required".into()));
    }
    let raw: RawFrontmatter =
        serde_yaml_ng::from_str(yaml).map_err(|error| ProblemKind::BrokenYaml(yaml_error(&error)))?;
    let name = raw.name.map(|name| name.trim().to_owned()).unwrap_or_default();
    if name.is_empty() {
        return Err(ProblemKind::BrokenYaml("`name` is required".into()));
    }
    validate_name(&name).map_err(|reason| ProblemKind::InvalidName { name: name.clone(), reason })?;
    let description = raw.description.map(|text| text.trim().to_owned()).unwrap_or_default();
    if description.is_empty() {
        return Err(ProblemKind::InvalidDescription("`description` is required and must not be empty".into()));
    }
    let description_chars = description.chars().count();
    if description_chars > MAX_DESCRIPTION_CHARS {
        return Err(ProblemKind::InvalidDescription(format!(
            "`description` is {description_chars} characters, more than the {MAX_DESCRIPTION_CHARS} allowed"
        )));
    }
    let mut requirements = match &raw.requires {
        Some(value) => read_requirements(value, "requires")?,
        None => Requirements::default(),
    };
    let metadata = raw.metadata.map(normalize_metadata);
    let (metadata_key, section) = metadata_section(metadata.as_ref());
    let mut always = raw.always.unwrap_or(false);
    let mut emoji = None;
    if let (Some(key), Some(section)) = (metadata_key, section) {
        if let Some(value) = section.get("requires") {
            requirements.merge(read_requirements(value, &format!("metadata.{key}.requires"))?);
        }
        if let Some(value) = section.get("os") {
            let os = string_list(value, &format!("metadata.{key}.os"))?;
            requirements.merge(Requirements { os, ..Requirements::default() });
        }
        match section.get("always") {
            Some(Value::Bool(flag)) => always |= flag,
            Some(Value::Null) | None => {}
            Some(_) => return Err(ProblemKind::BrokenYaml(format!("`metadata.{key}.always` must be true or false"))),
        }
        emoji = section.get("emoji").and_then(Value::as_str).map(str::to_owned);
    }
    let addon_env = addons::read_env(raw.addons.as_ref())?;
    Ok(Manifest {
        name,
        description,
        always,
        requirements,
        license: raw.license,
        emoji,
        metadata_key,
        metadata,
        addons: raw.addons,
        addon_env,
        body: body.trim_start_matches(['\r', '\n']).to_owned(),
    })
}

/// OpenClaw skills often write `metadata` as one line of JSON in quotes; read that as
/// the map it means.
fn normalize_metadata(value: Value) -> Value {
    match &value {
        Value::String(text) if text.trim_start().starts_with('{') => match serde_json::from_str::<Value>(text) {
            Ok(parsed @ Value::Object(_)) => parsed,
            _ => value,
        },
        _ => value,
    }
}

fn metadata_section(metadata: Option<&Value>) -> (Option<&'static str>, Option<&Map<String, Value>>) {
    let Some(Value::Object(map)) = metadata else { return (None, None) };
    for key in METADATA_KEYS {
        if let Some(Value::Object(section)) = map.get(key) {
            return (Some(key), Some(section));
        }
    }
    (None, None)
}

/// `requires` as a table (`bins`, `anyBins`/`any_bins`, `env`) or, as a shorthand, a
/// list of executables.
fn read_requirements(value: &Value, field: &str) -> Result<Requirements, ProblemKind> {
    match value {
        Value::Null => Ok(Requirements::default()),
        Value::Array(_) => Ok(Requirements { bins: string_list(value, field)?, ..Requirements::default() }),
        Value::Object(map) => {
            let list = |keys: &[&str]| -> Result<Vec<String>, ProblemKind> {
                for key in keys {
                    if let Some(value) = map.get(*key) {
                        return string_list(value, &format!("{field}.{key}"));
                    }
                }
                Ok(Vec::new())
            };
            Ok(Requirements {
                bins: list(&["bins"])?,
                any_bins: list(&["anyBins", "any_bins"])?,
                env: list(&["env"])?,
                os: list(&["os"])?,
            })
        }
        _ => Err(ProblemKind::BrokenYaml(format!("`{field}` must be a table with `bins` and `env` lists"))),
    }
}

fn string_list(value: &Value, field: &str) -> Result<Vec<String>, ProblemKind> {
    let wrong = || ProblemKind::BrokenYaml(format!("`{field}` must be a list of strings"));
    match value {
        Value::Null => Ok(Vec::new()),
        Value::String(single) => Ok(vec![single.trim().to_owned()]),
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().map(|text| text.trim().to_owned()).ok_or_else(wrong))
            .filter(|item| !matches!(item, Ok(text) if text.is_empty()))
            .collect(),
        _ => Err(wrong()),
    }
}

#[cfg(test)]
mod tests;
