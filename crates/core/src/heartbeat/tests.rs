//! Unit tests of HEARTBEAT.md parsing: both formats, every malformed-section warning,
//! line endings and byte order marks, the content hash, and random damage to a valid file.

use super::*;

/// The sections example from the baaaht design, trailing spaces after `Project Status`
/// included.
const BAAAHT_EXAMPLE: &str = "# HEARTBEAT.md — User: billm

## Email Triage
- Cadence: hourly
- Prompt: Check my email and let me know if anything looks urgent or needs a response today

## Project Status  \n- Cadence: daily
- Prompt: Review my open GitHub PRs and issues, summarize anything that needs attention

## Weekly Digest
- Cadence: weekly
- Prompt: Summarize this week's activity from my session history and highlight key decisions made
";

/// The checklist example from the squidbot design.
const SQUIDBOT_EXAMPLE: &str = "# Heartbeat checklist

- Quick scan: anything urgent in inboxes?
- If a task is blocked, note what is missing.
";

fn sections(text: &str) -> SectionsFile {
    match parse(text).unwrap() {
        HeartbeatFile::Sections(file) => file,
        HeartbeatFile::Checklist(checklist) => panic!("expected sections, got {checklist:?}"),
    }
}

fn checklist(text: &str) -> Checklist {
    match parse(text).unwrap() {
        HeartbeatFile::Checklist(checklist) => checklist,
        HeartbeatFile::Sections(file) => panic!("expected a checklist, got {file:?}"),
    }
}

fn names(file: &SectionsFile) -> Vec<&str> {
    file.sections.iter().map(|section| section.name.as_str()).collect()
}

fn problems(file: &SectionsFile) -> Vec<(usize, Option<&str>, HeartbeatProblem)> {
    file.warnings.iter().map(|warning| (warning.line, warning.section.as_deref(), warning.problem.clone())).collect()
}

#[test]
fn heartbeat_baaaht_example_parses_into_three_sections() {
    let file = sections(BAAAHT_EXAMPLE);
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    assert_eq!(names(&file), ["Email Triage", "Project Status", "Weekly Digest"]);
    let cadences: Vec<Cadence> = file.sections.iter().map(|section| section.cadence).collect();
    assert_eq!(cadences, [Cadence::Hourly, Cadence::Daily, Cadence::Weekly]);
    assert_eq!(
        file.sections[1].prompt,
        "Review my open GitHub PRs and issues, summarize anything that needs attention"
    );
    assert_eq!(file.sections[0].line, 3);
    assert_eq!(file.sections[0].context, None);
    assert_eq!(file.sections[0].active_hours, None);
}

#[test]
fn heartbeat_squidbot_checklist_is_the_whole_file() {
    assert_eq!(checklist(SQUIDBOT_EXAMPLE), Checklist::Prompt(SQUIDBOT_EXAMPLE.trim().to_owned()));
    // `Quick scan:` is a field-shaped line but not a cadence, so the format stays checklist.
    assert_eq!(parse(SQUIDBOT_EXAMPLE).unwrap().format(), HeartbeatFormat::Checklist);
    assert!(parse(SQUIDBOT_EXAMPLE).unwrap().warnings().is_empty());
}

#[test]
fn heartbeat_checklist_of_headings_blanks_comments_and_empty_items_is_empty() {
    for text in [
        "",
        "   \n\t\n",
        "# Heartbeat checklist\n\n## Inbox\n\n",
        "# Heartbeat\n<!-- Add checks below; an empty file skips the heartbeat. -->\n",
        "# Heartbeat\n<!--\n- Check the inbox\n-->\n\n",
        "# Checks\n\n- \n- [ ]\n* [x]\n+\n",
        "\u{feff}# Title\r\n\r\n",
        "# Heartbeat\n\n---\n\n* * *\n",
    ] {
        assert_eq!(checklist(text), Checklist::Empty, "{text:?}");
    }
}

#[test]
fn heartbeat_checklist_with_any_content_is_a_prompt() {
    for text in [
        "Check the inbox.",
        "# Title\n- [ ] renew the domain",
        "```\n```",
        "# T\ntext <!-- c -->",
        "## Inbox\n- check mail",
        "# T\n-- -*",
    ] {
        assert!(matches!(checklist(text), Checklist::Prompt(_)), "{text:?}");
    }
}

#[test]
fn heartbeat_crlf_and_byte_order_mark_parse_like_plain_text() {
    let windows = format!("\u{feff}{}", BAAAHT_EXAMPLE.replace('\n', "\r\n"));
    assert_eq!(sections(&windows), sections(BAAAHT_EXAMPLE));
    let windows_checklist = format!("\u{feff}{}", SQUIDBOT_EXAMPLE.replace('\n', "\r\n"));
    assert_eq!(checklist(&windows_checklist), checklist(SQUIDBOT_EXAMPLE));
}

