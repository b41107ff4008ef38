//! Deciding when a new memory only rewords an existing one.

use std::collections::BTreeSet;

/// Lower-case words of `text` joined by single spaces.
pub fn normalize(text: &str) -> String {
    words(text).collect::<Vec<_>>().join(" ")
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|character: char| !character.is_alphanumeric()).filter(|word| !word.is_empty()).map(str::to_lowercase)
}

/// Word-set overlap above which two memories of three or more words are the same memory.
const SAME_MEMORY_OVERLAP: f64 = 0.8;

/// True when `new` says the same as `existing`: equal after normalization, or (for
/// texts of three or more words) sharing at least 80 % of their distinct words.
pub fn is_near_duplicate(existing: &str, new: &str) -> bool {
    let left: BTreeSet<String> = words(existing).collect();
    let right: BTreeSet<String> = words(new).collect();
    if left.is_empty() || right.is_empty() {
        return false;
    }
    if normalize(existing) == normalize(new) {
        return true;
    }
    if left.len() < 3 || right.len() < 3 {
        return false;
    }
    let shared = left.intersection(&right).count() as f64;
    let all = left.union(&right).count() as f64;
    shared / all >= SAME_MEMORY_OVERLAP
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewordings_match_and_different_facts_do_not() {
        assert!(is_near_duplicate("User prefers dark mode.", "the user prefers dark mode"));
        assert!(is_near_duplicate("Likes TEA", "likes tea!"));
        assert!(!is_near_duplicate("User lives in Berlin", "User lives in Paris"));
        assert!(!is_near_duplicate("likes tea", "likes coffee"));
        assert!(!is_near_duplicate("", ""));
    }
}
