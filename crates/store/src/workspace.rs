//! `FsWorkspace`: the `WorkspaceFiles` port over a directory, refusing anything that
//! could read outside it, and keeping what it read until the file changes.

use std::collections::HashMap;
use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use squidbot_core::freshness::is_racy;
use squidbot_core::sync::lock;
use squidbot_core::workspace::WorkspaceFiles;

/// Largest workspace file read, in bytes: these files go into prompts.
pub const MAX_WORKSPACE_FILE_BYTES: u64 = 1024 * 1024;

/// Directory levels a workspace file name may have, `prompts/system.md` being two.
const MAX_NAME_DEPTH: usize = 2;

/// Largest file kept between reads. Prompt files are a few kilobytes and a prompt keeps
/// 20,000 characters of one at most; a bigger one is read each time rather than held by
/// every open context's workspace.
const MAX_CACHED_FILE_BYTES: u64 = 256 * 1024;

/// Most files kept between reads; a prompt reads about a dozen names.
const MAX_CACHED_FILES: usize = 64;

/// Times a read starts over when the file it examined was replaced before it was opened.
const MAX_ATTEMPTS: usize = 3;

/// Workspace documents (`SOUL.md`, `prompts/system.md`, …) read from a directory.
///
/// Each turn reads about ten names, so a file's text is kept and handed out again while a
/// `stat` finds it the same file (device and inode) with the same mtime, status-change
/// time and size. Where a name leads is checked on every read all the same, so a file
/// swapped for a symlink leading out is refused at the next read, cached or not.
#[derive(Clone)]
pub struct FsWorkspace {
    /// The workspace directory.
    root: PathBuf,
    /// What was read, shared by the clones.
    cache: Arc<Mutex<Cache>>,
}

#[derive(Default)]
struct Cache {
    /// The root's canonical path, for names reached through a symlink.
    root: Option<CanonicalRoot>,
    /// Text read, by name.
    files: HashMap<String, CachedFile>,
    /// Files opened so far, for tests telling a cached read from a fresh one.
    #[cfg(test)]
    opened: usize,
}

/// The root's canonical path and the directory it named, so it is worked out again
/// only when the root is another directory.
struct CanonicalRoot {
    identity: (u64, u64),
    path: PathBuf,
}

#[derive(Clone)]
struct CachedFile {
    stamp: Stamp,
    read_at: SystemTime,
    text: Arc<str>,
}

/// What tells one version of a file apart from another without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    /// Device and inode: which file it is (zeros where the platform has none).
    identity: (u64, u64),
    modified: SystemTime,
    /// The status-change time, seconds and nanoseconds: every write moves it and, unlike
    /// the mtime, nobody can set it back.
    changed: (i64, i64),
    length: u64,
}

impl Stamp {
    #[cfg(unix)]
    fn of(metadata: &Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            identity: (metadata.dev(), metadata.ino()),
            modified: metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            changed: (metadata.ctime(), metadata.ctime_nsec()),
            length: metadata.len(),
        }
    }

    #[cfg(not(unix))]
    fn of(metadata: &Metadata) -> Self {
        Self {
            identity: (0, 0),
            modified: metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            changed: (0, 0),
            length: metadata.len(),
        }
    }
}

/// True where files have a device and inode to tell them apart by.
const HAS_IDENTITY: bool = cfg!(unix);

impl std::fmt::Debug for FsWorkspace {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("FsWorkspace").field("root", &self.root).finish_non_exhaustive()
    }
}

impl FsWorkspace {
    /// A workspace rooted at `root`; the directory need not exist yet.
    pub fn new(root: PathBuf) -> Self {
        Self { root, cache: Arc::default() }
    }

