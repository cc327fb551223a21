//! What the worker may read and write, as a Landlock ruleset (the init
//! restricts itself with it, so the worker inherits it): the system and
//! the worker's `PATH` readable and executable, the run's own files of
//! Eagle readable, its working directory, HOME and `/dev/shm` (a private
//! tmpfs) writable, a few device files usable, nothing else. Scoped too:
//! no signal to a process outside the domain, no abstract Unix socket
//! made outside it.
//!
//! Landlock grants by hierarchy and cannot deny inside a grant, so "the
//! system but its secrets" is granted as the siblings along the path to
//! each secret ([`grant`]); a symlink is granted only where it leads, and
//! never into a secret.
//!
//! TCP is not handled here: the network namespace has only `lo`, and a
//! worker's own tests bind and connect to ephemeral loopback ports, which
//! Landlock's per-port rules cannot express.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::namespaces::Plan;
use super::{SYSTEM_SECRETS, system_dirs, under};

/// The ABI the ruleset is written for (and required).
const ABI_USED: ABI = ABI::V6;

/// The running kernel's Landlock ABI (0 or less: none).
pub(super) fn abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a number.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    abi as i32
}

fn read_access() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute
}

fn full_access() -> BitFlags<AccessFs> {
    AccessFs::from_all(ABI_USED)
}

/// The ruleset for the plan (built after the mounts, so paths name the
/// worker's view).
pub(super) fn ruleset(plan: &Plan) -> Result<RulesetCreated, String> {
    let spec = &plan.spec;
    let mut denied: Vec<PathBuf> = spec.hide.clone();
    denied.extend(
        SYSTEM_SECRETS
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p))),
    );
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    let readable = system_dirs()
        .into_iter()
        .chain(plan.read_extra.iter().cloned())
        .chain([
            PathBuf::from("/proc"),
            PathBuf::from("/sys/devices/system/cpu"),
        ])
        .chain(["/sys/fs/cgroup"].iter().map(PathBuf::from));
    for dir in readable {
        grant(&mut rules, &dir, read_access(), &denied, 0);
    }
    // The run's own: granted even inside a hidden directory (they are
    // bound back there), never beyond.
    for path in &spec.read {
        rules.push((path.clone(), read_access()));
    }
    for path in &spec.write {
        rules.push((path.clone(), full_access()));
    }
    // A private tmpfs of the view's own (mounts.rs). `/tmp` is not
    // granted: the run's directories may lie under it in the view, and the
    // worker's TMPDIR is in its HOME.
    if Path::new("/dev/shm").is_dir() {
        rules.push(("/dev/shm".into(), full_access()));
    }
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;
    for dev in [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
        "/dev/ptmx",
    ] {
        rules.push((dev.into(), device));
    }
    rules.push(("/dev/pts".into(), device | AccessFs::ReadDir));
    rules.push(("/dev".into(), AccessFs::ReadDir.into()));
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(full_access())
        .and_then(|r| r.scope(Scope::from_all(ABI_USED)))
        .and_then(Ruleset::create)
        .map_err(|e| format!("cannot create the Landlock ruleset: {e}"))?;
    for (path, access) in rules {
        let Ok(fd) = PathFd::new(&path) else {
            continue;
        };
        let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
        let access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(ABI_USED)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("cannot add the Landlock rule for {}: {e}", path.display()))?;
    }
    Ok(created)
}

/// Grants `access` on `path`, or, where a denied path lies inside it, on
/// each of its entries but the way to the denied one (recursively).
fn grant(
    rules: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
    path: &Path,
    access: BitFlags<AccessFs>,
    denied: &[PathBuf],
    depth: usize,
) {
    if denied.iter().any(|d| under(path, d)) || depth > 32 {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.file_type().is_symlink() {
        // Granted where it leads, if that is not (or holds no) secret.
        if let Ok(target) = std::fs::canonicalize(path)
            && !denied
                .iter()
                .any(|d| under(&target, d) || under(d, &target))
        {
            rules.push((target, access));
        }
        return;
    }
    if !denied.iter().any(|d| under(d, path)) || !meta.is_dir() {
        rules.push((path.to_path_buf(), access));
        return;
    }
    // The directory itself may be listed; its entries are granted one by one.
    rules.push((path.to_path_buf(), AccessFs::ReadDir.into()));
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        grant(rules, &entry.path(), access, denied, depth + 1);
    }
}

/// Restricts this process (and what it starts) to the ruleset, with no
/// new privileges; anything short of full enforcement is an error.
pub(super) fn restrict(ruleset: RulesetCreated) -> Result<(), String> {
    let status = ruleset
        .restrict_self()
        .map_err(|e| format!("cannot enforce the Landlock ruleset: {e}"))?;
    if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
        return Err(format!(
            "the Landlock ruleset is not fully enforced ({:?})",
            status.ruleset
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denied_path_is_carved_out_as_its_siblings() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for sub in ["etc/eagle", "etc/ssl/private", "etc/ssl/certs", "lib"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("etc/hosts"), "").unwrap();
        std::os::unix::fs::symlink(root.join("etc/eagle"), root.join("etc/alias")).unwrap();
        std::os::unix::fs::symlink(root.join("lib"), root.join("etc/lib-link")).unwrap();
        let denied = vec![root.join("etc/eagle"), root.join("etc/ssl/private")];
        let mut rules = Vec::new();
        grant(&mut rules, &root, read_access(), &denied, 0);
        let granted = |p: &str| {
            rules
                .iter()
                .find(|(path, _)| *path == root.join(p))
                .map(|(_, access)| *access)
        };
        assert_eq!(granted(""), Some(AccessFs::ReadDir.into()), "{rules:?}");
        assert_eq!(granted("lib"), Some(read_access()));
        assert_eq!(granted("etc"), Some(AccessFs::ReadDir.into()));
        assert_eq!(granted("etc/hosts"), Some(read_access()));
        assert_eq!(granted("etc/ssl/certs"), Some(read_access()));
        assert_eq!(granted("etc/eagle"), None);
        assert_eq!(granted("etc/ssl/private"), None);
        // A symlink is granted where it leads, never into a denied path.
        assert!(
            rules
                .iter()
                .all(|(path, _)| !denied.iter().any(|d| path.starts_with(d))),
            "{rules:?}"
        );
    }
}
