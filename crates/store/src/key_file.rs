//! Key files: random bytes written as hex in a file of their own (readable by its owner
//! only), made once and never replaced, since whatever they lock is lost with them. The
//! audit trail's key and the vault's key are both kept this way.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::Path;

use squidbot_core::random::{RandomSource, SystemRandom};

/// One key file: what it is called in messages and what losing it costs.
pub(crate) struct KeyFile<'a> {
    /// Where it is.
    pub path: &'a Path,
    /// Bytes of the key.
    pub length: usize,
    /// What it is, for messages ("the audit key").
    pub what: &'a str,
    /// What a lost key costs, said when the file can't be read as a key.
    pub if_lost: &'a str,
}

impl KeyFile<'_> {
    /// Reads the key, or makes one (mode 0600) when the file does not exist. A file that
    /// does not hold a key is an error (a sentence) and is left as it is.
    pub fn load_or_create(&self) -> Result<Vec<u8>, String> {
        match fs::read(self.path) {
            Ok(bytes) => return self.parse(&bytes),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(format!("can't read {} {}: {error}", self.what, self.path.display())),
        }
        let failed = |error: std::io::Error| format!("can't create {} {}: {error}", self.what, self.path.display());
        if let Some(parent) = self.path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(failed)?;
        }
        let mut key = vec![0_u8; self.length];
        SystemRandom.fill(&mut key);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = match options.open(self.path) {
            Ok(file) => file,
            // Another process made it first: theirs is the key.
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                let bytes = fs::read(self.path)
                    .map_err(|error| format!("can't read {} {}: {error}", self.what, self.path.display()))?;
                return self.parse(&bytes);
            }
            Err(error) => return Err(failed(error)),
        };
        file.write_all(format!("{}\n", hex(&key)).as_bytes()).and_then(|()| file.sync_all()).map_err(failed)?;
        Ok(key)
    }

    /// The key a file holds: hex digits (any case), surrounding whitespace allowed.
    fn parse(&self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        let refuse = |reason: &str| {
            format!(
                "can't read {} {}: {reason}; the file was left as it is ({})",
                self.what,
                self.path.display(),
                self.if_lost
            )
        };
        let text = std::str::from_utf8(bytes).map_err(|_| refuse("it is not text"))?.trim();
        if text.len() != self.length * 2 {
            return Err(refuse(&format!(
                "it holds {} characters instead of {} hex digits",
                text.len(),
                self.length * 2
            )));
        }
        let key = unhex(text).ok_or_else(|| refuse("it holds characters that are not hex digits"))?;
        self.warn_if_readable_by_others();
        Ok(key)
    }

    /// A key others can read undoes what it protects: say so (the file stays usable).
    fn warn_if_readable_by_others(&self) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            if let Ok(metadata) = fs::metadata(self.path)
                && metadata.permissions().mode() & 0o077 != 0
            {
                tracing::warn!(
                    path = %self.path.display(),
                    mode = format!("{:o}", metadata.permissions().mode() & 0o777),
                    "{} can be read by others than its owner; run chmod 600 on it",
                    self.what
                );
            }
        }
    }
}

/// Bytes as lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Hex digits (any case) as bytes; `None` for anything else.
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digits: Option<Vec<u8>> =
        text.chars().map(|digit| digit.to_digit(16).and_then(|value| u8::try_from(value).ok())).collect();
    Some(digits?.chunks_exact(2).map(|pair| pair[0] << 4 | pair[1]).collect())
}
