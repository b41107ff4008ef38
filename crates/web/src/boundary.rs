//! What may leave through a web request: no secret (a configured value or a key shape,
//! as written, percent-encoded or base64-encoded) in what the model asks to send, no more
//! requests per session than `max_requests_per_minute`, and only hosts the allow and block
//! lists let through.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use squidbot_core::leaks::LeakScanner;
use squidbot_core::tool::ToolError;
use squidbot_types::config::WebConfig;
use tokio::time::Instant;

/// The window the rate limit counts requests in.
const WINDOW: Duration = Duration::from_secs(60);

/// Shortest run of base64 characters decoded to look for a key inside (shorter ones can't
/// hold a key worth finding and are often ordinary words).
const MIN_ENCODED_LEN: usize = 16;

/// The request limit and host lists of `[tools.web]`, shared by both web tools.
#[derive(Debug)]
pub struct WebPolicy {
    /// Requests per session per minute; 0 for no limit.
    max_per_minute: u32,
    /// Host globs allowed (empty: every host).
    allow_hosts: Vec<String>,
    /// Host globs refused.
    block_hosts: Vec<String>,
    /// When each session's requests of the last minute went out.
    recent: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl Default for WebPolicy {
    fn default() -> Self {
        Self::from_config(&WebConfig::default())
    }
}

impl WebPolicy {
    /// The policy of `[tools.web]`.
    pub fn from_config(config: &WebConfig) -> Self {
        let lowered = |globs: &[String]| globs.iter().map(|glob| glob.trim().to_ascii_lowercase()).collect();
        Self {
            max_per_minute: config.max_requests_per_minute,
            allow_hosts: lowered(&config.allow_hosts),
            block_hosts: lowered(&config.block_hosts),
            recent: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one request of `session`, or says when the next one may go.
    pub(crate) fn admit(&self, session: &str, tool: &str) -> Result<(), ToolError> {
        if self.max_per_minute == 0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        recent.retain(|_, times| {
            while times.front().is_some_and(|time| now.duration_since(*time) >= WINDOW) {
                times.pop_front();
            }
            !times.is_empty()
        });
        let times = recent.entry(session.to_owned()).or_default();
        if times.len() >= self.max_per_minute as usize {
            let oldest = times.front().copied().unwrap_or(now);
            let wait = WINDOW.saturating_sub(now.duration_since(oldest)).as_secs().max(1);
            return Err(ToolError::RespondToModel(format!(
                "Refused: {tool} is limited to {} web requests per minute in this session (tools.web.max_requests_per_minute); try again in {wait}s",
                self.max_per_minute
            )));
        }
        times.push_back(now);
        Ok(())
    }

    /// Whether `host` may be reached: never when a block glob matches it; with an allow
    /// list, only when an allow glob does.
    pub(crate) fn check_host(&self, host: &str, tool: &str) -> Result<(), ToolError> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if let Some(glob) = self.block_hosts.iter().find(|glob| glob_matches(glob, &host)) {
            return Err(ToolError::RespondToModel(format!(
                "Refused: {tool} may not reach {host} (it matches {glob:?} in tools.web.block_hosts)"
            )));
        }
        if !self.allow_hosts.is_empty() && !self.allow_hosts.iter().any(|glob| glob_matches(glob, &host)) {
            return Err(ToolError::RespondToModel(format!(
                "Refused: {tool} may only reach the hosts in tools.web.allow_hosts ({}), not {host}",
                self.allow_hosts.join(", ")
            )));
        }
        Ok(())
    }
}

/// `*` matches any run of characters (dots included); everything else matches itself.
fn glob_matches(glob: &str, host: &str) -> bool {
    let (glob, host) = (glob.as_bytes(), host.as_bytes());
    let (mut g, mut h) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while h < host.len() {
        if g < glob.len() && glob[g] == b'*' {
            star = Some((g, h));
            g += 1;
        } else if g < glob.len() && glob[g] == host[h] {
            g += 1;
            h += 1;
        } else if let Some((star_g, star_h)) = star {
            g = star_g + 1;
            h = star_h + 1;
            star = Some((star_g, star_h + 1));
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|byte| *byte == b'*')
}

/// Refuses `text` (what a request would carry: its URL, its query) when it holds a
/// secret as written, percent-decoded, or base64-decoded; `what` names it for the model.
pub(crate) fn refuse_secrets(leaks: &LeakScanner, text: &str, what: &str) -> Result<(), ToolError> {
    match find_secret(leaks, text) {
        Some(kind) => Err(ToolError::RespondToModel(format!(
            "Refused: {what} carries a secret ({kind}); secrets never leave through web requests"
        ))),
        None => Ok(()),
    }
}

/// The kind of the first secret in `text` or one of its decoded forms.
fn find_secret(leaks: &LeakScanner, text: &str) -> Option<&'static str> {
    let decoded = percent_decode(text);
    let mut views = vec![text.to_owned()];
    if decoded != text {
        views.push(decoded);
    }
    for view in &views {
        if let Some(finding) = leaks.scan(view).first() {
            return Some(finding.kind);
        }
        for run in base64_runs(view) {
            let Some(bytes) = decode_base64(run) else { continue };
            let plain = String::from_utf8_lossy(&bytes);
            if let Some(finding) = leaks.scan(&plain).first() {
                return Some(finding.kind);
            }
        }
    }
    None
}

/// `text` with its `%XX` escapes decoded (and `+` as a space, as in a form query); bytes
/// that are no UTF-8 become U+FFFD.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut output = Vec::with_capacity(bytes.len());
    let hex = |byte: u8| char::from(byte).to_digit(16);
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => output.push(b' '),
            b'%' if index + 2 < bytes.len() => match (hex(bytes[index + 1]), hex(bytes[index + 2])) {
                (Some(high), Some(low)) => {
                    output.push((high * 16 + low) as u8);
                    index += 3;
                    continue;
                }
                _ => output.push(b'%'),
            },
            other => output.push(other),
        }
        index += 1;
    }
    String::from_utf8_lossy(&output).into_owned()
}

