//! A context workspace's files moved into another workspace without overwriting any
//! (context merges), or deleted (purges). Errors name the path and say what failed.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, ErrorKind, Read};
use std::path::{Path, PathBuf};

/// Names tried for a file whose name is taken: `<name>.merged`, `<name>.merged-2`, …
const MAX_FREE_NAME_TRIES: u32 = 1_000;

fn at(path: &Path, error: &io::Error) -> String {
    format!("{}: {error}", path.display())
}

/// Moves every file under `source` to the same place under `target` (made as needed)
/// without overwriting any: a file whose name is taken there is kept as
/// `<name>.merged` (or `.merged-2`, …), unless both hold the same bytes, when the moved
/// one is dropped (nothing is lost). `source` is removed once empty. Returns how many
/// files were moved, dropped duplicates included; nothing when `source` does not exist.
pub(crate) fn move_files(source: &Path, target: &Path) -> Result<usize, String> {
    match fs::symlink_metadata(source) {
        Ok(metadata) if metadata.is_dir() => move_directory(source, target),
        Ok(_) => Err(format!("{} is not a directory", source.display())),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(0),
        Err(error) => Err(at(source, &error)),
    }
}

fn move_directory(source: &Path, target: &Path) -> Result<usize, String> {
    fs::create_dir_all(target).map_err(|error| at(target, &error))?;
    let mut moved = 0;
    let entries = fs::read_dir(source).map_err(|error| at(source, &error))?;
    for entry in entries {
        let entry = entry.map_err(|error| at(source, &error))?;
        let from = entry.path();
        let name = entry.file_name();
        // Not followed: a link moves as a link.
        let kind = entry.file_type().map_err(|error| at(&from, &error))?;
        if kind.is_dir() {
            let to = target.join(&name);
            let to = match fs::symlink_metadata(&to) {
                Ok(metadata) if metadata.is_dir() => to,
                Ok(_) => free_name(target, &name)?,
                Err(error) if error.kind() == ErrorKind::NotFound => to,
                Err(error) => return Err(at(&to, &error)),
            };
            moved += move_directory(&from, &to)?;
        } else {
            move_file(&from, target, &name, kind.is_file())?;
            moved += 1;
        }
    }
    fs::remove_dir(source).map_err(|error| at(source, &error))?;
    Ok(moved)
}

fn move_file(from: &Path, directory: &Path, name: &OsStr, regular: bool) -> Result<(), String> {
    let to = directory.join(name);
    match fs::symlink_metadata(&to) {
        Err(error) if error.kind() == ErrorKind::NotFound => rename(from, &to),
        Ok(metadata) if regular && metadata.is_file() && same_bytes(from, &to)? => {
            fs::remove_file(from).map_err(|error| at(from, &error))
        }
        Ok(_) => rename(from, &free_name(directory, name)?),
        Err(error) => Err(at(&to, &error)),
    }
}

/// The first of `<name>.merged`, `<name>.merged-2`, … not taken in `directory`.
fn free_name(directory: &Path, name: &OsStr) -> Result<PathBuf, String> {
    for attempt in 1..=MAX_FREE_NAME_TRIES {
        let mut candidate = name.to_os_string();
        candidate.push(if attempt == 1 { ".merged".to_owned() } else { format!(".merged-{attempt}") });
        let path = directory.join(candidate);
        match fs::symlink_metadata(&path) {
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(path),
            Err(error) => return Err(at(&path, &error)),
            Ok(_) => {}
        }
    }
    Err(format!("{}: no free name for a second {}", directory.display(), Path::new(name).display()))
}

/// Renames `from` to `to`, copying (then deleting) when they are on different file
/// systems.
fn rename(from: &Path, to: &Path) -> Result<(), String> {
    match fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == ErrorKind::CrossesDevices => {
            let metadata = fs::symlink_metadata(from).map_err(|error| at(from, &error))?;
            if metadata.file_type().is_symlink() {
                copy_link(from, to)?;
            } else {
                fs::copy(from, to).map_err(|error| format!("copying {} failed: {}", from.display(), at(to, &error)))?;
            }
            fs::remove_file(from).map_err(|error| at(from, &error))
        }
        Err(error) => Err(format!("moving {} failed: {}", from.display(), at(to, &error))),
    }
}

