//! The environment a worker (or the analysis command) starts with, built
//! from nothing out of the profile's resolved share of Eagle's environment
//! ([`WorkerEnv`]): its `PATH` with the `eagle` binary's directory first,
//! its own `HOME` and `TMPDIR`, the locale, the listed variables, and for
//! Claude Code its own directories and quiet settings.

use std::collections::BTreeMap;
use std::path::Path;

use secrecy::ExposeSecret as _;

use crate::profile::{WorkerEnv, WorkerKind};

/// What Claude Code is told so it calls nobody but its model API.
const CLAUDE_QUIET: &[&str] = &[
    "DISABLE_AUTOUPDATER",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
];

/// The whole environment of a child (a worker or the analysis command),
/// from `worker`, the profile's share of Eagle's environment: `exe`'s directory first on its
/// `PATH`, `home` as its `HOME` (with `tmp` in it), `user` as `USER` and
/// `LOGNAME` when given, the locale, the listed variables, and for
/// Claude Code its own directories and quiet settings.
pub fn child_env(
    worker: &WorkerEnv,
    exe: &Path,
    home: &Path,
    user: Option<&str>,
    kind: WorkerKind,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let exe_dir = exe
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    env.insert("PATH".into(), format!("{exe_dir}:{}", worker.path));
    env.insert("HOME".into(), home.display().to_string());
    let tmp = home.join("tmp").display().to_string();
    env.insert("TMPDIR".into(), tmp.clone());
    if let Some(user) = user {
        env.insert("USER".into(), user.to_string());
        env.insert("LOGNAME".into(), user.to_string());
    }
    for (name, value) in worker.passed() {
        env.insert(name.clone(), value.clone());
    }
    if kind == WorkerKind::Claude {
        env.insert(
            "CLAUDE_CONFIG_DIR".into(),
            home.join(".claude").display().to_string(),
        );
        env.insert("CLAUDE_CODE_TMPDIR".into(), tmp);
        for quiet in CLAUDE_QUIET {
            env.insert((*quiet).into(), "1".into());
        }
    }
    for (name, value) in worker.values() {
        env.insert(name.clone(), value.expose_secret().to_string());
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_gets_only_what_is_listed() {
        let env: BTreeMap<String, String> = [
            ("PATH", "/opt/bin:/usr/bin"),
            ("LANG", "C.UTF-8"),
            ("API_KEY", "sk-secret"),
            ("DATABASE_URL", "postgres://x"),
            ("USER", "eagle"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let worker = WorkerEnv::resolve(vec!["API_KEY".into(), "UNSET".into()], None, &env);
        assert!(!format!("{worker:?}").contains("sk-secret"));
        let child = child_env(
            &worker,
            Path::new("/usr/local/bin/eagle"),
            Path::new("/runs/1/home"),
            Some("worker"),
            WorkerKind::Generic,
        );
        assert_eq!(child["PATH"], "/usr/local/bin:/opt/bin:/usr/bin");
        assert_eq!(child["HOME"], "/runs/1/home");
        assert_eq!(child["TMPDIR"], "/runs/1/home/tmp");
        assert_eq!(child["API_KEY"], "sk-secret");
        assert_eq!(child["LANG"], "C.UTF-8");
        assert_eq!(child["USER"], "worker");
        assert!(!child.contains_key("DATABASE_URL"));
        assert!(!child.contains_key("UNSET"));
        let path = WorkerEnv::resolve(Vec::new(), Some("/bin".into()), &env);
        let child = child_env(
            &path,
            Path::new("/e/eagle"),
            Path::new("/h"),
            None,
            WorkerKind::Claude,
        );
        assert_eq!(child["PATH"], "/e:/bin");
        assert_eq!(child["CLAUDE_CONFIG_DIR"], "/h/.claude");
        assert!(!child.contains_key("USER"));
    }
}
