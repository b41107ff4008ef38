//! The audit trail's key: 32 random bytes in a file of their own beside the database
//! (hex, readable by its owner only), made once and never replaced, because rows
//! chained with a lost key can't be checked any more.

use std::path::Path;

use squidbot_core::people::PeopleStoreError;

use crate::key_file::KeyFile;

/// Bytes of a new key.
const KEY_BYTES: usize = 32;

/// Reads the audit key kept in `path`, or makes one there (mode 0600) when the file does
/// not exist. A file that does not hold a key is an error and is left as it is.
pub fn load_or_create_audit_key(path: &Path) -> Result<Vec<u8>, PeopleStoreError> {
    KeyFile {
        path,
        length: KEY_BYTES,
        what: "the audit key",
        if_lost: "restore it from a backup, or move it away to start a new key, with which the rows written so far \
                  will not verify",
    }
    .load_or_create()
    .map_err(|reason| PeopleStoreError::new(format!("read the audit key {}", path.display()), reason))
}

#[cfg(test)]
mod tests {
    use std::fs;

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
