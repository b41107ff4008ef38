//! Credentials inside URLs the gateway shows (health, `status`, `config.get`, the web UI):
//! `user:password@` userinfo and key-like query parameters become `REDACTED`.

use serde_json::Value;

/// What a hidden part of a URL reads as.
pub(crate) const REDACTED: &str = "REDACTED";

/// Query parameter names that carry a credential, compared without case.
const SECRET_PARAMETERS: [&str; 9] =
    ["api-key", "api_key", "key", "token", "access_token", "sig", "signature", "password", "secret"];

/// Fragments that make any other parameter name look like a credential too
/// (`x-api-key`, `client_secret`, `refresh_token`, `apikey`).
const SECRET_FRAGMENTS: [&str; 6] = ["token", "secret", "password", "apikey", "api_key", "api-key"];

/// `text` with the credentials of a URL hidden; anything that is not a `scheme://` URL is
/// returned unchanged.
pub(crate) fn url(text: &str) -> String {
    let Some(scheme_end) = text.find("://") else { return text.to_owned() };
    let scheme = &text[..scheme_end];
    let is_scheme = !scheme.is_empty()
        && scheme.starts_with(|first: char| first.is_ascii_alphabetic())
        && scheme.chars().all(|character| character.is_ascii_alphanumeric() || "+-.".contains(character));
    if !is_scheme {
        return text.to_owned();
    }
    let rest = &text[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => format!("{REDACTED}{}", &authority[at..]),
        None => authority.to_owned(),
    };
    format!("{scheme}://{authority}{}", redact_query(tail))
}

/// The path, query and fragment with the values of secret parameters hidden.
fn redact_query(tail: &str) -> String {
    let Some(question) = tail.find('?') else { return tail.to_owned() };
    let (path, after) = tail.split_at(question);
    let after = &after[1..];
    let (query, fragment) = match after.find('#') {
        Some(hash) => after.split_at(hash),
        None => (after, ""),
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if is_secret_parameter(name) => format!("{name}={REDACTED}"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{path}?{}{fragment}", pairs.join("&"))
}

fn is_secret_parameter(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_PARAMETERS.contains(&name.as_str()) || SECRET_FRAGMENTS.iter().any(|fragment| name.contains(fragment))
}

/// Every string in `value` that is a URL, with its credentials hidden.
pub(crate) fn urls_in(value: &mut Value) {
    match value {
        Value::String(text) => {
            if text.contains("://") {
                *text = url(text);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(urls_in),
        Value::Object(fields) => fields.values_mut().for_each(urls_in),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Hides the values of every MCP server's `env` in a serialized config: any of them may
/// have come from the vault (`"secret:NAME"`), which the resolved config no longer tells.
pub(crate) fn mcp_environment_in(config: &mut Value) {
    let Some(servers) = config.pointer_mut("/mcp/servers").and_then(Value::as_object_mut) else { return };
    for server in servers.values_mut() {
        if let Some(environment) = server.get_mut("env").and_then(Value::as_object_mut) {
            for value in environment.values_mut() {
                *value = Value::String(squidbot_types::secret::REDACTED.to_owned());
            }
        }
    }
}

/// Serializes a URL field with its credentials hidden.
pub(crate) fn serialize_url<S: serde::Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&url(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_server_environment_values_are_hidden() {
        let mut config = serde_json::json!({"mcp": {"servers": {"everything": {"env": {"GREETING": "from-the-vault"}, "command": "node"}}}});
        mcp_environment_in(&mut config);
        assert_eq!(
            config,
            serde_json::json!({"mcp": {"servers": {"everything": {"env": {"GREETING": squidbot_types::secret::REDACTED}, "command": "node"}}}})
        );
    }

    #[test]
    fn userinfo_and_key_like_parameters_are_hidden() {
        let cases = [
            ("https://user:hunter2@example.com/v1", "https://REDACTED@example.com/v1"),
            ("https://example.com/v1?api-key=abc&deployment=x", "https://example.com/v1?api-key=REDACTED&deployment=x"),
            (
                "https://x.blob/c?sv=1&sig=s3cr3t&SIGNATURE=a#frag",
                "https://x.blob/c?sv=1&sig=REDACTED&SIGNATURE=REDACTED#frag",
            ),
            (
                "http://h:8080?key=1&token=2&access_token=3",
                "http://h:8080?key=REDACTED&token=REDACTED&access_token=REDACTED",
            ),
            ("postgres://me:pw@db/x?password=p&secret=q", "postgres://REDACTED@db/x?password=REDACTED&secret=REDACTED"),
            (
                "https://h/?client_secret=a&api_key=b&x-api-key=c",
                "https://h/?client_secret=REDACTED&api_key=REDACTED&x-api-key=REDACTED",
            ),
            ("https://h/path@not-userinfo", "https://h/path@not-userinfo"),
            ("http://127.0.0.1:8089/v1", "http://127.0.0.1:8089/v1"),
            ("not a url", "not a url"),
            ("see ://odd", "see ://odd"),
        ];
        for (given, shown) in cases {
            assert_eq!(url(given), shown, "{given}");
        }
    }

    #[test]
    fn every_url_in_a_document_is_redacted() {
        let mut value = serde_json::json!({"a": ["https://u:p@h/?token=t", 1], "b": {"c": "plain"}});
        urls_in(&mut value);
        assert_eq!(value, serde_json::json!({"a": ["https://REDACTED@h/?token=REDACTED", 1], "b": {"c": "plain"}}));
    }
}
