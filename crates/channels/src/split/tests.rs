//! Unit tests of reply splitting: each boundary in order of preference, Unicode and emoji
//! sequences, code fences closed and reopened, and thousands of seeded random replies.

use squidbot_core::random::{RandomSource, SeededRandom};

use super::*;

fn non_whitespace(text: &str) -> String {
    text.chars().filter(|character| !character.is_whitespace()).collect()
}

fn assert_well_formed(parts: &[String], max: usize) {
    for part in parts {
        assert!(!part.is_empty(), "empty part in {parts:?}");
        assert_eq!(part.trim(), part, "untrimmed part {part:?}");
        assert!(char_count(part) <= max.max(1), "part of {} chars over {max}: {part:?}", char_count(part));
    }
}

#[test]
fn short_text_is_one_trimmed_part() {
    assert_eq!(split_message("  hello world \n", 100), vec!["hello world"]);
}

#[test]
fn empty_or_blank_text_gives_no_parts() {
    assert!(split_message("", 10).is_empty());
    assert!(split_message(" \n\n\t ", 10).is_empty());
}

#[test]
fn paragraphs_are_kept_whole_when_they_fit() {
    let text = "first paragraph here\n\nsecond one\n\nthird paragraph is longer";
    let parts = split_message(text, 34);
    assert_eq!(parts, vec!["first paragraph here\n\nsecond one", "third paragraph is longer"]);
}

#[test]
fn a_paragraph_break_is_taken_before_a_line_break() {
    let text = "aaaa\nbbbb\n\ncccc\ndddd";
    assert_eq!(split_message(text, 12), vec!["aaaa\nbbbb", "cccc\ndddd"]);
}

#[test]
fn long_paragraphs_are_cut_at_line_breaks() {
    let text = "line one\nline two\nline three\nline four";
    assert_eq!(split_message(text, 20), vec!["line one\nline two", "line three\nline four"]);
}

#[test]
fn long_lines_are_cut_at_sentence_ends() {
    let text = "This is one. This is two! Is this three? Yes.";
    assert_eq!(split_message(text, 26), vec!["This is one. This is two!", "Is this three? Yes."]);
}

#[test]
fn cjk_sentences_are_cut_after_full_stops() {
    let text = "今日は晴れです。明日は雨です。明後日は雪です。";
    assert_eq!(split_message(text, 16), vec!["今日は晴れです。明日は雨です。", "明後日は雪です。"]);
}

#[test]
fn long_sentences_are_cut_between_words() {
    let text = "alpha beta gamma delta epsilon zeta eta theta";
    let parts = split_message(text, 17);
    assert_eq!(parts, vec!["alpha beta gamma", "delta epsilon", "zeta eta theta"]);
}

