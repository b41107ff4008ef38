//! Shell-style patterns for names and arguments: `*` any run of characters, `?` one
//! character, everything else itself.

/// Whether `text` matches `pattern` as a whole.
pub fn matches(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|character| *character == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn stars_and_question_marks() {
        assert!(matches("cron_*", "cron_add"));
        assert!(matches("*", ""));
        assert!(matches("git push*", "git push --force origin main"));
        assert!(!matches("git push*", "echo git push"));
        assert!(matches("*rm -rf*", "cd x && rm -rf /"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(matches("files__*", "files__read"));
        assert!(!matches("exec", "exec2"));
        assert!(matches("*.*.*", "a.b.c"));
        assert!(!matches("*.*.*", "a.b"));
    }
}
