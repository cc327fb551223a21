//! The operating system's confinement of a worker (and of the analysis
//! command): what the worker shim sets up before the worker's program
//! starts, so that a worker can do anything inside its run and nothing
//! outside it.
//!
//! The process tree, from the runner down:
//!
//! ```text
//! shim (S)       the runner's child: its pid and process group are recorded; the
//!                worker's user, the host's namespaces, not confined; it bridges the
//!                run's sockets (bridge) and writes the exit file
//!  └ keeper (C)  new user (the worker's uid and gid mapped to themselves), mount,
//!                network and PID namespaces (namespaces); waits for the init
//!     └ init (I) PID 1 of the new PID namespace: mounts the worker's view of the
//!                files (mounts), brings `lo` up, opens the bridges' listeners inside
//!                and hands them to S, confines itself (landlock), starts the worker,
//!                reaps, watches the limits (limits); when it exits the kernel ends
//!                everything left in the namespace
//!        └ worker (W) the worker's program, with rlimits, no capabilities, no new
//!                privileges, in I's Landlock domain
//! ```
//!
//! What the worker gets: the system readable (programs, libraries,
//! toolchains, `/etc` but its secrets); its working directory, HOME and
//! TMPDIR writable; `.git/config` and `.git/hooks` of its checkout
//! read-only; the run's own files of Eagle readable. Out of its reach:
//! Eagle's data directory, profiles and logs, other runs, every socket but
//! the two the shim bridges (the run's request socket, inside at
//! [`INSIDE_SOCKET`], and the egress proxy, inside at `127.0.0.1:3128`), the
//! network (only `lo` exists), processes outside its tree (not visible, not
//! signalled: Landlock's signal scope; not traced: another user namespace).
//!
//! Any failure to set this up is fatal before the worker's program runs:
//! the shim writes `error sandbox: …` to the exit file. A limit hit ends the
//! worker and is written as `limit <what>`.

mod bridge;
mod landlock;
mod limits;
mod mounts;
mod namespaces;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use namespaces::{Outcome, Tree, start};

/// The egress proxy's address inside the network namespace.
pub const PROXY_ADDR: &str = "127.0.0.1:3128";
/// The proxy URL set in the worker's `HTTPS_PROXY` and its kin.
pub const PROXY_URL: &str = "http://127.0.0.1:3128";
/// Where the run's request socket is inside the sandbox.
pub const INSIDE_SOCKET: &str = "/run/eagle/request.sock";
/// The oldest Landlock ABI Eagle confines with: 6 adds the signal and
/// abstract Unix socket scopes.
pub const MIN_LANDLOCK_ABI: i32 = 6;

/// What one confined process tree may reach, written by the runner (or
/// the analyzer) beside the run and read by the shim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// Where the worker may write (and read): its working directory and HOME.
    pub write: Vec<PathBuf>,
    /// What it may read beyond the system: the run's own files of Eagle.
    pub read: Vec<PathBuf>,
    /// Out of reach even under a readable directory, and covered in the
    /// mount namespace: Eagle's data, runs and logs directories, profiles.
    pub hide: Vec<PathBuf>,
    /// The run's request socket (bridged from [`INSIDE_SOCKET`]).
    pub request_socket: Option<PathBuf>,
    /// The run's egress socket (bridged from [`PROXY_ADDR`]).
    pub egress_socket: Option<PathBuf>,
    pub limits: Limits,
}

/// The per-run resource limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Processes and threads of the tree (`RLIMIT_NPROC`, counted in its own user namespace).
    pub processes: u64,
    /// The largest file it may write, in bytes (`RLIMIT_FSIZE`; the work log included).
    pub file_size: u64,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// What its writable directories may hold, in bytes (measured by the init).
    pub disk: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            processes: 1024,
            file_size: 1 << 30,
            open_files: 4096,
            disk: 10 << 30,
        }
    }
}

impl Spec {
    /// Writes the spec where the shim reads it (readable, not writable, by the worker).
    pub fn write_to(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text)?;
        crate::ground::host::chmod(path, 0o644)
    }

    /// Reads a spec the runner wrote.
    pub fn read_from(path: &Path) -> Result<Spec, String> {
        let text = std::fs::read(path)
            .map_err(|e| format!("cannot read the sandbox spec {}: {e}", path.display()))?;
        serde_json::from_slice(&text)
            .map_err(|e| format!("the sandbox spec {} is not valid: {e}", path.display()))
    }
}

