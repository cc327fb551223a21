//! What `eagle check` says about the executor's workers: the worker
//! command, the worker user, and who can read what Eagle keeps from them.

use super::{NO_WORKER_COMMAND, Prompts};
use crate::ground::host;
use crate::profile::Profile;

/// How serious a finding of `eagle check` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Ok,
    Warn,
    Fail,
}

/// What `eagle check` says about running workers and keeping Eagle's
/// secrets from them: the worker command, the worker user, and who can read
/// the database, the profiles and the zuliprc.
pub fn checks(profile: &Profile) -> Vec<(Severity, String)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    if profile.role == crate::profile::Role::Executor {
        match &profile.executor.runner.worker_command {
            Some(command) => out.push((
                Severity::Ok,
                format!("worker command: {} ({:?})", command.template, command.kind),
            )),
            None => out.push((Severity::Fail, NO_WORKER_COMMAND.to_string())),
        }
        match profile.executor.runner.worker_user.as_deref().map(host::lookup_user) {
            None if host::euid() == 0 => out.push((Severity::Fail, super::WORKERS_AS_ROOT.into())),
            Some(Ok(Some(user))) if user.uid == 0 && host::euid() == 0 => {
                out.push((Severity::Fail, super::WORKERS_AS_ROOT.into()))
            }
            None => out.push((
                Severity::Warn,
                "workers run as Eagle's own user: a worker could read what Eagle reads (the \
                 database, the zuliprc); set runner.worker_user (README.md, \"Workers\")"
                    .into(),
            )),
            Some(Ok(Some(user))) if user.uid == host::euid() => out.push((
                Severity::Warn,
                format!(
                    "runner.worker_user {} is Eagle's own user: workers could read what Eagle reads",
                    user.name
                ),
            )),
            Some(Ok(Some(user))) if host::euid() != 0 => out.push((
                Severity::Fail,
                format!(
                    "runner.worker_user {} is another user, but Eagle does not run as root: it cannot start workers as it",
                    user.name
                ),
            )),
            Some(Ok(Some(user))) => {
                let runs = profile.runs_dir();
                match super::spawn::blocking_dir(&runs, &profile.data_dir) {
                    Some(blocked) => out.push((Severity::Fail, blocked.message(&user.name, &runs))),
                    None => out.push((
                        Severity::Ok,
                        format!(
                            "workers run as {} (uid {}) and reach their runs in {}",
                            user.name,
                            user.uid,
                            runs.display()
                        ),
                    )),
                }
            }
            Some(Ok(None)) => out.push((
                Severity::Fail,
                format!(
                    "runner.worker_user {:?} does not exist (useradd --system --create-home {0})",
                    profile.executor.runner.worker_user.as_deref().unwrap_or_default()
                ),
            )),
            Some(Err(error)) => out.push((Severity::Fail, format!("cannot look up runner.worker_user: {error}"))),
        }
        if let Err(error) = Prompts::load(profile.executor.runner.prompts_dir.as_deref()) {
            out.push((Severity::Fail, error));
        }
    }
    let mut private = |what: &str, path: &std::path::Path| {
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o044 != 0 {
                out.push((
                    Severity::Warn,
                    format!(
                        "{what} {} is readable by other users (mode {mode:o}): chmod 600 it",
                        path.display()
                    ),
                ));
            }
        }
    };
    if !profile.database_url.is_postgres() {
        private("the database", &profile.data_dir.join("eagle.db"));
    }
    private("the zuliprc", &profile.zuliprc);
    private("the profile", &profile.path);
    out
}
/// What `eagle check` says about the sandbox: confined (and how, probed
/// for real as the worker user), unconfined because the profile says so,
/// or unable to confine here (then workers do not start).
pub fn sandbox_check(profile: &Profile, exe: Option<&std::path::Path>) -> (Severity, String) {
    if crate::confine::sandbox::limits_of(profile).is_none() {
        return (
            Severity::Warn,
            "sandbox: off ([runner.sandbox] mode = \"off\"): workers and the analysis command run UNCONFINED, \
             with what their user can read and write and the whole network"
                .into(),
        );
    }
    let Some(exe) = exe else {
        return (
            Severity::Warn,
            "sandbox: cannot tell where the eagle binary is to probe the kernel".into(),
        );
    };
    let user = profile
        .executor
        .runner
        .worker_user
        .as_deref()
        .and_then(|name| host::lookup_user(name).ok().flatten())
        .filter(|user| user.uid != host::euid());
    match crate::confine::sandbox::probe(exe, user.as_ref()) {
        Ok(what) => (
            Severity::Ok,
            format!("sandbox: workers run confined ({what})"),
        ),
        Err(why) => (
            Severity::Fail,
            format!(
                "sandbox: this host cannot confine workers ({why}): they will not start; \
                 fix the kernel's settings, or set [runner.sandbox] mode = \"off\" to run them unconfined"
            ),
        ),
    }
}