#[test]
fn heartbeat_fields_are_lenient_about_case_markers_and_bold() {
    let file = sections(
        "## One\nCADENCE: Daily\nprompt: a\n\
         ## Two\n* **Cadence:** `weekly`\n* **Prompt**: b\n\
         ## Three\n+ cadence: **Monthly**.\n+ PROMPT: c\n\
         ## Four\n  - Cadence: bi-weekly\n  - Prompt: d\n",
    );
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    let parsed: Vec<(Cadence, &str)> =
        file.sections.iter().map(|section| (section.cadence, section.prompt.as_str())).collect();
    assert_eq!(
        parsed,
        [(Cadence::Daily, "a"), (Cadence::Weekly, "b"), (Cadence::Monthly, "c"), (Cadence::Biweekly, "d")]
    );
}

#[test]
fn heartbeat_multi_line_prompt_runs_to_the_next_heading_and_keeps_its_shape() {
    let file = sections(
        "## Digest\nCadence: weekly\nPrompt:\n\nSummarize the week:\n\n- decisions\n- open questions\n\n\
         ### Format\nUse `bullets`.\n```\n# not a heading\n```\n<!-- private note -->\n\n# Archive\n\nold notes\n",
    );
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    assert_eq!(
        file.sections[0].prompt,
        "Summarize the week:\n\n- decisions\n- open questions\n\n### Format\nUse `bullets`.\n```\n# not a heading\n```"
    );
}

#[test]
fn heartbeat_optional_fields_parse() {
    let file = sections(
        "## Night watch\n- Cadence: hourly\n- Context: Isolated\n- Active hours: 22:00 - 06:00\n- Prompt: check\n\
         ## Day\n- cadence: daily\n- context: silent\n- active_hours: 9:00 to 24:00\n- prompt: p\n",
    );
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    let night = &file.sections[0];
    assert_eq!(night.context, Some(ContextMode::Isolated));
    let hours = night.active_hours.unwrap();
    assert_eq!(hours.to_string(), "22:00-06:00");
    assert!(hours.contains(jiff::civil::time(23, 30, 0, 0)));
    assert!(hours.contains(jiff::civil::time(5, 59, 0, 0)));
    assert!(!hours.contains(jiff::civil::time(6, 0, 0, 0)));
    let day = file.sections[1].active_hours.unwrap();
    assert_eq!((day.start_minute_of_day(), day.end_minute_of_day()), (9 * 60, 24 * 60));
    assert!(day.contains(jiff::civil::time(23, 59, 0, 0)));
    assert!(!day.contains(jiff::civil::time(8, 59, 0, 0)));
    assert_eq!(file.sections[1].context, Some(ContextMode::Silent));
}

#[test]
fn heartbeat_each_malformed_section_warns_while_the_valid_one_runs() {
    let text = "# Mine

## Valid
Cadence: daily
Prompt: fine

## No cadence
Prompt: p

## Bad cadence
Cadence: sometimes
Prompt: p

## No prompt
Cadence: daily

## Empty prompt
Cadence: daily
Prompt:

## valid
Cadence: hourly
Prompt: duplicate name

## Twice
Cadence: daily
Cadence: weekly
Prompt: p

## Backwards
Prompt: p
Cadence: daily

## Bad options
Cadence: daily
Context: loud
Active hours: all day
Prompt: p

##
Cadence: daily
Prompt: nameless
";
    let file = sections(text);
    assert_eq!(names(&file), ["Valid"]);
    let expected: Vec<(usize, Option<&str>, HeartbeatProblem)> = vec![
        (7, Some("No cadence"), HeartbeatProblem::MissingCadence),
        (11, Some("Bad cadence"), HeartbeatProblem::InvalidCadence { value: "sometimes".into() }),
        (14, Some("No prompt"), HeartbeatProblem::MissingPrompt),
        (17, Some("Empty prompt"), HeartbeatProblem::EmptyPrompt),
        (21, Some("valid"), HeartbeatProblem::DuplicateName { first_line: 3 }),
        (27, Some("Twice"), HeartbeatProblem::DuplicateField { field: "Cadence".into(), first_line: 26 }),
        (32, Some("Backwards"), HeartbeatProblem::CadenceInPrompt),
        (36, Some("Bad options"), HeartbeatProblem::InvalidContext { value: "loud".into() }),
        (37, Some("Bad options"), HeartbeatProblem::InvalidActiveHours { value: "all day".into() }),
        (40, None, HeartbeatProblem::EmptyName),
    ];
    assert_eq!(problems(&file), expected);
    assert!(file.warnings.iter().all(HeartbeatWarning::skips_section));
    assert_eq!(
        file.warnings[1].to_string(),
        "HEARTBEAT.md line 11, section \"Bad cadence\": skipped: cadence \"sometimes\" is not one of \
         hourly, daily, weekly, biweekly, monthly"
    );
}

