//! Reading embeddings answers: `data[].embedding` put back in input order and checked.

use serde_json::Value;
use squidbot_core::provider::ProviderError;

use crate::fault::Fault;
use crate::http::Transport;

/// Reads an embeddings response to `expected` inputs: one vector per input, ordered by
/// `index` (position when a server leaves it out), all of one non-zero length.
pub(super) fn parse_embeddings(
    transport: &Transport,
    value: &Value,
    expected: usize,
) -> Result<Vec<Vec<f32>>, ProviderError> {
    if value.get("error").is_some_and(|error| !error.is_null()) {
        return Err(Fault::from_error_value(value).classify(transport.provider()));
    }
    let Some(items) = value.get("data").and_then(Value::as_array) else {
        return Err(transport.invalid("the embeddings response has no `data` list".to_owned()));
    };
    if items.len() != expected {
        return Err(transport.invalid(format!("asked for {expected} embeddings, got {}", items.len())));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in items.iter().enumerate() {
        let index = match item.get("index") {
            None | Some(Value::Null) => position,
            Some(index) => index
                .as_u64()
                .and_then(|index| usize::try_from(index).ok())
                .ok_or_else(|| transport.invalid(format!("embedding {position} has an index that is not a number")))?,
        };
        let vector = vector_of(item.get("embedding"))
            .ok_or_else(|| transport.invalid(format!("embedding {index} is not a list of numbers")))?;
        if vector.is_empty() {
            return Err(transport.invalid(format!("embedding {index} is empty")));
        }
        match slots.get_mut(index) {
            Some(slot @ None) => *slot = Some(vector),
            Some(Some(_)) => return Err(transport.invalid(format!("embedding index {index} appears twice"))),
            None => {
                return Err(transport.invalid(format!("embedding index {index} is out of range for {expected} inputs")));
            }
        }
    }
    // Every slot is filled: there are `expected` items and no index repeats or is out of range.
    let vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
    if let Some(first) = vectors.first()
        && let Some(other) = vectors.iter().find(|vector| vector.len() != first.len())
    {
        return Err(transport.invalid(format!(
            "embeddings have different lengths ({} and {})",
            first.len(),
            other.len()
        )));
    }
    Ok(vectors)
}

/// A JSON list of numbers as `f32`s; `None` for anything else (such as base64 text).
fn vector_of(value: Option<&Value>) -> Option<Vec<f32>> {
    value?.as_array()?.iter().map(|number| number.as_f64().map(|number| number as f32)).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::http::{Endpoint, KeyHeader, http_client};

    fn parse(value: Value, expected: usize) -> Result<Vec<Vec<f32>>, ProviderError> {
        let transport =
            Transport::new(http_client().unwrap(), Endpoint::new("p", "http://127.0.0.1:1/v1"), KeyHeader::Bearer, &[])
                .unwrap();
        parse_embeddings(&transport, &value, expected)
    }

    fn invalid_message(value: Value, expected: usize) -> String {
        match parse(value, expected) {
            Err(ProviderError::InvalidResponse { message, .. }) => message,
            other => panic!("expected InvalidResponse, got {other:?}"),
        }
    }

    #[test]
    fn vectors_are_put_back_in_index_order() {
        let value = json!({"object": "list", "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
            {"object": "embedding", "index": 0, "embedding": [1.0, 0.5]},
        ]});
        assert_eq!(parse(value, 2).unwrap(), vec![vec![1.0, 0.5], vec![0.0, 1.0]]);
        let without_index = json!({"data": [{"embedding": [1]}, {"embedding": [2]}]});
        assert_eq!(parse(without_index, 2).unwrap(), vec![vec![1.0], vec![2.0]]);
    }

    #[test]
    fn wrong_counts_lengths_and_indexes_are_invalid() {
        let one = json!({"data": [{"index": 0, "embedding": [1.0]}]});
        assert_eq!(invalid_message(one, 2), "asked for 2 embeddings, got 1");
        let ragged = json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]});
        assert_eq!(invalid_message(ragged, 2), "embeddings have different lengths (1 and 2)");
        let repeated = json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]});
        assert_eq!(invalid_message(repeated, 2), "embedding index 0 appears twice");
        let outside = json!({"data": [{"index": 5, "embedding": [1.0]}]});
        assert_eq!(invalid_message(outside, 1), "embedding index 5 is out of range for 1 inputs");
        let text = json!({"data": [{"index": 0, "embedding": "AAAA"}]});
        assert_eq!(invalid_message(text, 1), "embedding 0 is not a list of numbers");
        let empty = json!({"data": [{"index": 0, "embedding": []}]});
        assert_eq!(invalid_message(empty, 1), "embedding 0 is empty");
        assert!(invalid_message(json!({"object": "list"}), 1).contains("no `data` list"));
    }

    #[test]
    fn an_error_document_is_classified() {
        let error = parse(json!({"error": {"message": "slow down", "type": "rate_limit_error"}}), 1).unwrap_err();
        assert!(matches!(error, ProviderError::RateLimited { .. }), "{error:?}");
    }
}
