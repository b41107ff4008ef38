//! Gateway authentication: a bearer token compared in constant time, or none.

use axum::http::HeaderMap;
use squidbot_types::Secret;

/// How clients prove who they are.
#[derive(Debug, Clone)]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Token(Secret),
    /// No authentication (the binary allows it only on loopback).
    None,
}

impl Auth {
    /// True when the request's headers satisfy this mode.
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        match self {
            Self::None => true,
            Self::Token(token) => headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
                .is_some_and(|given| constant_time_equal(given.trim().as_bytes(), token.expose().as_bytes())),
        }
    }
}

/// Compares without stopping at the first difference, so timing reveals nothing about
/// how much of a guess was right.
fn constant_time_equal(left: &[u8], right: &[u8]) -> bool {
    let mut difference = left.len() ^ right.len();
    for index in 0..left.len().max(right.len()) {
        let a = left.get(index).copied().unwrap_or(0);
        let b = right.get(index).copied().unwrap_or(0);
        difference |= usize::from(a ^ b);
    }
    difference == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_must_match_exactly() {
        let auth = Auth::Token(Secret::new("s3cret"));
        let mut headers = HeaderMap::new();
        assert!(!auth.allows(&headers));
        headers.insert("authorization", "Bearer s3cret".parse().unwrap());
        assert!(auth.allows(&headers));
        headers.insert("authorization", "Bearer s3cre".parse().unwrap());
        assert!(!auth.allows(&headers));
        headers.insert("authorization", "Bearer s3cretx".parse().unwrap());
        assert!(!auth.allows(&headers));
        assert!(Auth::None.allows(&HeaderMap::new()));
    }
}