#[test]
fn a_huge_single_word_is_cut_mid_word() {
    let word = "x".repeat(25);
    let parts = split_message(&format!("short {word} end"), 10);
    assert_eq!(parts, vec!["short", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxx end"]);
}

#[test]
fn length_counts_characters_not_bytes() {
    let text = "🦑🦑🦑 日本語 ü";
    assert_eq!(char_count(text), 9);
    assert_eq!(split_message(text, 9), vec![text]);
    assert_eq!(split_message(text, 7), vec!["🦑🦑🦑 日本語", "ü"]);
}

#[test]
fn emoji_sequences_are_not_cut_when_it_can_be_helped() {
    // Family: man ZWJ woman ZWJ girl (5 scalar values), repeated without spaces.
    let family = "👨\u{200D}👩\u{200D}👧";
    let text = family.repeat(3);
    let parts = split_message(&text, 7);
    assert!(parts.iter().all(|part| part == family), "{parts:?}");
    let thumbs = "👍🏽".repeat(5);
    let parts = split_message(&thumbs, 3);
    assert!(parts.iter().all(|part| part == "👍🏽"), "{parts:?}");
}

#[test]
fn a_code_block_that_fits_is_never_split() {
    let code = "```rust\nfn main() {\n\n    println!(\"hi\");\n}\n```";
    let text = format!("Intro text that is long enough.\n\n{code}\n\nOutro.");
    let parts = split_message(&text, code.chars().count() + 2);
    assert!(parts.contains(&code.to_owned()), "{parts:?}");
}

#[test]
fn an_oversized_code_block_is_closed_and_reopened_with_its_language() {
    let body: Vec<String> = (0..10).map(|number| format!("let value_{number} = {number};")).collect();
    let text = format!("Here:\n```rust\n{}\n```\nDone.", body.join("\n"));
    let parts = split_message(&text, 60);
    assert_well_formed(&parts, 60);
    let code_parts: Vec<&String> = parts.iter().filter(|part| part.contains("let value")).collect();
    assert!(code_parts.len() > 1, "{parts:?}");
    for part in &code_parts {
        let start = part.find("```rust\n").unwrap();
        assert!(part[start..].ends_with("\n```") || part[start..].contains("\n```\n"), "{part:?}");
    }
    let rejoined: Vec<String> = parts
        .iter()
        .flat_map(|part| part.lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|line| !line.starts_with("```"))
        .collect();
    let expected: Vec<String> = std::iter::once("Here:".to_owned()).chain(body).chain(["Done.".to_owned()]).collect();
    assert_eq!(rejoined, expected);
}

#[test]
fn tilde_fences_and_longer_fences_are_reopened_as_written() {
    let body = "a line of code\n".repeat(6);
    let text = format!("~~~~python\n{body}~~~~");
    let parts = split_message(&text, 50);
    assert!(parts.len() > 1);
    for part in &parts {
        assert!(part.starts_with("~~~~python\n") && part.ends_with("\n~~~~"), "{part:?}");
    }
}

#[test]
fn a_code_line_longer_than_a_part_is_cut_inside_the_fences() {
    let text = format!("```\n{}\n```", "y".repeat(30));
    let parts = split_message(&text, 16);
    assert_well_formed(&parts, 16);
    assert!(parts.iter().all(|part| part.starts_with("```\n") && part.ends_with("\n```")), "{parts:?}");
    assert_eq!(non_whitespace(&parts.concat()).replace('`', ""), "y".repeat(30));
}

#[test]
fn an_unclosed_code_block_is_closed_in_every_part() {
    let text = format!("```js\n{}", "call();\n".repeat(10));
    let parts = split_message(&text, 40);
    assert!(parts.iter().all(|part| part.starts_with("```js\n") && part.ends_with("\n```")), "{parts:?}");
}

#[test]
fn code_blocks_are_split_as_text_when_the_fences_do_not_fit() {
    let text = "```rust\nfn main() {}\n```";
    let parts = split_message(text, 5);
    assert_well_formed(&parts, 5);
    assert_eq!(non_whitespace(&parts.concat()), non_whitespace(text));
}

#[test]
fn a_limit_of_zero_counts_as_one() {
    assert_eq!(split_message("abc", 0), vec!["a", "b", "c"]);
}

#[test]
fn indented_fences_and_not_fences() {
    assert!(opening_fence("   ```rust").is_some());
    assert!(opening_fence("    ```rust").is_none());
    assert!(opening_fence("``").is_none());
    assert!(opening_fence("```a`b").is_none());
    assert_eq!(opening_fence("~~~ py extra").map(|fence| fence.info), Some("py extra".to_owned()));
    let fence = opening_fence("````").unwrap();
    assert!(!closes_fence("```", &fence));
    assert!(closes_fence("`````  ", &fence));
    assert!(!closes_fence("", &fence));
}

/// Random replies built from words of many shapes.
struct Generator {
    random: SeededRandom,
}

impl Generator {
    fn below(&mut self, bound: u64) -> u64 {
        self.random.next_u64() % bound.max(1)
    }

    fn word(&mut self) -> String {
        const WORDS: &[&str] = &[
            "a",
            "the",
            "assistant",
            "reply",
            "🦑",
            "👨\u{200D}👩\u{200D}👧",
            "日本語",
            "中文字符",
            "naïve",
            "x.",
            "end!",
            "why?",
            "word,",
            "Ünïcödé",
            "—",
            "e.g.",
            "。",
            "👍🏽",
        ];
        match self.below(20) {
            0 => "z".repeat(usize::try_from(self.below(120)).unwrap() + 1),
            1 => "語".repeat(usize::try_from(self.below(60)).unwrap() + 1),
            _ => WORDS[usize::try_from(self.below(WORDS.len() as u64)).unwrap()].to_owned(),
        }
    }

    fn separator(&mut self) -> &'static str {
        match self.below(12) {
            0 => "\n",
            1 => "\n\n",
            2 => "  ",
            3 => "\n\n\n",
            4 => "\t",
            _ => " ",
        }
    }

    fn code_block(&mut self) -> String {
        let language = ["", "rust", "py"][usize::try_from(self.below(3)).unwrap()];
        let lines: Vec<String> = (0..self.below(12))
            .map(|_| (0..self.below(6)).map(|_| self.word()).collect::<Vec<_>>().join(" "))
            .collect();
        format!("```{language}\n{}\n```", lines.join("\n"))
    }

    fn text(&mut self, with_code: bool) -> String {
        let mut text = String::new();
        for _ in 0..self.below(60) {
            if with_code && self.below(15) == 0 {
                text.push_str("\n\n");
                text.push_str(&self.code_block());
                text.push_str("\n\n");
            } else {
                text.push_str(&self.word());
                text.push_str(self.separator());
            }
        }
        text
    }
}

/// The fenced blocks of `text`, fences included.
fn code_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        match current.as_mut() {
            None if is_fence_line(line) => current = Some(vec![line]),
            None => {}
            Some(lines) => {
                lines.push(line);
                if line == "```" {
                    blocks.push(lines.join("\n"));
                    current = None;
                }
            }
        }
    }
    blocks
}

