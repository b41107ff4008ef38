//! The sections format: one heartbeat per `## ` heading, with `Cadence:`, `Prompt:` and
//! optional fields; a malformed section is dropped with warnings and the rest still run.

use std::collections::HashMap;

use super::fields::{ActiveHours, FieldLine, FieldName, clean_value, context_mode, field_line};
use super::lines::{ClassifiedLines, Line, LineKind};
use super::warning::{HeartbeatProblem, HeartbeatWarning};
use super::{HeartbeatSection, SectionsFile};
use crate::schedule::Cadence;

/// Whether the file is in the sections format: some text line (outside code and
/// comments) is a `Cadence:` field. A checklist has no reason to contain one, while a
/// sections file with even one section started has one.
pub(super) fn uses_sections(lines: &ClassifiedLines<'_>) -> bool {
    lines.lines.iter().any(|line| {
        line.kind == LineKind::Text && field_line(line.text).is_some_and(|field| field.name == FieldName::Cadence)
    })
}

pub(super) fn parse(lines: &ClassifiedLines<'_>) -> SectionsFile {
    let mut parser = Parser::default();
    for line in &lines.lines {
        parser.line(line);
    }
    parser.finish_section();
    let mut warnings = parser.warnings;
    if let Some(line) = lines.unclosed_fence {
        warnings.push(HeartbeatWarning { line, section: None, problem: HeartbeatProblem::UnclosedCodeFence });
    }
    if let Some(line) = lines.unclosed_comment {
        warnings.push(HeartbeatWarning { line, section: None, problem: HeartbeatProblem::UnclosedComment });
    }
    // Stable, so a section's own problems keep their order.
    warnings.sort_by_key(|warning| warning.line);
    SectionsFile { sections: parser.sections, warnings }
}

#[derive(Default)]
struct Parser<'a> {
    /// The section being read; `None` before the first `## ` and after a `# `.
    current: Option<Draft<'a>>,
    /// Lowercased name → line of the first section with it.
    names: HashMap<String, usize>,
    sections: Vec<HeartbeatSection>,
    warnings: Vec<HeartbeatWarning>,
}

/// A field's raw value and the line it came from.
#[derive(Clone, Copy)]
struct Field<'a> {
    line: usize,
    value: &'a str,
}

/// A section as read so far.
struct Draft<'a> {
    name: String,
    line: usize,
    cadence: Option<Field<'a>>,
    context: Option<Field<'a>>,
    active_hours: Option<Field<'a>>,
    /// Lines of the prompt once `Prompt:` has been seen, starting with its inline value.
    prompt: Option<Vec<&'a str>>,
    /// First `Cadence:` line found inside the prompt.
    cadence_in_prompt: Option<usize>,
    problems: Vec<(usize, HeartbeatProblem)>,
}

impl<'a> Parser<'a> {
    fn line(&mut self, line: &Line<'a>) {
        match line.kind {
            LineKind::Heading { level: 1, .. } => {
                self.finish_section();
            }
            LineKind::Heading { level: 2, title } => {
                self.finish_section();
                self.current = Some(Draft::new(title, line.number));
            }
            // HTML comments are invisible once rendered, and commenting a section out is
            // the natural way to switch one off, so their lines are dropped everywhere.
            LineKind::Comment => {}
            LineKind::Heading { .. } | LineKind::Blank | LineKind::Fenced | LineKind::Text => match &mut self.current {
                Some(draft) => draft.line(line),
                None => self.outside_section(line),
            },
        }
    }

    fn outside_section(&mut self, line: &Line<'a>) {
        if line.kind != LineKind::Text {
            return;
        }
        // Free text before the first section is a human preamble; only known fields are
        // worth a warning, since they show an intent that is not being honoured.
        if let Some(field) = field_line(line.text).filter(|field| field.name != FieldName::Unknown) {
            self.warnings.push(HeartbeatWarning {
                line: line.number,
                section: None,
                problem: HeartbeatProblem::FieldOutsideSection { field: field.key.to_owned() },
            });
        }
    }

    fn finish_section(&mut self) {
        let Some(mut draft) = self.current.take() else {
            return;
        };
        let mut problems = std::mem::take(&mut draft.problems);
        if draft.name.is_empty() {
            problems.push((draft.line, HeartbeatProblem::EmptyName));
        } else {
            let key = draft.name.to_lowercase();
            match self.names.get(&key) {
                Some(first_line) => {
                    problems.push((draft.line, HeartbeatProblem::DuplicateName { first_line: *first_line }))
                }
                None => {
                    self.names.insert(key, draft.line);
                }
            }
        }
        let section = draft.validate(&mut problems);
        let name = (!draft.name.is_empty()).then(|| draft.name.clone());
        let skipped = problems.iter().any(|(_, problem)| problem.skips_section());
        self.warnings.extend(problems.into_iter().map(|(line, problem)| HeartbeatWarning {
            line,
            section: name.clone(),
            problem,
        }));
        if let (Some(section), false) = (section, skipped) {
            self.sections.push(section);
        }
    }
}

