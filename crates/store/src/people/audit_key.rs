//! The audit trail's key: 32 random bytes in a file of their own beside the database
//! (hex, readable by its owner only), made once and never replaced, because rows
//! chained with a lost key can't be checked any more.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::Path;

use squidbot_core::people::PeopleStoreError;
use squidbot_core::random::{RandomSource, SystemRandom};

/// Bytes of a new key.
const KEY_BYTES: usize = 32;

/// Reads the audit key kept in `path`, or makes one there (mode 0600) when the file does
/// not exist. A file that does not hold a key is an error and is left as it is.
pub fn load_or_create_audit_key(path: &Path) -> Result<Vec<u8>, PeopleStoreError> {
    let shown = path.display();
    match fs::read(path) {
        Ok(bytes) => return parse(&bytes, path),
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => return Err(PeopleStoreError::new(format!("read the audit key {shown}"), error)),
    }
    let action = format!("create the audit key {shown}");
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|error| PeopleStoreError::new(&action, error))?;
    }
    let mut key = vec![0_u8; KEY_BYTES];
    SystemRandom.fill(&mut key);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = match options.open(path) {
        Ok(file) => file,
        // Another process made it first: theirs is the key.
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {
            let bytes =
                fs::read(path).map_err(|error| PeopleStoreError::new(format!("read the audit key {shown}"), error))?;
            return parse(&bytes, path);
        }
        Err(error) => return Err(PeopleStoreError::new(&action, error)),
    };
    file.write_all(format!("{}\n", hex(&key)).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|error| PeopleStoreError::new(&action, error))?;
    Ok(key)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The key a key file holds: hex digits (any case), surrounding whitespace allowed.
fn parse(bytes: &[u8], path: &Path) -> Result<Vec<u8>, PeopleStoreError> {
    let refuse = |reason: &str| {
        PeopleStoreError::new(
            format!("read the audit key {}", path.display()),
            format!(
                "{reason}; the file was left as it is (restore it from a backup, or move it away to start a new \
                 key, with which the rows written so far will not verify)"
            ),
        )
    };
    let text = std::str::from_utf8(bytes).map_err(|_| refuse("it is not text"))?.trim();
    if text.len() != KEY_BYTES * 2 {
        return Err(refuse(&format!("it holds {} characters instead of {} hex digits", text.len(), KEY_BYTES * 2)));
    }
    let digits: Option<Vec<u8>> =
        text.chars().map(|digit| digit.to_digit(16).and_then(|value| u8::try_from(value).ok())).collect();
    let digits = digits.ok_or_else(|| refuse("it holds characters that are not hex digits"))?;
    #[cfg(unix)]
    warn_if_readable_by_others(path);
    Ok(digits.chunks_exact(2).map(|pair| pair[0] << 4 | pair[1]).collect())
}

/// A key others can read lets them recompute the chain: say so (the file stays usable).
#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(metadata) = fs::metadata(path)
        && metadata.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{:o}", metadata.permissions().mode() & 0o777),
            "the audit key can be read by others than its owner; run chmod 600 on it"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_in_any_case_and_garbage_is_refused() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("audit.key");
        fs::write(&path, format!("  {}\n", "Ab".repeat(32))).unwrap();
        assert_eq!(load_or_create_audit_key(&path).unwrap(), vec![0xAB; 32]);
        for garbage in ["", "abc", &"zz".repeat(32), &"ab".repeat(33)] {
            fs::write(&path, garbage).unwrap();
            let error = load_or_create_audit_key(&path).unwrap_err().to_string();
            assert!(error.contains("left as it is"), "{error}");
            assert_eq!(fs::read_to_string(&path).unwrap(), garbage, "never replaced");
        }
        fs::write(&path, [0xFF_u8; 64]).unwrap();
        assert!(load_or_create_audit_key(&path).unwrap_err().to_string().contains("not text"));
    }
}
