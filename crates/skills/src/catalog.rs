//! Discovery of skills across their sources (bundled < extra dirs < user < group <
//! workspace, a later one replacing an earlier one by name), with a cache keyed by the
//! modification times of the source directories and of every `SKILL.md`.
//!
//! When nothing changed, a discovery costs one `stat` per source directory and one per
//! skill; a skill written while running is seen at the next call. Calls that arrive while
//! a discovery runs share the next one instead of each doing their own.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::availability::{Checker, Host, Missing, SystemHost};
use crate::bundled;
use crate::manifest::{Manifest, SKILL_FILE, read_skill_file};
use crate::problem::{ProblemKind, SkillProblem};

/// Where a skill came from; later variants take precedence over earlier ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkillSource {
    /// Shipped inside the binary.
    Bundled,
    /// A directory from `skills.extra_dirs`.
    Extra,
    /// The user's own skills (`$SQUIDBOT_HOME/skills`), where installs go.
    User,
    /// The skills of the group a conversation happens in.
    Group,
    /// `<workspace>/skills`, where the agent writes skills itself.
    Workspace,
}

impl SkillSource {
    /// The lowercase name used in listings.
    pub fn as_str(self) -> &'static str {
        match self {
            SkillSource::Bundled => "bundled",
            SkillSource::Extra => "extra",
            SkillSource::User => "user",
            SkillSource::Group => "group",
            SkillSource::Workspace => "workspace",
        }
    }
}

/// The directories skills are discovered in, apart from the per-call group directory.
#[derive(Debug, Clone, Default)]
pub struct SkillRoots {
    /// Where the bundled skills are written out for the file tools; `None` leaves
    /// bundled skills out.
    pub bundled: Option<PathBuf>,
    /// `skills.extra_dirs`, in order (a later one wins a name clash).
    pub extra: Vec<PathBuf>,
    /// `$SQUIDBOT_HOME/skills`.
    pub user: Option<PathBuf>,
    /// `<workspace>/skills`.
    pub workspace: Option<PathBuf>,
}

/// One discovered skill.
#[derive(Debug, Clone)]
pub struct Skill {
    /// Its parsed `SKILL.md`.
    pub manifest: Arc<Manifest>,
    /// The source it came from.
    pub source: SkillSource,
    /// Its directory (`SKILL.md`, `scripts/`, `references/`, `assets/` live here).
    pub directory: PathBuf,
    /// Requirements the host does not meet; empty when available.
    pub missing: Missing,
    /// Lower-precedence sources whose skill of the same name this one replaces.
    pub overrides: Vec<SkillSource>,
}

impl Skill {
    /// The skill's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// True when every requirement is met.
    pub fn available(&self) -> bool {
        self.missing.is_empty()
    }

    /// Its `SKILL.md`.
    pub fn file(&self) -> PathBuf {
        self.directory.join(SKILL_FILE)
    }
}

/// The result of one discovery.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// The winning skill of each name, sorted by name.
    pub skills: Vec<Skill>,
    /// Every skill skipped because it is malformed, and unreadable sources.
    pub problems: Vec<SkillProblem>,
    /// The problems found by reading a file in this call rather than from the cache:
    /// what a long-running caller should warn about once.
    pub new_problems: Vec<SkillProblem>,
}

impl Discovery {
    /// The skill called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|skill| skill.name() == name)
    }
}

/// A file or directory whose modification time is this close to when it was read
/// may change again within the filesystem's timestamp granularity without its mtime
/// moving (as git's "racily clean" index entries), so it is read again next time.
const RACY_WINDOW: Duration = Duration::from_secs(2);

struct DirectoryEntry {
    modified: SystemTime,
    scanned_at: SystemTime,
    children: Arc<[OsString]>,
}

struct FileEntry {
    modified: SystemTime,
    length: u64,
    read_at: SystemTime,
    result: Result<Arc<Manifest>, SkillProblem>,
}

fn is_racy(modified: SystemTime, observed_at: SystemTime) -> bool {
    modified + RACY_WINDOW >= observed_at
}

#[derive(Default)]
struct Cache {
    directories: HashMap<PathBuf, DirectoryEntry>,
    files: HashMap<PathBuf, FileEntry>,
    /// `None` until bundled skills were written out once (or failed to be).
    bundled: Option<Result<(), SkillProblem>>,
    /// Source directories that could not be read, as last reported, so a caller warns
    /// once per new problem rather than every turn.
    unreadable_roots: HashMap<PathBuf, ProblemKind>,
}

/// Discovers skills and remembers what it read; cheap to call every turn.
pub struct SkillCatalog {
    roots: SkillRoots,
    host: Arc<dyn Host>,
    cache: Mutex<Cache>,
    flights: Flights,
}

/// Shares discoveries between concurrent calls: a thousand turns starting together would
/// otherwise each stat every skill, one after the other under the cache's lock, holding a
/// blocking thread each. A discovery that began after a call arrived saw the files as
/// they were at that call or later, so its result is as good as the call's own.
#[derive(Default)]
struct Flights {
    state: Mutex<FlightState>,
    landed: Condvar,
}