/// The worker's environment inside: the request socket as it is seen
/// there, and every proxy variable pointing at the bridge.
pub fn inside_env(spec: &Spec, env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = env.clone();
    if spec.request_socket.is_some() {
        env.insert(crate::ground::wire::ENV_SOCKET.into(), INSIDE_SOCKET.into());
    }
    for name in [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "ALL_PROXY",
        "https_proxy",
        "http_proxy",
        "all_proxy",
    ] {
        env.insert(name.into(), PROXY_URL.into());
    }
    for name in ["NO_PROXY", "no_proxy"] {
        env.remove(name);
    }
    env
}

/// Whether this kernel can confine workers: Landlock's ABI (at least
/// [`MIN_LANDLOCK_ABI`]) and the namespaces, tried for real in a child of
/// this process (`eagle worker-shim --probe`, as the worker's user).
/// `Err` says what is missing.
pub fn probe_here() -> Result<String, String> {
    let abi = landlock::abi();
    if abi < MIN_LANDLOCK_ABI {
        return Err(if abi <= 0 {
            "Landlock is not available in this kernel (it must be built in and enabled: lsm=landlock)"
                .to_string()
        } else {
            format!(
                "Landlock ABI {abi} is older than the {MIN_LANDLOCK_ABI} Eagle needs (Linux 6.12 or later)"
            )
        });
    }
    namespaces::probe()?;
    Ok(format!(
        "Landlock ABI {abi}, user, mount, network and PID namespaces"
    ))
}

/// Runs the probe as `user` through `exe` (a child process: the caller may
/// be multi-threaded, the namespaces need a single-threaded one).
pub fn probe(exe: &Path, user: Option<&crate::ground::host::UnixUser>) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(exe);
    command
        .args(["worker-shim", "--probe", "--deadline", "10", "--", "true"])
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::null());
    if let Some(user) = user {
        command.uid(user.uid).gid(user.gid);
    }
    let out = command
        .output()
        .map_err(|e| format!("cannot run {} to probe the sandbox: {e}", exe.display()))?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() {
        Ok(said)
    } else if why.is_empty() {
        Err(format!("the sandbox probe failed ({})", out.status))
    } else {
        Err(why)
    }
}

/// The system directories every worker may read (and run programs from):
/// those that exist, symlinks resolved.
pub(crate) fn system_dirs() -> Vec<PathBuf> {
    [
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/nix", "/snap",
    ]
    .iter()
    .filter_map(|p| std::fs::canonicalize(p).ok())
    .collect()
}

/// Files and directories of `/etc` (and beside it) that hold secrets:
/// never readable by a worker, whatever DAC says.
pub(crate) const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/eagle",
];

/// Whether `path` is `dir` or lies below it.
pub(crate) fn under(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// How a daemon confines the processes it starts, decided once at its
/// start (after the probe): what is out of every worker's reach, what the
/// profile lets every worker read, and the limits of each run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// Eagle's data, runs and logs directories, profiles, zuliprc,
    /// database (with its `-wal` and `-shm`), and every file a profile
    /// names that holds a secret.
    pub hide: Vec<PathBuf>,
    /// Shown read-only besides the system (`[runner.sandbox] read_only`).
    pub read_only: Vec<PathBuf>,
    pub limits: Limits,
}

impl Confinement {
    /// What Eagle keeps from workers, for a profile: its data directory
    /// (database, plugin cache, runs, logs), the profile's directory and
    /// zuliprc, the SQLite file and its companions wherever they are, the
    /// secret files it names, and those the other profiles beside it name
    /// (so that a token file of Eagle's, named only in `eagle.toml`, is not
    /// in the executor's workers' view either).
    pub fn of(profile: &crate::profile::Profile, limits: Limits) -> Confinement {
        let mut hide = vec![
            profile.data_dir.clone(),
            profile.runs_dir(),
            profile.logs_dir(),
            profile.zuliprc.clone(),
        ];
        hide.extend(profile.secret_files.iter().cloned());
        if let Some(dir) = profile.path.parent() {
            hide.push(dir.to_path_buf());
            hide.extend(siblings_secrets(dir));
        }
        if let Some(file) = sqlite_file(profile.database_url.expose()) {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut name = file.clone().into_os_string();
                name.push(suffix);
                hide.push(PathBuf::from(name));
            }
        }
        let hide = hide
            .into_iter()
            .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
            .collect();
        let read_only = profile
            .executor
            .runner
            .sandbox
            .read_only
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .collect();
        Confinement {
            hide,
            read_only,
            limits,
        }
    }

    /// The spec of one confined tree.
    pub fn spec(
        &self,
        write: Vec<PathBuf>,
        read: Vec<PathBuf>,
        extra_hide: &[PathBuf],
        request_socket: Option<PathBuf>,
        egress_socket: Option<PathBuf>,
    ) -> Spec {
        let mut hide = self.hide.clone();
        hide.extend(extra_hide.iter().cloned());
        let mut read = read;
        read.extend(
            self.read_only
                .iter()
                .filter(|p| !hide.iter().any(|h| under(p, h)))
                .cloned(),
        );
        Spec {
            write,
            read,
            hide,
            request_socket,
            egress_socket,
            limits: self.limits,
        }
    }
}

