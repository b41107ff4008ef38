//! The seccomp filter every confined command runs under: no sockets without the network
//! grant, no new namespaces, no tracing, no kernel keyrings, BPF, modules or mounts.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

/// System calls refused outright: they reach other processes, the kernel or the mount
/// table, none of which a command in a sandbox has any business with.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_userfaultfd,
    // io_uring can open sockets and files without passing through this filter.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_fanotify_init,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_syslog,
    libc::SYS_quotactl,
    libc::SYS_vhangup,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
];

/// `clone` flags that create namespaces.
const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// What the filter lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterOptions {
    /// Allow `socket` (otherwise every address family is refused; `socketpair` stays).
    pub network: bool,
    /// Refuse `setsid` and `setpgid`, so every process stays in the group the timeout
    /// kills (needed when no process-count group or PID namespace catches leavers).
    pub keep_in_group: bool,
}

/// Why the filter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("can't build the seccomp filter: {0}")]
pub struct FilterError(String);

fn failure(error: impl std::fmt::Display) -> FilterError {
    FilterError(error.to_string())
}

/// Compiles the filters for this machine's architecture. There are two, to be installed
/// together: one answers `clone3` with "not implemented", the other refuses the rest.
/// (Stacked filters take the strictest verdict, so each may allow what the other decides.)
pub fn programs(options: FilterOptions) -> Result<Vec<BpfProgram>, FilterError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(failure)?;
    let errno = |code: i32| SeccompAction::Errno(u32::try_from(code).unwrap_or(1));
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = REFUSED.iter().map(|number| (*number, Vec::new())).collect();
    let mut namespace_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let bits = u64::try_from(flag).map_err(failure)?;
        let condition =
            SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(bits), bits).map_err(failure)?;
        namespace_rules.push(SeccompRule::new(vec![condition]).map_err(failure)?);
    }
    refused.insert(libc::SYS_clone, namespace_rules);
    if !options.network {
        refused.insert(libc::SYS_socket, Vec::new());
    }
    if options.keep_in_group {
        refused.insert(libc::SYS_setsid, Vec::new());
        refused.insert(libc::SYS_setpgid, Vec::new());
    }
    let main = SeccompFilter::new(refused, SeccompAction::Allow, errno(libc::EPERM), arch).map_err(failure)?;
    // clone3 passes its flags in memory a filter can't read: answering "not implemented"
    // makes the C library fall back to clone, whose flags the main filter checks.
    let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    let fallback = SeccompFilter::new(clone3, SeccompAction::Allow, errno(libc::ENOSYS), arch).map_err(failure)?;
    Ok(vec![fallback.try_into().map_err(failure)?, main.try_into().map_err(failure)?])
}

/// The program as the bytes of a `struct sock_filter` array, as `bwrap --seccomp` reads it.
pub fn to_bytes(program: &BpfProgram) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in program {
        bytes.extend_from_slice(&instruction.code.to_ne_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_ne_bytes());
    }
    bytes
}

/// Installs the filters on the calling thread (the helper is single-threaded).
pub fn apply(programs: &[BpfProgram]) -> Result<(), FilterError> {
    for program in programs {
        seccompiler::apply_filter(program).map_err(failure)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_compiles_with_and_without_network() {
        for network in [false, true] {
            for keep_in_group in [false, true] {
                let programs = programs(FilterOptions { network, keep_in_group }).unwrap();
                assert_eq!(programs.len(), 2);
                assert!(programs[1].len() > REFUSED.len());
                assert_eq!(to_bytes(&programs[1]).len(), programs[1].len() * 8);
            }
        }
    }
}