/// Discoveries are told apart by their group directory (`None`: no group).
type FlightKey = Option<PathBuf>;

#[derive(Default)]
struct FlightState {
    /// Discoveries started so far; each takes the next number.
    started: u64,
    /// The groups with a discovery running.
    running: Vec<FlightKey>,
    /// Calls waiting for a discovery to land.
    waiting: usize,
    /// The latest result of each group with the number of its discovery, kept for the
    /// calls waiting on it.
    landed: Vec<(FlightKey, u64, Discovery)>,
}

/// Most results kept for waiting calls; older ones are dropped first.
const MAX_LANDED: usize = 16;

/// Takes a running discovery off the list even if it panics, so waiting calls never hang.
struct Takeoff<'a> {
    flights: &'a Flights,
    key: FlightKey,
}

impl Drop for Takeoff<'_> {
    fn drop(&mut self) {
        let mut state = self.flights.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.running.retain(|running| *running != self.key);
        self.flights.landed.notify_all();
    }
}

impl std::fmt::Debug for SkillCatalog {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("SkillCatalog").field("roots", &self.roots).finish_non_exhaustive()
    }
}

impl SkillCatalog {
    /// A catalog over `roots`, checking requirements against this machine.
    pub fn new(roots: SkillRoots) -> Self {
        Self { roots, host: Arc::new(SystemHost), cache: Mutex::new(Cache::default()), flights: Flights::default() }
    }

    /// Checks requirements against `host` instead (tests, remote hosts).
    pub fn with_host(mut self, host: Arc<dyn Host>) -> Self {
        self.host = host;
        self
    }

    /// The directories searched, lowest precedence first (without a group directory).
    pub fn roots(&self) -> &SkillRoots {
        &self.roots
    }

    /// Discovers the skills of a context without a group.
    pub fn discover(&self) -> Discovery {
        self.shared_discovery(None)
    }

    /// Discovers the skills of a group's context: `group` (which may not exist) sits
    /// between the user's skills and the workspace's.
    pub fn discover_with_group(&self, group: &Path) -> Discovery {
        self.shared_discovery(Some(group))
    }

    /// A discovery that started after this call arrived: its own, or one another call
    /// started meanwhile. Only the call that ran it gets `new_problems`, so each problem
    /// is still reported once.
    fn shared_discovery(&self, group: Option<&Path>) -> Discovery {
        let key: FlightKey = group.map(Path::to_path_buf);
        let flights = &self.flights;
        let mut state = flights.state.lock().unwrap_or_else(PoisonError::into_inner);
        let arrived = state.started;
        loop {
            if let Some((_, _, result)) =
                state.landed.iter().find(|(landed, number, _)| *landed == key && *number > arrived)
            {
                return Discovery { new_problems: Vec::new(), ..result.clone() };
            }
            if !state.running.contains(&key) {
                break;
            }
            state.waiting += 1;
            state = flights.landed.wait(state).unwrap_or_else(PoisonError::into_inner);
            state.waiting -= 1;
        }
        state.started += 1;
        let number = state.started;
        state.running.push(key.clone());
        drop(state);
        let takeoff = Takeoff { flights, key };
        let discovery = self.discover_inner(group);
        let mut state = flights.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.landed.retain(|(landed, _, _)| *landed != takeoff.key);
        if state.waiting > 0 {
            if state.landed.len() >= MAX_LANDED {
                state.landed.remove(0);
            }
            state.landed.push((
                takeoff.key.clone(),
                number,
                Discovery { new_problems: Vec::new(), ..discovery.clone() },
            ));
        }
        drop(state);
        drop(takeoff);
        discovery
    }

    fn discover_inner(&self, group: Option<&Path>) -> Discovery {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let mut discovery = Discovery::default();
        let mut sources: Vec<(SkillSource, &Path)> = Vec::new();
        if let Some(directory) = &self.roots.bundled {
            if cache.bundled.is_none() {
                let state = bundled::materialize(directory);
                if let Err(problem) = &state {
                    discovery.new_problems.push(problem.clone());
                }
                cache.bundled = Some(state);
            }
            match &cache.bundled {
                Some(Err(problem)) => discovery.problems.push(problem.clone()),
                Some(Ok(())) | None => sources.push((SkillSource::Bundled, directory)),
            }
        }
        sources.extend(self.roots.extra.iter().map(|directory| (SkillSource::Extra, directory.as_path())));
        sources.extend(self.roots.user.as_deref().map(|directory| (SkillSource::User, directory)));
        sources.extend(group.map(|directory| (SkillSource::Group, directory)));
        sources.extend(self.roots.workspace.as_deref().map(|directory| (SkillSource::Workspace, directory)));

        let mut checker = Checker::new(self.host.as_ref());
        let mut winners: BTreeMap<String, Skill> = BTreeMap::new();
        for (source, root) in sources {
            let children = match cache.children(root) {
                Ok(children) => {
                    cache.unreadable_roots.remove(root);
                    children
                }
                Err(problem) => {
                    if cache.unreadable_roots.get(root) != Some(&problem.kind) {
                        cache.unreadable_roots.insert(root.to_path_buf(), problem.kind.clone());
                        discovery.new_problems.push(problem.clone());
                    }
                    discovery.problems.push(problem);
                    continue;
                }
            };
            for child in children.iter() {
                let directory = root.join(child);
                let Some(manifest) = cache.manifest(&directory, child, &mut discovery) else { continue };
                let missing = checker.missing(&manifest.requirements);
                let mut skill = Skill { manifest, source, directory, missing, overrides: Vec::new() };
                if let Some(replaced) = winners.remove(skill.name()) {
                    tracing::debug!(
                        name = skill.name(),
                        winner = %skill.directory.display(),
                        replaced = %replaced.directory.display(),
                        "a skill replaces one of the same name from a lower-precedence source"
                    );
                    skill.overrides = replaced.overrides;
                    skill.overrides.push(replaced.source);
                }
                winners.insert(skill.manifest.name.clone(), skill);
            }
        }
        discovery.skills = winners.into_values().collect();
        discovery
    }
}