/// Runs of base64 characters long enough to hide a key: split as URL-safe base64 (`/`
/// separates path segments) and as standard base64 (`/` is one of its characters).
fn base64_runs(text: &str) -> impl Iterator<Item = &str> {
    let url_safe = text.split(|character: char| !(character.is_ascii_alphanumeric() || matches!(character, '-' | '_')));
    let standard = text.split(|character: char| !(character.is_ascii_alphanumeric() || matches!(character, '+' | '/')));
    url_safe.chain(standard).filter(|run| run.len() >= MIN_ENCODED_LEN)
}

/// Decodes a run in the standard or the URL-safe alphabet, padded or not.
fn decode_base64(run: &str) -> Option<Vec<u8>> {
    let config = GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let standard = GeneralPurpose::new(&base64::alphabet::STANDARD, config);
    let url_safe = GeneralPurpose::new(&base64::alphabet::URL_SAFE, config);
    // A run whose length leaves a lone character can't be whole base64: drop it.
    let usable = &run[..run.len() - usize::from(run.len() % 4 == 1)];
    standard.decode(usable).or_else(|_| url_safe.decode(usable)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_globs_match_whole_hosts() {
        assert!(glob_matches("example.org", "example.org"));
        assert!(!glob_matches("example.org", "example.org.evil.test"));
        assert!(glob_matches("*.example.org", "docs.example.org"));
        assert!(!glob_matches("*.example.org", "example.org"));
        assert!(!glob_matches("*.example.org", "badexample.org"));
        assert!(glob_matches("*", "anything.test"));
        assert!(glob_matches("api.*.test", "api.one.test"));
    }

    #[test]
    fn block_wins_over_allow() {
        let config = WebConfig {
            allow_hosts: vec!["*.example.org".into()],
            block_hosts: vec!["secret.example.org".into()],
            ..WebConfig::default()
        };
        let policy = WebPolicy::from_config(&config);
        assert!(policy.check_host("docs.example.org", "web_fetch").is_ok());
        assert!(policy.check_host("Secret.Example.org.", "web_fetch").is_err());
        assert!(policy.check_host("other.test", "web_fetch").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn the_rate_limit_counts_per_session_and_frees_up_after_a_minute() {
        let policy = WebPolicy::from_config(&WebConfig { max_requests_per_minute: 2, ..WebConfig::default() });
        assert!(policy.admit("a", "web_fetch").is_ok());
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(policy.admit("a", "web_fetch").is_ok());
        let refusal = policy.admit("a", "web_fetch").err();
        assert!(
            matches!(&refusal, Some(ToolError::RespondToModel(message)) if message.ends_with("try again in 40s")),
            "{refusal:?}"
        );
        assert!(policy.admit("b", "web_fetch").is_ok(), "another session has its own budget");
        tokio::time::advance(Duration::from_secs(40)).await;
        assert!(policy.admit("a", "web_fetch").is_ok());
    }

    #[test]
    fn secrets_are_found_as_written_percent_encoded_and_in_base64() {
        let leaks = LeakScanner::new(["correct horse/battery".to_owned()]);
        for text in [
            "https://x.test/?q=correct horse/battery",
            "https://x.test/?q=correct%20horse%2Fbattery",
            "https://x.test/?q=correct+horse%2fbattery",
            "https://x.test/Y29ycmVjdCBob3JzZS9iYXR0ZXJ5/",
            // An OpenAI key, base64url in the path.
            "https://x.test/c2stcHJvai1hYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3gxMjM0/",
        ] {
            assert!(find_secret(&leaks, text).is_some(), "{text}");
        }
        assert_eq!(find_secret(&leaks, "https://x.test/docs/getting-started?page=2"), None);
    }
}
