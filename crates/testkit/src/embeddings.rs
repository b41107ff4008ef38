//! The fake "semantic" embedding model behind `POST /v1/embeddings`, and its answers.
//!
//! Texts become lower-case words; stop words are dropped, a plural `s`/`ies` is cut, and
//! each word maps through a small synonym table to a canonical word; each canonical word
//! is then feature-hashed (FNV-1a) into one of `dimensions` buckets with a hashed ±1 sign,
//! and the vector is L2-normalised. So "I drive a red car" lands near "automobile", and
//! texts sharing no (synonymous) word land far apart.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::exchange::{Exchange, tokens_for};
use crate::script::ErrorKind;
use crate::{openai, sse};

/// Vector size when a request names no `dimensions`.
pub const DEFAULT_EMBEDDING_DIMENSIONS: usize = 64;

/// Largest `dimensions` the scripted server serves.
pub(crate) const MAX_EMBEDDING_DIMENSIONS: u64 = 8192;

/// Groups of words the fake model treats as one; the first word is the canonical one.
const SYNONYMS: &[&[&str]] = &[
    &["car", "automobile", "vehicle", "auto"],
    &["dog", "puppy", "hound"],
    &["doctor", "physician", "medic"],
    &["happy", "glad", "joyful"],
    &["house", "home", "residence"],
    &["buy", "purchase"],
    &["big", "large", "huge"],
];

/// Words too common to say anything about a text.
const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "i", "me", "my", "you", "your", "we", "our", "he", "she", "it", "they", "is", "am", "are", "was",
    "were", "be", "to", "of", "and", "or", "in", "on", "at", "for", "with", "that", "this",
];

/// The fake model's vector for `text`: see the module documentation. Texts without any
/// meaningful word give the all-zero vector.
pub fn fake_embedding(text: &str, dimensions: usize) -> Vec<f32> {
    let mut vector = vec![0.0_f32; dimensions];
    if dimensions == 0 {
        return vector;
    }
    for word in text.split(|character: char| !character.is_alphanumeric()).filter(|word| !word.is_empty()) {
        let word = word.to_lowercase();
        if STOP_WORDS.contains(&word.as_str()) {
            continue;
        }
        let hash = fnv1a(canonical_word(&word).as_bytes());
        let bucket = usize::try_from(hash % dimensions as u64).unwrap_or(0);
        let sign = if (hash >> 32) & 1 == 1 { -1.0 } else { 1.0 };
        vector[bucket] += sign;
    }
    let length = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
    if length > 0.0 {
        vector.iter_mut().for_each(|value| *value /= length);
    }
    vector
}

/// The word the fake model files `word` (lower case) under: singular, then its synonym
/// group's first word.
fn canonical_word(word: &str) -> String {
    let singular = if let Some(stem) = word.strip_suffix("ies").filter(|stem| stem.len() >= 2) {
        format!("{stem}y")
    } else if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") {
        word[..word.len() - 1].to_owned()
    } else {
        word.to_owned()
    };
    SYNONYMS.iter().find(|group| group.contains(&singular.as_str())).map_or(singular, |group| group[0].to_owned())
}

/// 64-bit FNV-1a: stable across runs and platforms, unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}

/// The texts of a request's `input`: one string or a list of strings (anything else was
/// already reported as a violation and yields nothing).
fn inputs(body: &Value) -> Vec<&str> {
    match body.get("input") {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The successful answer to a (valid) embeddings request.
pub(crate) fn respond(body: &Value, exchange: &Exchange) -> Response {
    let dimensions = body
        .get("dimensions")
        .and_then(Value::as_u64)
        .and_then(|dimensions| usize::try_from(dimensions).ok())
        .unwrap_or(DEFAULT_EMBEDDING_DIMENSIONS);
    let texts = inputs(body);
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": fake_embedding(text, dimensions)}))
        .collect();
    let tokens: u64 = texts.iter().map(|text| tokens_for(text.chars().count())).sum();
    let answer = json!({
        "object": "list",
        "data": data,
        "model": exchange.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    });
    sse::raw_response(StatusCode::OK, "application/json", answer.to_string())
}

/// The OpenAI-style error the endpoint answers while failing with `status`.
pub(crate) fn failure(status: u16, exchange: &Exchange) -> Response {
    let kind = match status {
        401 | 403 => ErrorKind::Auth,
        429 => ErrorKind::RateLimit,
        400..=499 => ErrorKind::BadRequest,
        _ => ErrorKind::Server,
    };
    openai::error_response(status, kind, "", None, exchange)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(left: &[f32], right: &[f32]) -> f32 {
        left.iter().zip(right).map(|(left, right)| left * right).sum()
    }

    #[test]
    fn synonyms_and_plurals_share_a_canonical_word() {
        assert_eq!(canonical_word("automobile"), "car");
        assert_eq!(canonical_word("cars"), "car");
        assert_eq!(canonical_word("puppies"), "dog");
        assert_eq!(canonical_word("physician"), "doctor");
        assert_eq!(canonical_word("residence"), "house");
        assert_eq!(canonical_word("glass"), "glass");
        assert_eq!(canonical_word("bus"), "bus");
    }

    #[test]
    fn vectors_are_unit_length_deterministic_and_zero_when_empty() {
        let vector = fake_embedding("I drive a red car", 64);
        assert_eq!(vector.len(), 64);
        assert!((cosine(&vector, &vector) - 1.0).abs() < 1e-5);
        assert_eq!(vector, fake_embedding("I drive a red car", 64));
        assert_eq!(fake_embedding("", 16), vec![0.0; 16]);
        assert_eq!(fake_embedding("the a an", 16), vec![0.0; 16]);
        assert!(fake_embedding("car", 0).is_empty());
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn related_texts_are_close_and_unrelated_ones_far() {
        let car = fake_embedding("I drive a red car", 64);
        assert!(cosine(&car, &fake_embedding("automobile", 64)) > 0.5);
        assert!(cosine(&fake_embedding("my puppy", 64), &fake_embedding("the dog", 64)) > 0.99);
        assert!(cosine(&fake_embedding("purchase a huge home", 64), &fake_embedding("buy big house", 64)) > 0.99);
        let unrelated =
            cosine(&fake_embedding("I drive a red car", 256), &fake_embedding("the weather turns sunny", 256));
        assert!(unrelated.abs() < 0.3, "{unrelated}");
    }
}