#[test]
fn heartbeat_subsections_under_one_heading_are_refused_not_merged() {
    let file = sections(
        "## Heartbeats\n### Email\nCadence: hourly\nPrompt: email\n### Digest\nCadence: weekly\nPrompt: digest\n",
    );
    assert!(file.sections.is_empty());
    assert_eq!(problems(&file), [(6, Some("Heartbeats"), HeartbeatProblem::CadenceInPrompt)]);
}

#[test]
fn heartbeat_non_fatal_warnings_keep_the_section() {
    let file = sections(
        "Cadence: daily\nintro text: ignored\n\n## Email\nOwner: me\nSee https://example.com at 10:30\n\
         Cadence: hourly\nPrompt: check\n\n# Notes\nPrompt: stray\n",
    );
    assert_eq!(names(&file), ["Email"]);
    assert_eq!(
        problems(&file),
        [
            (1, None, HeartbeatProblem::FieldOutsideSection { field: "Cadence".into() }),
            (5, Some("Email"), HeartbeatProblem::UnknownField { field: "Owner".into() }),
            (11, None, HeartbeatProblem::FieldOutsideSection { field: "Prompt".into() }),
        ]
    );
    assert!(file.warnings.iter().all(|warning| !warning.skips_section()));
    assert_eq!(file.warnings[0].to_string(), "HEARTBEAT.md line 1: ignored `Cadence:` outside any `## ` section");
}

#[test]
fn heartbeat_commented_out_section_is_switched_off() {
    let file = sections(
        "## On\nCadence: daily\nPrompt: on\n\n<!--\n## Off\nCadence: hourly\nPrompt: off\n-->\n\n## Also on\n\
         Cadence: weekly\nPrompt: also on\n",
    );
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    assert_eq!(names(&file), ["On", "Also on"]);
    assert_eq!(file.sections[0].prompt, "on");
}

#[test]
fn heartbeat_unclosed_fence_and_comment_are_reported() {
    let file = sections("## A\nCadence: daily\nPrompt: run\n```\n## B\nCadence: daily\nPrompt: b\n");
    assert_eq!(names(&file), ["A"]);
    assert_eq!(problems(&file), [(4, None, HeartbeatProblem::UnclosedCodeFence)]);
    let file = sections("## A\nCadence: daily\nPrompt: run\n<!-- start\n## B\nCadence: daily\nPrompt: b\n");
    assert_eq!(names(&file), ["A"]);
    assert_eq!(file.sections[0].prompt, "run");
    assert_eq!(problems(&file), [(4, None, HeartbeatProblem::UnclosedComment)]);
}

#[test]
fn heartbeat_cadence_only_inside_code_does_not_switch_format() {
    let text = "Check these:\n```\nCadence: hourly\n```\n";
    assert_eq!(checklist(text), Checklist::Prompt(text.trim().to_owned()));
}

#[test]
fn heartbeat_headings_with_closing_hashes_and_extra_spaces_are_named_cleanly() {
    let file = sections("##   Email    Triage  ##\nCadence: hourly\nPrompt: p\n## C#\nCadence: daily\nPrompt: q\n");
    assert_eq!(names(&file), ["Email Triage", "C#"]);
}

#[test]
fn heartbeat_sections_without_fields_are_skipped_with_warnings() {
    let file = sections("## Notes\nJust notes.\n## Real\nCadence: daily\nPrompt: p\n##\n");
    assert_eq!(names(&file), ["Real"]);
    assert_eq!(
        problems(&file),
        [
            (1, Some("Notes"), HeartbeatProblem::MissingCadence),
            (1, Some("Notes"), HeartbeatProblem::MissingPrompt),
            (6, None, HeartbeatProblem::EmptyName),
            (6, None, HeartbeatProblem::MissingCadence),
            (6, None, HeartbeatProblem::MissingPrompt),
        ]
    );
}

#[test]
fn heartbeat_oversized_file_is_an_error() {
    let text = "a".repeat(MAX_FILE_BYTES + 1);
    assert_eq!(parse(&text), Err(HeartbeatError::TooLarge { bytes: MAX_FILE_BYTES + 1, limit: MAX_FILE_BYTES }));
    assert!(parse(&"a".repeat(MAX_FILE_BYTES)).is_ok());
}

#[test]
fn heartbeat_cadence_and_context_names_round_trip() {
    for cadence in Cadence::ALL {
        assert_eq!(Cadence::parse(&cadence.name().to_uppercase()).ok(), Some(cadence));
        assert_eq!(Cadence::parse(cadence.name()).ok(), Some(cadence));
    }
    assert_eq!(Cadence::parse(" Hourly ").ok(), Some(Cadence::Hourly));
    assert_eq!(Cadence::parse("bi-weekly").ok(), Some(Cadence::Biweekly));
    assert!(Cadence::parse("yearly").is_err());
    assert!(Cadence::parse("").is_err());
    for mode in [ContextMode::Session, ContextMode::Isolated, ContextMode::Silent] {
        assert_eq!(context_mode(mode.as_str()), Some(mode));
        assert_eq!(context_mode(&format!(" {} ", mode.as_str().to_uppercase())), Some(mode));
    }
}

