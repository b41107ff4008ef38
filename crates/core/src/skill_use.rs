//! Skills in use during one turn: the skill directories whose `SKILL.md` the turn read
//! with the file tools, and the port that turns them into the environment variables
//! (`addons.env`) the turn's commands get. A new turn starts with none in use.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use squidbot_types::Secret;
use squidbot_types::people::Actor;

use crate::BoxFuture;
use crate::sync::lock;

/// Most skills one turn records; a turn reading more has gone astray, and the set must
/// stay bounded whatever the model asks for.
pub const MAX_SKILLS_PER_TURN: usize = 64;

/// The skill directories one turn read the `SKILL.md` of; shared by the clones handed to
/// each of the turn's tool calls, so a read in one step counts for commands in the next.
#[derive(Debug, Clone, Default)]
pub struct SkillsInUse {
    directories: Arc<Mutex<BTreeSet<PathBuf>>>,
}

impl SkillsInUse {
    /// Notes that the turn read the `SKILL.md` in `directory` (a canonical path). Past
    /// [`MAX_SKILLS_PER_TURN`] directories further ones are not noted.
    pub fn record(&self, directory: &Path) {
        let mut directories = lock(&self.directories);
        if directories.len() >= MAX_SKILLS_PER_TURN && !directories.contains(directory) {
            tracing::warn!(
                directory = %directory.display(),
                "not noting another skill in use: this turn read {MAX_SKILLS_PER_TURN} already"
            );
            return;
        }
        directories.insert(directory.to_path_buf());
    }

    /// The directories noted so far, sorted.
    pub fn directories(&self) -> Vec<PathBuf> {
        lock(&self.directories).iter().cloned().collect()
    }

    /// True when the turn read no skill yet.
    pub fn is_empty(&self) -> bool {
        lock(&self.directories).is_empty()
    }
}

/// What a command's environment is asked for: the skills its turn uses and whose turn
/// it is.
#[derive(Debug, Clone, Copy)]
pub struct SkillEnvironmentRequest<'a> {
    /// Canonical directories of the skills whose `SKILL.md` the turn read.
    pub directories: &'a [PathBuf],
    /// The context the turn runs in (its skills are the ones that count).
    pub context: &'a str,
    /// Who the turn acts for, when a people's policy applies.
    pub actor: Option<&'a Actor>,
}

/// One variable a skill declared, with its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillVariable {
    /// The skill that declared it.
    pub skill: String,
    /// The variable's name.
    pub name: String,
    /// Its value.
    pub value: Secret,
}

/// The variables the skills a turn uses declared (`addons.env`), with their values:
/// implemented over the skill catalog and the vault, wired in the binary.
pub trait SkillEnvironment: Send + Sync + std::fmt::Debug {
    /// The variables of the skills in `request.directories` that `request.context` has
    /// and that are available; a declared variable without a value is left out.
    fn variables<'a>(&'a self, request: SkillEnvironmentRequest<'a>) -> BoxFuture<'a, Vec<SkillVariable>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_what_was_read_and_a_new_record_starts_empty() {
        let turn = SkillsInUse::default();
        let handed_to_a_tool = turn.clone();
        handed_to_a_tool.record(Path::new("/skills/github"));
        handed_to_a_tool.record(Path::new("/skills/github"));
        turn.record(Path::new("/skills/weather"));
        assert_eq!(turn.directories(), [PathBuf::from("/skills/github"), PathBuf::from("/skills/weather")]);
        assert!(SkillsInUse::default().is_empty(), "the next turn starts with no skill in use");
    }

    #[test]
    fn a_turn_notes_a_bounded_number_of_skills() {
        let turn = SkillsInUse::default();
        for index in 0..MAX_SKILLS_PER_TURN + 10 {
            turn.record(&PathBuf::from(format!("/skills/s{index}")));
        }
        assert_eq!(turn.directories().len(), MAX_SKILLS_PER_TURN);
    }
}
