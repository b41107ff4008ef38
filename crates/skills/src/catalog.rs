//! Discovery of skills across their sources (bundled < extra dirs < user < group <
//! person < workspace, a later one replacing an earlier one by name; the group's, the
//! person's and the workspace's being those of the conversation's context), with a cache
//! keyed by the modification times of the source directories and of every `SKILL.md`.
//!
//! When nothing changed, a discovery costs one `stat` per source directory and one per
//! skill, and hands out the previous result itself; a skill written while running is seen
//! at the next call. Calls that arrive while a discovery runs share the next one instead
//! of each doing their own.

mod snapshot;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Instant, SystemTime};

use serde::Serialize;

use crate::availability::{Checker, Host, Missing, SystemHost};
use crate::bundled;
use crate::manifest::{Manifest, SKILL_FILE, read_skill_file};
use crate::problem::{ProblemKind, SkillProblem};
use snapshot::{Found, Input, Snapshot, Stamp};
use squidbot_core::freshness::is_racy;
use squidbot_core::sync::lock;
use squidbot_core::workspace::ContextKind;
use squidbot_types::skill::{SkillMissing, SkillRequirements, SkillSummary};

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
    /// The skills of the group a conversation happens in (`groups/<id>/skills`).
    Group,
    /// The skills of the person a conversation is with (`users/<id>/skills`).
    Person,
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
            SkillSource::Person => "person",
            SkillSource::Workspace => "workspace",
        }
    }
}

/// The directories skills are discovered in, apart from those of a conversation's
/// context ([`ContextSkills`]).
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

/// The skill directories of one conversation's context, beside the catalog's roots;
/// the default is none (the owner's conversations, listings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ContextSkills {
    /// A group chat's own skills, above the user's (installed) ones.
    pub group: Option<PathBuf>,
    /// A person's own skills, above the group's.
    pub person: Option<PathBuf>,
    /// The context's own workspace skills, in place of the catalog's `workspace` root.
    pub workspace: Option<PathBuf>,
}

impl ContextSkills {
    /// A group chat's: `group` between the user's skills and the workspace's.
    pub fn group(group: &Path) -> Self {
        Self { group: Some(group.to_path_buf()), ..Self::default() }
    }

    /// A person's or a group's context (`kind`): `own` as their skills, `workspace` as
    /// the skills of their workspace.
    pub fn of(kind: ContextKind, own: PathBuf, workspace: PathBuf) -> Self {
        let (group, person) = match kind {
            ContextKind::Group => (Some(own), None),
            ContextKind::Person => (None, Some(own)),
        };
        Self { group, person, workspace: Some(workspace) }
    }
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

    /// What `squidbot skills list --json` and the gateway's `skills.list` show of it.
    pub fn summary(&self) -> SkillSummary {
        let (manifest, missing, requires) = (&self.manifest, &self.missing, &self.manifest.requirements);
        SkillSummary {
            always: manifest.always,
            available: self.available(),
            description: manifest.description.clone(),
            file: self.file(),
            location: self.directory.clone(),
            missing: SkillMissing {
                any_bins: missing.any_bins.clone(),
                bins: missing.bins.clone(),
                env: missing.env.clone(),
                os: missing.os.clone(),
            },
            name: manifest.name.clone(),
            overrides: self.overrides.iter().map(|source| source.as_str().to_owned()).collect(),
            requires: SkillRequirements {
                any_bins: requires.any_bins.clone(),
                bins: requires.bins.clone(),
                env: requires.env.clone(),
                os: requires.os.clone(),
            },
            source: self.source.as_str().to_owned(),
        }
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

/// A discovery as handed to every caller while nothing changed: the result is shared,
/// only the problems this call found first are its own.
#[derive(Debug, Clone)]
pub struct SharedDiscovery {
    /// The discovery; its `new_problems` is empty (they are in the field beside it).
    pub discovery: Arc<Discovery>,
    /// The problems found by reading a file in this call rather than from the cache:
    /// what a long-running caller should warn about once.
    pub new_problems: Vec<SkillProblem>,
}

impl SharedDiscovery {
    /// A discovery of the caller's own, with its new problems in it.
    pub fn into_discovery(self) -> Discovery {
        let discovery = Arc::unwrap_or_clone(self.discovery);
        Discovery { new_problems: self.new_problems, ..discovery }
    }
}

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
    /// The latest discovery of each context's directories, handed out again while it
    /// holds. Apart from the cache so checking it never waits for a discovery running
    /// meanwhile.
    latest: Mutex<HashMap<FlightKey, Arc<Snapshot>>>,
}

/// Most contexts whose latest discovery is kept; the one checked longest ago goes first.
const MAX_SNAPSHOTS: usize = 64;

/// Shares discoveries between concurrent calls: a thousand turns starting together would
/// otherwise each stat every skill, one after the other under the cache's lock, holding a
/// blocking thread each. A discovery that began after a call arrived saw the files as
/// they were at that call or later, so its result is as good as the call's own.
#[derive(Default)]
struct Flights {
    state: Mutex<FlightState>,
    landed: Condvar,
}

/// Discoveries are told apart by their context's directories.
type FlightKey = ContextSkills;

#[derive(Default)]
struct FlightState {
    /// Discoveries started so far; each takes the next number.
    started: u64,
    /// The contexts with a discovery running.
    running: Vec<FlightKey>,
    /// Calls waiting for a discovery to land.
    waiting: usize,
    /// The latest result of each context with the number of its discovery, kept for the
    /// calls waiting on it.
    landed: Vec<(FlightKey, u64, Arc<Discovery>)>,
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
        let mut state = lock(&self.flights.state);
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
        Self {
            roots,
            host: Arc::new(SystemHost),
            cache: Mutex::new(Cache::default()),
            flights: Flights::default(),
            latest: Mutex::new(HashMap::new()),
        }
    }