#[cfg(unix)]
fn copy_link(from: &Path, to: &Path) -> Result<(), String> {
    let target = fs::read_link(from).map_err(|error| at(from, &error))?;
    std::os::unix::fs::symlink(target, to).map_err(|error| at(to, &error))
}

#[cfg(not(unix))]
fn copy_link(from: &Path, to: &Path) -> Result<(), String> {
    fs::copy(from, to).map(drop).map_err(|error| at(to, &error))
}

/// Whether two regular files hold the same bytes.
fn same_bytes(left: &Path, right: &Path) -> Result<bool, String> {
    let length = |path: &Path| fs::metadata(path).map(|metadata| metadata.len()).map_err(|error| at(path, &error));
    if length(left)? != length(right)? {
        return Ok(false);
    }
    let mut left_file = File::open(left).map_err(|error| at(left, &error))?;
    let mut right_file = File::open(right).map_err(|error| at(right, &error))?;
    let mut left_buffer = vec![0_u8; 64 * 1024];
    let mut right_buffer = vec![0_u8; 64 * 1024];
    loop {
        let read = left_file.read(&mut left_buffer).map_err(|error| at(left, &error))?;
        if read == 0 {
            return Ok(true);
        }
        right_file.read_exact(&mut right_buffer[..read]).map_err(|error| at(right, &error))?;
        if left_buffer[..read] != right_buffer[..read] {
            return Ok(false);
        }
    }
}

/// Deletes `directory` and everything in it; how many files (links included) it held.
/// Nothing when it does not exist.
pub(crate) fn remove_files(directory: &Path) -> Result<usize, String> {
    let count = match count_files(directory) {
        Ok(count) => count,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(at(directory, &error)),
    };
    fs::remove_dir_all(directory).map_err(|error| at(directory, &error))?;
    Ok(count)
}

fn count_files(directory: &Path) -> io::Result<usize> {
    let mut count = 0;
    for entry in fs::read_dir(directory)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            count += count_files(&entry.path())?;
        } else {
            count += 1;
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_move_without_overwriting_and_duplicates_are_dropped() {
        let directory = tempfile::tempdir().unwrap();
        let source = directory.path().join("from");
        let target = directory.path().join("to");
        fs::create_dir_all(source.join("notes/deep")).unwrap();
        fs::create_dir_all(target.join("notes")).unwrap();
        fs::write(source.join("SOUL.md"), "same").unwrap();
        fs::write(target.join("SOUL.md"), "same").unwrap();
        fs::write(source.join("USER.md"), "theirs").unwrap();
        fs::write(target.join("USER.md"), "mine").unwrap();
        fs::write(target.join("USER.md.merged"), "an earlier merge").unwrap();
        fs::write(source.join("notes/deep/a.txt"), "a").unwrap();
        fs::write(source.join("notes.txt"), "b").unwrap();
        assert_eq!(move_files(&source, &target).unwrap(), 4);
        assert!(!source.exists());
        let read = |name: &str| fs::read_to_string(target.join(name)).unwrap();
        assert_eq!(read("SOUL.md"), "same");
        assert_eq!(read("USER.md"), "mine");
        assert_eq!(read("USER.md.merged"), "an earlier merge");
        assert_eq!(read("USER.md.merged-2"), "theirs");
        assert_eq!(read("notes/deep/a.txt"), "a");
        assert_eq!(read("notes.txt"), "b");
        assert!(!target.join("SOUL.md.merged").exists());
        assert_eq!(move_files(&source, &target).unwrap(), 0, "a missing source moves nothing");
        assert_eq!(remove_files(&target).unwrap(), 6);
        assert!(!target.exists());
    }
}
