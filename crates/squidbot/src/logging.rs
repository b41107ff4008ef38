//! Log setup: `tracing` to stderr as text or JSON, with every known secret value
//! scrubbed from each line before it is written.

use std::io::Write;
use std::sync::Arc;

use squidbot_types::config::{LogFormat, LoggingConfig};
use squidbot_types::secret::REDACTED;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Writes to stderr, replacing secret values with a placeholder.
#[derive(Clone)]
pub struct RedactingWriter {
    secrets: Arc<Vec<String>>,
}

impl RedactingWriter {
    /// A writer that hides `secrets`.
    pub fn new(secrets: Vec<String>) -> Self {
        Self { secrets: Arc::new(secrets) }
    }

    /// Replaces every secret in `text`.
    pub fn scrub(&self, text: &str) -> String {
        self.secrets.iter().fold(text.to_owned(), |text, secret| text.replace(secret.as_str(), REDACTED))
    }
}

impl Write for RedactingWriter {
    fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buffer);
        std::io::stderr().write_all(self.scrub(&text).as_bytes())?;
        Ok(buffer.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> MakeWriter<'a> for RedactingWriter {
    type Writer = RedactingWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Installs the global subscriber. `RUST_LOG` wins over `logging.level`.
pub fn init(config: &LoggingConfig, secrets: Vec<String>) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&config.level))
        .unwrap_or_else(|_| EnvFilter::new("warn"));
    let writer = RedactingWriter::new(secrets);
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_target(false);
    let installed = match config.format {
        LogFormat::Text => builder.compact().try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    if let Err(error) = installed {
        eprintln!("warning: can't set up logging: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_replaces_every_occurrence() {
        let writer = RedactingWriter::new(vec!["sk-abc123".into()]);
        assert_eq!(writer.scrub("key=sk-abc123 again sk-abc123"), "key=[redacted] again [redacted]");
    }
}