    /// Checks requirements against `host` instead (tests, remote hosts).
    pub fn with_host(mut self, host: Arc<dyn Host>) -> Self {
        self.host = host;
        self
    }

    /// The directories searched, lowest precedence first (without a context's).
    pub fn roots(&self) -> &SkillRoots {
        &self.roots
    }

    /// Discovers the skills of a context without directories of its own.
    pub fn discover(&self) -> Discovery {
        self.shared(&ContextSkills::default()).into_discovery()
    }

    /// Discovers the skills of a group's context: `group` (which may not exist) sits
    /// between the user's skills and the workspace's.
    pub fn discover_with_group(&self, group: &Path) -> Discovery {
        self.discover_in(&ContextSkills::group(group))
    }

    /// Discovers the skills of a context with `context`'s directories (which need not
    /// exist) among the sources.
    pub fn discover_in(&self, context: &ContextSkills) -> Discovery {
        self.shared(context).into_discovery()
    }

    /// Discovers the skills of a context with its directories without copying the
    /// result: while nothing changed every call gets the same one.
    pub fn shared(&self, context: &ContextSkills) -> SharedDiscovery {
        match self.unchanged(context, usize::MAX) {
            Some(discovery) => SharedDiscovery { discovery, new_problems: Vec::new() },
            None => self.shared_discovery(context),
        }
    }

    /// The latest discovery of `context`'s directories if it still holds, found with one
    /// `stat` per source directory and per skill and never waiting for a discovery
    /// running meanwhile; `None` when it changed, is too old to trust its requirement
    /// checks, or checking would take more than `most_stats` `stat` calls.
    pub fn unchanged(&self, context: &ContextSkills, most_stats: usize) -> Option<Arc<Discovery>> {
        let snapshot = lock(&self.latest).get(context).cloned()?;
        // Checked without the lock, so calls of other groups need not wait on these `stat`s.
        snapshot.unchanged(most_stats).then(|| snapshot.discovery.clone())
    }

    /// A discovery that started after this call arrived: its own, or one another call
    /// started meanwhile. Only the call that ran it gets `new_problems`, so each problem
    /// is still reported once.
    fn shared_discovery(&self, context: &ContextSkills) -> SharedDiscovery {
        let key: FlightKey = context.clone();
        let flights = &self.flights;
        let mut state = lock(&flights.state);
        let arrived = state.started;
        loop {
            if let Some((_, _, result)) =
                state.landed.iter().find(|(landed, number, _)| *landed == key && *number > arrived)
            {
                return SharedDiscovery { discovery: result.clone(), new_problems: Vec::new() };
            }
            if !state.running.contains(&key) {
                break;
            }
            state.waiting += 1;
            state = squidbot_core::sync::wait(&flights.landed, state);
            state.waiting -= 1;
        }
        state.started += 1;
        let number = state.started;
        state.running.push(key.clone());
        drop(state);
        let takeoff = Takeoff { flights, key };
        // One that landed between this call's own check and its flight may hold already.
        let shared = match self.unchanged(context, usize::MAX) {
            Some(discovery) => SharedDiscovery { discovery, new_problems: Vec::new() },
            None => self.discover_and_remember(&takeoff.key),
        };
        let mut state = lock(&flights.state);
        state.landed.retain(|(landed, _, _)| *landed != takeoff.key);
        if state.waiting > 0 {
            if state.landed.len() >= MAX_LANDED {
                state.landed.remove(0);
            }
            state.landed.push((takeoff.key.clone(), number, shared.discovery.clone()));
        }
        drop(state);
        drop(takeoff);
        shared
    }

