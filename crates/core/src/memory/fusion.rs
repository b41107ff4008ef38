//! Reciprocal rank fusion of the full-text and vector result lists.

use std::collections::HashMap;

use super::{Found, Ranked};

/// The `k` of reciprocal rank fusion: damps the weight of top ranks.
pub const RRF_K: f64 = 60.0;

/// Fuses two ranked lists (best first): each appearance adds `1 / (k + rank)`.
pub fn fuse(text: &[Ranked], vector: &[Ranked]) -> HashMap<i64, (f64, Found)> {
    let mut scores: HashMap<i64, (f64, Found)> = HashMap::with_capacity(text.len() + vector.len());
    for (rank, hit) in text.iter().enumerate() {
        let entry = scores.entry(hit.id).or_insert((0.0, Found::Text));
        entry.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
    }
    for (rank, hit) in vector.iter().enumerate() {
        let entry = scores.entry(hit.id).or_insert((0.0, Found::Vector));
        entry.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
        if entry.1 == Found::Text {
            entry.1 = Found::Both;
        }
    }
    scores
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(ids: &[i64]) -> Vec<Ranked> {
        ids.iter().map(|id| Ranked { id: *id, score: 0.0 }).collect()
    }

    #[test]
    fn an_item_in_both_lists_beats_items_in_one() {
        let scores = fuse(&ranked(&[1, 2, 3]), &ranked(&[3, 4]));
        assert_eq!(scores[&3].1, Found::Both);
        assert!(scores[&3].0 > scores[&1].0);
        assert!((scores[&1].0 - 1.0 / 61.0).abs() < 1e-12);
        assert!((scores[&3].0 - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-12);
        assert_eq!(scores[&4].1, Found::Vector);
    }
}