fn is_fence_line(line: &str) -> bool {
    opening_fence(line).is_some()
}

#[test]
fn random_text_keeps_every_character_in_order_within_the_limit() {
    let mut generator = Generator { random: SeededRandom::new(0x5EED) };
    for case in 0..3000 {
        let text = generator.text(false);
        let max = usize::try_from(generator.below(80)).unwrap() + 1;
        let parts = split_message(&text, max);
        assert_well_formed(&parts, max);
        assert_eq!(non_whitespace(&parts.concat()), non_whitespace(&text), "case {case}, max {max}: {text:?}");
    }
}

#[test]
fn random_text_keeps_paragraphs_that_fit_whole() {
    let mut generator = Generator { random: SeededRandom::new(7) };
    for case in 0..2000 {
        let text = generator.text(false);
        let max = usize::try_from(generator.below(200)).unwrap() + 20;
        let parts = split_message(&text, max);
        for paragraph in text.split("\n\n").map(str::trim).filter(|paragraph| !paragraph.is_empty()) {
            if char_count(paragraph) <= max {
                assert!(
                    parts.iter().any(|part| part.contains(paragraph)),
                    "case {case}, max {max}: {paragraph:?} was split in {parts:?}"
                );
            }
        }
    }
}

#[test]
fn random_text_with_code_blocks_only_adds_fences() {
    let mut generator = Generator { random: SeededRandom::new(0xC0DE) };
    for case in 0..2000 {
        let text = generator.text(true);
        let max = usize::try_from(generator.below(150)).unwrap() + 24;
        let parts = split_message(&text, max);
        assert_well_formed(&parts, max);
        let without_fences = |text: &str| -> String {
            non_whitespace(&text.lines().filter(|line| !is_fence_line(line)).collect::<Vec<_>>().join("\n"))
        };
        let joined = parts.join("\n");
        assert_eq!(without_fences(&joined), without_fences(&text), "case {case}, max {max}: {text:?}");
        // Every part is balanced: it opens as many fences as it closes.
        for part in &parts {
            let fences = part.lines().filter(|line| is_fence_line(line)).count();
            assert_eq!(fences % 2, 0, "case {case}, max {max}: unbalanced {part:?}");
        }
        // Code blocks that fit stay whole.
        for block in code_blocks(&text) {
            if char_count(&block) <= max {
                assert!(
                    parts.iter().any(|part| part.contains(&block)),
                    "case {case}, max {max}: {block:?} in {parts:?}"
                );
            }
        }
    }
}

#[test]
fn random_tiny_limits_never_lose_text() {
    let mut generator = Generator { random: SeededRandom::new(99) };
    for case in 0..1000 {
        let text = generator.text(true);
        let max = usize::try_from(generator.below(12)).unwrap();
        let parts = split_message(&text, max);
        assert_well_formed(&parts, max);
        let output = non_whitespace(&parts.concat());
        let mut remaining = output.chars();
        for expected in non_whitespace(&text).chars() {
            assert!(remaining.any(|found| found == expected), "case {case}, max {max}: lost {expected:?} of {text:?}");
        }
    }
}