/// The SQLite file of a database URL, if it is one with an absolute path.
fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let file = rest.split('?').next().unwrap_or_default();
    file.starts_with('/').then(|| PathBuf::from(file))
}

/// What the profiles in `dir` name that a worker must not see: each
/// string whose key names a file (`token_file`, `private_key_file`,
/// `ssh_key_file`, `zuliprc`, `data_dir`, a SQLite `database_url`),
/// resolved against `dir`; read from the files as written (a profile that
/// does not parse names nothing).
fn siblings_secrets(dir: &Path) -> Vec<PathBuf> {
    fn walk(value: &toml::Value, dir: &Path, out: &mut Vec<PathBuf>) {
        match value {
            toml::Value::Table(table) => {
                for (key, value) in table {
                    match (key.as_str(), value) {
                        ("database_url", toml::Value::String(url)) => {
                            if let Some(file) = sqlite_file(url) {
                                out.push(file);
                            }
                        }
                        (key, toml::Value::String(path))
                            if key.ends_with("_file") || key == "zuliprc" || key == "data_dir" =>
                        {
                            out.push(dir.join(path.trim()));
                        }
                        _ => walk(value, dir, out),
                    }
                }
            }
            toml::Value::Array(items) => items.iter().for_each(|v| walk(v, dir, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Ok(table) = text.parse::<toml::Table>() {
            walk(&toml::Value::Table(table), dir, &mut out);
        }
    }
    out
}

/// The presence lease prefix of a runner whose workers run unconfined.
pub const UNCONFINED_PRESENCE: &str = "runner:unconfined:";

/// The limits of a profile's sandbox, or `None` when its workers run
/// unconfined (`[runner.sandbox] mode = "off"`).
pub fn limits_of(profile: &crate::profile::Profile) -> Option<Limits> {
    let settings = &profile.executor.runner.sandbox;
    match settings.mode {
        crate::profile::SandboxMode::Off => None,
        crate::profile::SandboxMode::On => Some(Limits {
            processes: settings.max_processes,
            file_size: settings.max_file_size,
            open_files: settings.max_open_files,
            disk: settings.max_disk,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_a_profile_beside_names_is_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("eagle.toml"),
            "data_dir = \"data\"\ndatabase_url = \"sqlite:///srv/eagle.db?mode=rwc\"\n\
             [github]\ntoken_file = \"/etc/eagle-x/token\"\n\
             [[runner.repos]]\nname = \"a\"\nssh_key_file = \"keys/a\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("broken.toml"), "token_file = ").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "token_file = \"/x\"").unwrap();
        let mut found = siblings_secrets(dir.path());
        found.sort();
        let mut want = vec![
            dir.path().join("data"),
            PathBuf::from("/srv/eagle.db"),
            PathBuf::from("/etc/eagle-x/token"),
            dir.path().join("keys/a"),
        ];
        want.sort();
        assert_eq!(found, want);
    }

    #[test]
    fn inside_the_socket_is_the_bridge_and_every_proxy_variable_the_proxy() {
        let spec = Spec {
            write: Vec::new(),
            read: Vec::new(),
            hide: Vec::new(),
            request_socket: Some("/runs/1/eagle/sock-1".into()),
            egress_socket: Some("/runs/1/eagle/sock-1.egress".into()),
            limits: Limits::default(),
        };
        let env: BTreeMap<String, String> = [
            (crate::ground::wire::ENV_SOCKET, "/runs/1/eagle/sock-1"),
            ("NO_PROXY", "*"),
            ("PATH", "/usr/bin"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let inside = inside_env(&spec, &env);
        assert_eq!(inside[crate::ground::wire::ENV_SOCKET], INSIDE_SOCKET);
        for name in ["HTTPS_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
            assert_eq!(inside[name], PROXY_URL);
        }
        assert!(!inside.contains_key("NO_PROXY"));
        assert_eq!(inside["PATH"], "/usr/bin");
        assert_eq!(
            Outcome::Limit("disk: 9 MiB".into()).exit_line(),
            "limit disk: 9 MiB"
        );
        assert_eq!(
            Outcome::Failed("no".into()).exit_line(),
            "error sandbox: no"
        );
    }
}
