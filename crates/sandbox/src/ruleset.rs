//! The landlock backend's rules: filesystem access per granted path, TCP bind and
//! connect refused without the network grant (ABI 4+), abstract sockets and signals
//! scoped to the sandbox (ABI 6+).

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::grants;
use crate::launch::Launch;

/// The newest ABI this code knows; older kernels get the subset they support.
const NEWEST: ABI = ABI::V9;

/// Device files commands may read and write.
const DEVICES: [&str; 5] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// What the kernel enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enforced {
    /// The landlock ABI in use.
    pub abi: i32,
    /// True when TCP bind and connect are covered by the rules.
    pub tcp_rules: bool,
}

/// Why the rules could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum RulesetFailure {
    /// The kernel has no landlock, or it is turned off.
    #[error("landlock is not available: {0}")]
    Unsupported(String),
    /// A rule or the restriction itself failed.
    #[error("can't apply landlock rules: {0}")]
    Failed(String),
}

fn failed(error: impl std::fmt::Display) -> RulesetFailure {
    RulesetFailure::Failed(error.to_string())
}

/// Restricts the calling thread (and what it executes) to `launch`'s policy.
pub fn restrict(launch: &Launch) -> Result<Enforced, RulesetFailure> {
    let read_access = AccessFs::from_read(NEWEST);
    let all_access = AccessFs::from_all(NEWEST);
    let file_access = AccessFs::from_file(NEWEST);
    let mut ruleset =
        Ruleset::default().set_compatibility(CompatLevel::BestEffort).handle_access(all_access).map_err(failed)?;
    if !launch.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(NEWEST)).map_err(failed)?;
    }
    ruleset = ruleset.scope(Scope::from_all(NEWEST)).map_err(failed)?;
    let mut created = ruleset.create().map_err(failed)?;
    let rules = match &launch.rules {
        Some(rules) => rules.clone(),
        None => {
            let mut read_write = launch.read_write.clone();
            read_write.push(launch.workspace.clone());
            read_write.extend(launch.private_tmp.clone());
            grants::rules(&launch.read_only, &read_write, &launch.hidden)
        }
    };
    for (path, access) in rules {
        let Ok(descriptor) = PathFd::new(&path) else {
            continue;
        };
        let wanted: BitFlags<AccessFs> = match access {
            grants::Access::ReadOnly => read_access,
            grants::Access::ReadWrite => all_access,
            grants::Access::ListOnly => AccessFs::ReadDir.into(),
        };
        let is_directory = path.is_dir();
        let allowed = if is_directory { wanted } else { wanted & file_access };
        if allowed.is_empty() {
            continue;
        }
        created = created.add_rule(PathBeneath::new(descriptor, allowed)).map_err(failed)?;
    }
    for device in DEVICES {
        if let Ok(descriptor) = PathFd::new(device) {
            created = created.add_rule(PathBeneath::new(descriptor, file_access)).map_err(failed)?;
        }
    }
    let status = created.restrict_self().map_err(failed)?;
    enforced(&status, launch.network)
}

fn enforced(status: &RestrictionStatus, network: bool) -> Result<Enforced, RulesetFailure> {
    let abi = match status.landlock {
        LandlockStatus::NotEnabled => {
            return Err(RulesetFailure::Unsupported("the kernel has it but it is not enabled at boot".to_owned()));
        }
        LandlockStatus::NotImplemented => {
            return Err(RulesetFailure::Unsupported("the kernel is built without it".to_owned()));
        }
        LandlockStatus::Available { effective_abi, kernel_abi } => kernel_abi.unwrap_or(effective_abi as i32),
    };
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(RulesetFailure::Unsupported(format!("ABI {abi} enforced none of the rules")));
    }
    if !status.no_new_privs {
        return Err(RulesetFailure::Failed("no_new_privs could not be set".to_owned()));
    }
    Ok(Enforced { abi, tcp_rules: !network && abi >= 4 })
}
