//! A string that never prints itself: `Debug`, `Display` and `Serialize` all redact.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Placeholder shown wherever a secret would otherwise be printed.
pub const REDACTED: &str = "[redacted]";

/// A secret value (API key, token, password). Only [`Secret::expose`] reveals it.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value as a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// Returns the real value. Call sites are the only places a secret leaves this type.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when the secret holds no characters.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints_its_value() {
        let secret = Secret::new("sk-very-secret");
        assert_eq!(format!("{secret}"), REDACTED);
        assert_eq!(format!("{secret:?}"), REDACTED);
        assert_eq!(serde_json::to_string(&secret).unwrap(), format!("\"{REDACTED}\""));
        assert_eq!(secret.expose(), "sk-very-secret");
    }
}