impl<'a> Draft<'a> {
    fn new(title: &str, line: usize) -> Self {
        Self {
            name: title.split_whitespace().collect::<Vec<_>>().join(" "),
            line,
            cadence: None,
            context: None,
            active_hours: None,
            prompt: None,
            cadence_in_prompt: None,
            problems: Vec::new(),
        }
    }

    fn line(&mut self, line: &Line<'a>) {
        if let Some(prompt) = &mut self.prompt {
            // Everything up to the next `#`/`##` heading is prompt, `###` headings, code
            // and list markers included.
            if line.kind == LineKind::Text
                && self.cadence_in_prompt.is_none()
                && field_line(line.text).is_some_and(|field| field.name == FieldName::Cadence)
            {
                self.cadence_in_prompt = Some(line.number);
            }
            prompt.push(line.text);
            return;
        }
        // Before the prompt, only field lines matter: other text is a note for humans,
        // and `###` headings or code there have no meaning.
        if line.kind != LineKind::Text {
            return;
        }
        let Some(field) = field_line(line.text) else {
            return;
        };
        match field.name {
            FieldName::Prompt => self.prompt = Some(vec![field.value]),
            FieldName::Cadence => Self::set(&mut self.cadence, &mut self.problems, field, line.number),
            FieldName::Context => Self::set(&mut self.context, &mut self.problems, field, line.number),
            FieldName::ActiveHours => Self::set(&mut self.active_hours, &mut self.problems, field, line.number),
            FieldName::Unknown => {
                self.problems.push((line.number, HeartbeatProblem::UnknownField { field: field.key.to_owned() }))
            }
        }
    }

    fn set(
        slot: &mut Option<Field<'a>>,
        problems: &mut Vec<(usize, HeartbeatProblem)>,
        field: FieldLine<'a>,
        line: usize,
    ) {
        match slot {
            Some(first) => problems
                .push((line, HeartbeatProblem::DuplicateField { field: field.key.to_owned(), first_line: first.line })),
            None => *slot = Some(Field { line, value: field.value }),
        }
    }

    /// Checks the fields, recording every problem so one edit can fix them all, and
    /// builds the section when the required fields are usable.
    fn validate(&self, problems: &mut Vec<(usize, HeartbeatProblem)>) -> Option<HeartbeatSection> {
        let cadence = match (self.cadence, self.cadence_in_prompt) {
            (_, Some(line)) => {
                problems.push((line, HeartbeatProblem::CadenceInPrompt));
                None
            }
            (None, None) => {
                problems.push((self.line, HeartbeatProblem::MissingCadence));
                None
            }
            (Some(field), None) => {
                let value = clean_value(field.value);
                let cadence = Cadence::parse(value).ok();
                if cadence.is_none() {
                    problems.push((field.line, HeartbeatProblem::InvalidCadence { value: value.to_owned() }));
                }
                cadence
            }
        };
        let prompt = match &self.prompt {
            None => {
                problems.push((self.line, HeartbeatProblem::MissingPrompt));
                None
            }
            Some(lines) => {
                let prompt = lines.join("\n").trim().to_owned();
                if prompt.is_empty() {
                    problems.push((self.line, HeartbeatProblem::EmptyPrompt));
                    None
                } else {
                    Some(prompt)
                }
            }
        };
        let context = self.context.and_then(|field| {
            let value = clean_value(field.value);
            let mode = context_mode(value);
            if mode.is_none() {
                problems.push((field.line, HeartbeatProblem::InvalidContext { value: value.to_owned() }));
            }
            mode
        });
        let active_hours = self.active_hours.and_then(|field| {
            let value = clean_value(field.value);
            let hours = ActiveHours::parse(value);
            if hours.is_none() {
                problems.push((field.line, HeartbeatProblem::InvalidActiveHours { value: value.to_owned() }));
            }
            hours
        });
        Some(HeartbeatSection {
            name: self.name.clone(),
            line: self.line,
            cadence: cadence?,
            prompt: prompt?,
            context,
            active_hours,
        })
    }
}
