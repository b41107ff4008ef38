//! Core's `SkillEnvironment` port over the catalog: the `addons.env` variables of the
//! available skills of a turn's context whose `SKILL.md` the turn read, each valued by a
//! lookup the binary wires (the vault); a variable without a value is left out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use squidbot_core::BoxFuture;
use squidbot_core::skill_use::{SkillEnvironment, SkillEnvironmentRequest, SkillVariable};
use squidbot_types::Secret;

use crate::catalog::{Discovery, Skill, SkillCatalog};
use crate::prompt::ContextDirectories;

/// Finds the value of a variable a skill declared (the vault secret of that name).
pub type VariableValues = Arc<dyn Fn(&str) -> Option<Secret> + Send + Sync>;

/// The available skills of `discovery` whose (canonical) directory is among `directories`
/// and that declare variables.
pub fn skills_in_use<'a>(discovery: &'a Discovery, directories: &[PathBuf]) -> Vec<&'a Skill> {
    discovery
        .skills
        .iter()
        .filter(|skill| skill.available() && !skill.manifest.addon_env.is_empty())
        // The assistant writes workspace skills itself: one it wrote must not be able to
        // ask for a secret.
        .filter(|skill| gets_secrets(skill.source))
        .filter(|skill| {
            let canonical = skill.directory.canonicalize().unwrap_or_else(|_| skill.directory.clone());
            directories.iter().any(|directory| *directory == canonical || Path::new(directory) == skill.directory)
        })
        .collect()
}

/// Whether skills of `source` may have their `addons.env` set: every source but the
/// workspace, which the model can write to.
pub fn gets_secrets(source: crate::catalog::SkillSource) -> bool {
    use crate::catalog::SkillSource;
    match source {
        SkillSource::Bundled | SkillSource::Extra | SkillSource::User | SkillSource::Group | SkillSource::Person => {
            true
        }
        SkillSource::Workspace => false,
    }
}

/// The variables of `skills` that `values` has a value for, in skill then declaration order;
/// a variable two skills declare takes the first one's value.
pub fn variables(skills: &[&Skill], values: &dyn Fn(&str) -> Option<Secret>) -> Vec<SkillVariable> {
    let mut variables: Vec<SkillVariable> = Vec::new();
    for skill in skills {
        for name in &skill.manifest.addon_env {
            if variables.iter().any(|variable| variable.name == *name) {
                continue;
            }
            if let Some(value) = values(name) {
                variables.push(SkillVariable { skill: skill.name().to_owned(), name: name.clone(), value });
            }
        }
    }
    variables
}

/// The port's implementation: discovers the context's skills (cached) on the blocking
/// pool and values their variables.
#[derive(Clone)]
pub struct SkillAddonEnvironment {
    catalog: Arc<SkillCatalog>,
    contexts: Option<ContextDirectories>,
    values: VariableValues,
}

impl std::fmt::Debug for SkillAddonEnvironment {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("SkillAddonEnvironment").field("catalog", &self.catalog).finish_non_exhaustive()
    }
}

impl SkillAddonEnvironment {
    /// Variables of the skills in `catalog`, valued by `values`.
    pub fn new(catalog: Arc<SkillCatalog>, values: VariableValues) -> Self {
        Self { catalog, contexts: None, values }
    }

    /// Counts each context's own skill directories too (a person's, a group's, their
    /// workspace's), as the prompt does.
    pub fn with_context_directories(mut self, contexts: ContextDirectories) -> Self {
        self.contexts = Some(contexts);
        self
    }

    fn variables_now(&self, context: &str, directories: &[PathBuf]) -> Vec<SkillVariable> {
        let directories_of_context = self.contexts.as_ref().map(|contexts| contexts(context)).unwrap_or_default();
        let discovery = self.catalog.shared(&directories_of_context).discovery;
        variables(&skills_in_use(&discovery, directories), self.values.as_ref())
    }
}

impl SkillEnvironment for SkillAddonEnvironment {
    fn variables<'a>(&'a self, request: SkillEnvironmentRequest<'a>) -> BoxFuture<'a, Vec<SkillVariable>> {
        Box::pin(async move {
            if request.directories.is_empty() {
                return Vec::new();
            }
            let this = self.clone();
            let context = request.context.to_owned();
            let directories = request.directories.to_vec();
            match tokio::task::spawn_blocking(move || this.variables_now(&context, &directories)).await {
                Ok(variables) => variables,
                Err(error) => {
                    tracing::warn!(%error, "can't read the skills in use; their variables are not set");
                    Vec::new()
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog::SkillRoots;

    fn skill(root: &Path, name: &str, frontmatter: &str) -> PathBuf {
        let directory = root.join(name);
        std::fs::create_dir_all(&directory).unwrap();
        std::fs::write(
            directory.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: A skill.\n{frontmatter}---\nbody\n"),
        )
        .unwrap();
        directory.canonicalize().unwrap()
    }

    #[tokio::test]
    async fn only_read_available_skills_of_the_context_give_their_valued_variables() {
        let root = tempfile::tempdir().unwrap();
        let github = skill(root.path(), "github", "addons:\n  env: [GH_TOKEN, GH_HOST]\n");
        let other = skill(root.path(), "other", "addons:\n  env: [OTHER_TOKEN]\n");
        let unavailable = skill(
            root.path(),
            "broken",
            "requires:\n  bins: [surely-not-a-command-here]\naddons:\n  env: [BROKEN_TOKEN]\n",
        );
        let elsewhere = tempfile::tempdir().unwrap();
        let stranger = skill(elsewhere.path(), "stranger", "addons:\n  env: [STRANGER_TOKEN]\n");
        let workspace = tempfile::tempdir().unwrap();
        let forged = skill(workspace.path(), "forged", "addons:\n  env: [GH_TOKEN]\n");
        let catalog = Arc::new(SkillCatalog::new(SkillRoots {
            user: Some(root.path().to_path_buf()),
            workspace: Some(workspace.path().to_path_buf()),
            ..SkillRoots::default()
        }));
        let values: VariableValues =
            Arc::new(|name: &str| (name != "GH_HOST").then(|| Secret::new(format!("value of {name}"))));
        let environment = SkillAddonEnvironment::new(catalog, values);
        let ask = |directories: Vec<PathBuf>| {
            let environment = environment.clone();
            async move {
                let request = SkillEnvironmentRequest { directories: &directories, context: "owner", actor: None };
                environment
                    .variables(request)
                    .await
                    .into_iter()
                    .map(|variable| (variable.skill, variable.name, variable.value.expose().to_owned()))
                    .collect::<Vec<_>>()
            }
        };
        assert!(ask(Vec::new()).await.is_empty(), "no skill read, no variable");
        assert_eq!(
            ask(vec![github.clone()]).await,
            [("github".to_owned(), "GH_TOKEN".to_owned(), "value of GH_TOKEN".to_owned())],
            "a variable without a value is not set"
        );
        assert_eq!(ask(vec![other, github]).await.len(), 2);
        assert!(ask(vec![unavailable]).await.is_empty(), "an unavailable skill counts for nothing");
        assert!(ask(vec![stranger]).await.is_empty(), "a skill the context does not have counts for nothing");
        assert!(ask(vec![forged]).await.is_empty(), "a workspace skill (the model can write one) gets no secret");
    }
}