    /// A full discovery, kept as the context's latest unless one of its inputs could not
    /// be examined.
    fn discover_and_remember(&self, key: &FlightKey) -> SharedDiscovery {
        let checked_at = Instant::now();
        let mut inputs = Vec::new();
        let mut discovery = self.discover_inner(key, &mut inputs);
        let new_problems = std::mem::take(&mut discovery.new_problems);
        let discovery = Arc::new(discovery);
        let mut latest = lock(&self.latest);
        if inputs.iter().any(|input| matches!(input.found, Found::Failed)) {
            latest.remove(key);
        } else {
            if latest.len() >= MAX_SNAPSHOTS
                && !latest.contains_key(key)
                && let Some(oldest) =
                    latest.iter().min_by_key(|(_, snapshot)| snapshot.checked_at).map(|(key, _)| key.clone())
            {
                latest.remove(&oldest);
            }
            latest.insert(key.clone(), Arc::new(Snapshot { discovery: discovery.clone(), inputs, checked_at }));
        }
        drop(latest);
        SharedDiscovery { discovery, new_problems }
    }

    /// Discovers every source, recording each root and `SKILL.md` it looks at in `inputs`.
    fn discover_inner(&self, context: &ContextSkills, inputs: &mut Vec<Input>) -> Discovery {
        let mut cache = lock(&self.cache);
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
        sources.extend(context.group.as_deref().map(|directory| (SkillSource::Group, directory)));
        sources.extend(context.person.as_deref().map(|directory| (SkillSource::Person, directory)));
        let workspace = context.workspace.as_deref().or(self.roots.workspace.as_deref());
        sources.extend(workspace.map(|directory| (SkillSource::Workspace, directory)));

        let mut checker = Checker::new(self.host.as_ref());
        let mut winners: BTreeMap<String, Skill> = BTreeMap::new();
        for (source, root) in sources {
            let children = match cache.children(root, inputs) {
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
                let Some(manifest) = cache.manifest(&directory, child, &mut discovery, inputs) else { continue };
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
    /// to them), sorted. Missing roots have none. Records how it found `root` in `inputs`.
    fn children(&mut self, root: &Path, inputs: &mut Vec<Input>) -> Result<Arc<[OsString]>, SkillProblem> {
        let mut input = Input { path: root.to_path_buf(), found: Found::Failed };
        let children = self.read_children(root, &mut input.found);
        inputs.push(input);
        children
    }

    fn read_children(&mut self, root: &Path, found: &mut Found) -> Result<Arc<[OsString]>, SkillProblem> {
        let metadata = match std::fs::metadata(root) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                self.directories.remove(root);
                *found = Found::Absent;
                return Ok(Arc::from(Vec::new()));
            }
            Err(error) => return Err(SkillProblem::new(root, ProblemKind::Unreadable(error.to_string()))),
        };
        if !metadata.is_dir() {
            return Err(SkillProblem::new(root, ProblemKind::Unreadable("it is not a directory".into())));
        }
        let stamp = Stamp::of(&metadata);
        let modified = stamp.modified;
        if let Some(entry) = self.directories.get(root)
            && entry.modified == modified
            && !is_racy(entry.modified, entry.scanned_at)
        {
            *found = Found::Present { stamp, read_at: entry.scanned_at };
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
        *found = Found::Present { stamp, read_at: scanned_at };
        Ok(children)
    }

    /// The parsed `SKILL.md` of `directory`, from the cache when its mtime and size
    /// are unchanged. `None` when there is no skill there or it is malformed (then the
    /// problem is recorded in `discovery`). Records how it found the file in `inputs`.
    fn manifest(
        &mut self,
        directory: &Path,
        child: &OsString,
        discovery: &mut Discovery,
        inputs: &mut Vec<Input>,
    ) -> Option<Arc<Manifest>> {
        let file = directory.join(SKILL_FILE);
        let metadata = match std::fs::metadata(&file) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                self.files.remove(&file);
                inputs.push(Input { path: file, found: Found::Absent });
                return None;
            }
            Err(error) => {
                discovery.problems.push(SkillProblem::new(&file, ProblemKind::Unreadable(error.to_string())));
                inputs.push(Input { path: file, found: Found::Failed });
                return None;
            }
        };
        let stamp = Stamp::of(&metadata);
        let Stamp { modified, length } = stamp;
        let previous = self.files.get(&file).filter(|entry| entry.modified == modified && entry.length == length);
        let result = match previous.filter(|entry| !is_racy(entry.modified, entry.read_at)) {
            Some(entry) => {
                inputs.push(Input { path: file, found: Found::Present { stamp, read_at: entry.read_at } });
                entry.result.clone()
            }
            None => {
                let read_at = SystemTime::now();
                let result = parse_file(&file, &metadata, child);
                // A racy file read again with its mtime and size unchanged and found broken
                // the same way was reported the time before.
                if let Err(problem) = &result
                    && !previous.is_some_and(|entry| entry.result.as_ref().err() == Some(problem))
                {
                    discovery.new_problems.push(problem.clone());
                }
                inputs.push(Input { path: file.clone(), found: Found::Present { stamp, read_at } });
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