    /// The workspace directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn try_read(&self, name: &str) -> Result<String, Refusal> {
        check_name(name)?;
        let mut attempts = 1;
        loop {
            match self.read_once(name) {
                Err(Refusal::Replaced) if attempts < MAX_ATTEMPTS => attempts += 1,
                result => return result,
            }
        }
    }

    fn read_once(&self, name: &str) -> Result<String, Refusal> {
        let (path, metadata) = self.locate(name)?;
        // Checked before opening: opening a FIFO would block.
        if !metadata.is_file() {
            return Err(Refusal::NotRegularFile);
        }
        let stamp = Stamp::of(&metadata);
        if let Some(text) = self.cached(name, &stamp) {
            return Ok(text);
        }
        let read_at = SystemTime::now();
        let file = File::open(&path).map_err(Refusal::Unreadable)?;
        self.count_open();
        let opened = Stamp::of(&file.metadata().map_err(Refusal::Unreadable)?);
        // The file opened must be the one located: a name swapped for a symlink leading
        // out in between is not read through.
        if opened.identity != stamp.identity {
            return Err(Refusal::Replaced);
        }
        let size = opened.length;
        if size > MAX_WORKSPACE_FILE_BYTES {
            return Err(Refusal::TooLarge { size });
        }
        // The file may grow after the size check: read one byte past the limit to notice.
        let mut bytes = Vec::new();
        file.take(MAX_WORKSPACE_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(Refusal::Unreadable)?;
        let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if read > MAX_WORKSPACE_FILE_BYTES {
            return Err(Refusal::TooLarge { size: read });
        }
        let text = String::from_utf8(bytes).map_err(|_| Refusal::NotUtf8)?;
        // Kept with what `stat` said after opening and the time before: a write while
        // reading moves the mtime to that time or later, so the entry is not trusted then.
        if HAS_IDENTITY && size <= MAX_CACHED_FILE_BYTES {
            let mut cache = lock(&self.cache);
            if cache.files.len() < MAX_CACHED_FILES || cache.files.contains_key(name) {
                cache
                    .files
                    .insert(name.to_owned(), CachedFile { stamp: opened, read_at, text: Arc::from(text.as_str()) });
            }
        }
        Ok(text)
    }

    /// The path of `name` inside the root and what `stat` says of the file there.
    /// A name without symlinks on the way needs no more than an `lstat` of it (and of its
    /// directory): it can't lead out, as names hold no `..`. One with a symlink on the way
    /// is resolved and must stay under the root's canonical path.
    fn locate(&self, name: &str) -> Result<(PathBuf, Metadata), Refusal> {
        let path = self.root.join(name);
        let metadata = fs::symlink_metadata(&path).map_err(Refusal::Missing)?;
        // Where symlinks are not the only way a name leads elsewhere (junctions), every
        // name is resolved.
        if cfg!(unix) && !metadata.file_type().is_symlink() && !self.directory_is_symlink(name)? {
            return Ok((path, metadata));
        }
        let root = self.canonical_root()?;
        let resolved = path.canonicalize().map_err(Refusal::Missing)?;
        if !resolved.starts_with(&root) {
            return Err(Refusal::OutsideRoot);
        }
        let metadata = fs::metadata(&resolved).map_err(Refusal::Missing)?;
        Ok((resolved, metadata))
    }

    /// True when `name` is `DIRECTORY/FILE` and `DIRECTORY` is a symlink.
    fn directory_is_symlink(&self, name: &str) -> Result<bool, Refusal> {
        match Path::new(name).parent().filter(|directory| !directory.as_os_str().is_empty()) {
            Some(directory) => {
                Ok(fs::symlink_metadata(self.root.join(directory)).map_err(Refusal::Missing)?.file_type().is_symlink())
            }
            None => Ok(false),
        }
    }

    /// The root's canonical path, worked out again only when the root or that path is
    /// now another directory than it was.
    fn canonical_root(&self) -> Result<PathBuf, Refusal> {
        let identity = Stamp::of(&fs::metadata(&self.root).map_err(Refusal::Root)?);
        let known = {
            let cache = lock(&self.cache);
            cache.root.as_ref().filter(|known| known.identity == identity.identity).map(|known| known.path.clone())
        };
        if let Some(path) = known
            && HAS_IDENTITY
            && fs::metadata(&path).is_ok_and(|metadata| Stamp::of(&metadata).identity == identity.identity)
        {
            return Ok(path);
        }
        let path = self.root.canonicalize().map_err(Refusal::Root)?;
        let mut cache = lock(&self.cache);
        cache.root = Some(CanonicalRoot { identity: identity.identity, path: path.clone() });
        Ok(path)
    }

    /// The text read before from the file `stamp` describes, unless it may have changed
    /// since without the stamp showing it.
    fn cached(&self, name: &str, stamp: &Stamp) -> Option<String> {
        let cached = lock(&self.cache).files.get(name).cloned()?;
        (cached.stamp == *stamp && !is_racy(stamp.modified, cached.read_at)).then(|| String::from(&*cached.text))
    }

    #[cfg(test)]
    fn count_open(&self) {
        lock(&self.cache).opened += 1;
    }

    #[cfg(not(test))]
    fn count_open(&self) {}
}

impl WorkspaceFiles for FsWorkspace {
    fn read(&self, name: &str) -> Option<String> {
        match self.try_read(name) {
            Ok(text) => Some(text),
            Err(reason) => {
                tracing::debug!(
                    root = %self.root.display(),
                    name,
                    %reason,
                    "not using workspace file"
                );
                None
            }
        }
    }
}

/// Accepts `FILE` and `DIRECTORY/FILE`: relative, no `.` or `..`, no root or prefix.
fn check_name(name: &str) -> Result<(), Refusal> {
    let mut depth = 0;
    for component in Path::new(name).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::Prefix(_) | Component::RootDir => return Err(Refusal::Absolute),
            Component::ParentDir | Component::CurDir => return Err(Refusal::NotPlain),
        }
    }
    if depth == 0 {
        return Err(Refusal::NotPlain);
    }
    if depth > MAX_NAME_DEPTH {
        return Err(Refusal::TooDeep);
    }
    Ok(())
}

/// Why a workspace file was not read.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("can't read an absolute path")]
    Absolute,
    #[error("can't read a name that is empty or contains `.` or `..`")]
    NotPlain,
    #[error("can't read a file nested more than one directory deep")]
    TooDeep,
    #[error("can't open the workspace directory: {0}")]
    Root(io::Error),
    #[error("can't find the file: {0}")]
    Missing(io::Error),
    #[error("can't read a file outside the workspace (a symlink leads out)")]
    OutsideRoot,
    #[error("can't read a file replaced while it was being opened")]
    Replaced,
    #[error("can't read something that is not a regular file")]
    NotRegularFile,
    #[error("can't read a file of {size} bytes: the limit is {MAX_WORKSPACE_FILE_BYTES}")]
    TooLarge { size: u64 },
    #[error("can't read the file: {0}")]
    Unreadable(io::Error),
    #[error("can't read the file as text: it is not UTF-8")]
    NotUtf8,
}

#[cfg(test)]
mod tests;