impl Cache {
    /// The candidate skill directories under `root`: not hidden, directories (or links
    /// to them), sorted. Missing roots have none.
    fn children(&mut self, root: &Path) -> Result<Arc<[OsString]>, SkillProblem> {
        let metadata = match std::fs::metadata(root) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                self.directories.remove(root);
                return Ok(Arc::from(Vec::new()));
            }
            Err(error) => return Err(SkillProblem::new(root, ProblemKind::Unreadable(error.to_string()))),
        };
        if !metadata.is_dir() {
            return Err(SkillProblem::new(root, ProblemKind::Unreadable("it is not a directory".into())));
        }
        let modified = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        if let Some(entry) = self.directories.get(root)
            && entry.modified == modified
            && !is_racy(entry.modified, entry.scanned_at)
        {
            return Ok(entry.children.clone());
        }
        let scanned_at = SystemTime::now();
        let reader = std::fs::read_dir(root)
            .map_err(|error| SkillProblem::new(root, ProblemKind::Unreadable(error.to_string())))?;
        let mut children: Vec<OsString> = reader
            .filter_map(Result::ok)
            .filter(|entry| !entry.file_name().as_encoded_bytes().starts_with(b"."))
            .filter(|entry| entry.path().is_dir())
            .map(|entry| entry.file_name())
            .collect();
        children.sort();
        let children: Arc<[OsString]> = Arc::from(children);
        self.files.retain(|file, _| {
            file.parent().and_then(Path::parent) != Some(root)
                || file
                    .parent()
                    .and_then(Path::file_name)
                    .is_some_and(|name| children.iter().any(|child| child == name))
        });
        self.directories
            .insert(root.to_path_buf(), DirectoryEntry { modified, scanned_at, children: children.clone() });
        Ok(children)
    }

    /// The parsed `SKILL.md` of `directory`, from the cache when its mtime and size
    /// are unchanged. `None` when there is no skill there or it is malformed (then the
    /// problem is recorded in `discovery`).
    fn manifest(&mut self, directory: &Path, child: &OsString, discovery: &mut Discovery) -> Option<Arc<Manifest>> {
        let file = directory.join(SKILL_FILE);
        let metadata = match std::fs::metadata(&file) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                self.files.remove(&file);
                return None;
            }
            Err(error) => {
                discovery.problems.push(SkillProblem::new(&file, ProblemKind::Unreadable(error.to_string())));
                return None;
            }
        };
        let modified = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let length = metadata.len();
        let cached = self.files.get(&file).filter(|entry| {
            entry.modified == modified && entry.length == length && !is_racy(entry.modified, entry.read_at)
        });
        let result = match cached {
            Some(entry) => entry.result.clone(),
            None => {
                let read_at = SystemTime::now();
                let result = parse_file(&file, &metadata, child);
                if let Err(problem) = &result {
                    discovery.new_problems.push(problem.clone());
                }
                self.files.insert(file, FileEntry { modified, length, read_at, result: result.clone() });
                result
            }
        };
        match result {
            Ok(manifest) => Some(manifest),
            Err(problem) => {
                discovery.problems.push(problem);
                None
            }
        }
    }
}

fn parse_file(file: &Path, metadata: &std::fs::Metadata, child: &OsString) -> Result<Arc<Manifest>, SkillProblem> {
    if !metadata.is_file() {
        return Err(SkillProblem::new(file, ProblemKind::Unreadable("it is not a regular file".into())));
    }
    let manifest = read_skill_file(file)?;
    if child.to_str() != Some(manifest.name.as_str()) {
        return Err(SkillProblem::new(
            file,
            ProblemKind::NameMismatch { name: manifest.name, directory: child.to_string_lossy().into_owned() },
        ));
    }
    Ok(Arc::new(manifest))
}

#[cfg(test)]
mod tests;