#[test]
fn heartbeat_active_hours_reject_nonsense() {
    for value in ["", "9-17", "09:00", "25:00-26:00", "09:60-10:00", "10:00-10:00", "24:00-06:00", "0:00-24:00x"] {
        assert_eq!(ActiveHours::parse(value), None, "{value:?}");
    }
    assert!(ActiveHours::parse("00:00-24:00").is_some());
    assert!(ActiveHours::parse("08:00\u{2013}18:30").is_some());
}

#[test]
fn heartbeat_content_hash_is_fnv1a_and_ignores_editor_noise() {
    // Published FNV-1a 64-bit test vectors: the format must never drift between releases.
    assert_eq!(content_hash(""), "fnv1a64:cbf29ce484222325");
    assert_eq!(content_hash("a"), "fnv1a64:af63dc4c8601ec8c");
    assert_eq!(content_hash("foobar"), "fnv1a64:85944171f73967e8");

    let plain = content_hash(BAAAHT_EXAMPLE);
    assert_eq!(content_hash(&BAAAHT_EXAMPLE.replace('\n', "\r\n")), plain);
    assert_eq!(content_hash(&format!("\u{feff}{BAAAHT_EXAMPLE}")), plain);
    assert_eq!(content_hash(BAAAHT_EXAMPLE.trim_end()), plain);
    assert_eq!(content_hash(&format!("{BAAAHT_EXAMPLE}\n\n  ")), plain);
    assert_ne!(content_hash(&BAAAHT_EXAMPLE.replace("hourly", "daily")), plain);
    assert_ne!(content_hash(&BAAAHT_EXAMPLE.replace("Email Triage", "Email  Triage")), plain);
    // A lone `\r` is content, not a line ending.
    assert_ne!(content_hash("a\rb"), content_hash("a\nb"));
}

/// xorshift64*: deterministic, so a failing case reproduces from its iteration number.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

#[test]
fn heartbeat_parse_survives_random_damage() {
    const INTERESTING: &[&[u8]] = &[
        b"#",
        b"## ",
        b"\n",
        b"\r\n",
        b"\r",
        b":",
        b"- ",
        b"**",
        b"```",
        b"~~~",
        b"<!--",
        b"-->",
        b" ",
        b"\t",
        b"Cadence: ",
        b"Prompt: ",
        b"hourly",
        b"Active hours: ",
        b"24:00",
        b"\xef\xbb\xbf",
        b"\xc3\xa9",
        b"\xff",
        b"\xe2\x80\x93",
    ];
    let seed = format!(
        "{BAAAHT_EXAMPLE}\n## Extra\n* **Context:** silent\n* Active hours: 09:00-17:00\n* Prompt:\n  ### Sub\n  \
         ```\n  # code\n  ```\n<!-- note -->\n{SQUIDBOT_EXAMPLE}"
    );
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    for iteration in 0..5000 {
        let mut bytes = seed.clone().into_bytes();
        for _ in 0..1 + random.below(8) {
            let position = random.below(bytes.len() + 1);
            match random.below(4) {
                0 => {
                    let insert = INTERESTING[random.below(INTERESTING.len())];
                    bytes.splice(position..position, insert.iter().copied());
                }
                1 if position < bytes.len() => {
                    let end = (position + 1 + random.below(40)).min(bytes.len());
                    bytes.drain(position..end);
                }
                2 if position < bytes.len() => bytes[position] = random.next() as u8,
                _ => {
                    let start = random.below(bytes.len());
                    let end = (start + random.below(60)).min(bytes.len());
                    let copy = bytes[start..end].to_vec();
                    bytes.splice(position..position, copy);
                }
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        let file = parse(&text).unwrap_or_else(|error| panic!("iteration {iteration}: {error}"));
        content_hash(&text);
        let line_count = text.split('\n').count();
        if let HeartbeatFile::Sections(file) = &file {
            let mut seen = std::collections::HashSet::new();
            for section in &file.sections {
                assert!(!section.name.is_empty() && !section.prompt.is_empty(), "iteration {iteration}: {section:?}");
                assert!(seen.insert(section.name.to_lowercase()), "iteration {iteration}: duplicate {section:?}");
                assert!(section.line <= line_count, "iteration {iteration}");
            }
            for warning in &file.warnings {
                assert!((1..=line_count).contains(&warning.line), "iteration {iteration}: {warning:?}");
                warning.to_string();
            }
        }
    }
}
