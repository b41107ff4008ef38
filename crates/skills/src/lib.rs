//! squidbot's skills: `SKILL.md` parsing, discovery across sources with an mtime cache,
//! availability checks, the `<skills>` prompt block (as core's `PromptSections`), the
//! bundled skills, validated installs, and the `addons.env` variables of the skills a turn
//! uses.

pub mod addons;
pub mod availability;
pub mod bundled;
pub mod catalog;
pub mod install;
pub mod manifest;
pub mod problem;
pub mod prompt;

pub use addons::{SkillAddonEnvironment, VariableValues};
pub use availability::{Host, Missing, SystemHost};
pub use bundled::{BUNDLED, BUNDLED_VERSION, BundledSkill};
pub use catalog::{ContextSkills, Discovery, Skill, SkillCatalog, SkillRoots, SkillSource};
pub use install::{
    CloneError, InProcess, InstallError, InstallIsolation, InstallRequest, Installed, Repository, SandboxedInstall,
    ValidSkill, install, install_with, validate_skill_dir,
};
pub use manifest::{Manifest, Requirements, parse_skill, read_skill_file, validate_name};
pub use problem::{ProblemKind, SkillProblem};
pub use prompt::{ContextDirectories, GroupDirectories, SkillSections, prompt_sections, skills_block};
