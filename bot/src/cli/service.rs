//! `eagle service install`: the templated systemd unit `eagle@.service`
//! (`dist/systemd/eagle@.service`, built in), one instance per profile,
//! written with this binary's path, the user, the profiles and the data
//! directory filled in; with `--enable`, `systemctl daemon-reload` and
//! `systemctl enable eagle@eagle eagle@executor`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args;

use super::Process;

/// The unit as shipped, with `@…@` values to fill in.
pub const UNIT_TEMPLATE: &str = include_str!("../../../dist/systemd/eagle@.service");

/// The unit's file name.
pub const UNIT_NAME: &str = "eagle@.service";

/// The instances `--enable` enables: one per built-in profile.
const INSTANCES: &[&str] = &["eagle@eagle", "eagle@executor"];

/// `eagle service install`'s options.
#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// The eagle binary the unit runs (default: this one).
    #[arg(long, value_name = "PATH")]
    pub bin: Option<PathBuf>,
    /// Where the unit is written.
    #[arg(long, value_name = "DIR", default_value = "/etc/systemd/system")]
    pub unit_dir: PathBuf,
    /// The Unix user Eagle runs as (default: root, which can start workers
    /// as `runner.worker_user`).
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Eagle's data directory: the database, runs, logs (the only place the
    /// service may write; created if missing).
    #[arg(long, value_name = "DIR", default_value = "/var/lib/eagle")]
    pub data_dir: PathBuf,
    /// Then run `systemctl daemon-reload` and `systemctl enable eagle@eagle
    /// eagle@executor` (without systemctl, print them).
    #[arg(long, conflicts_with = "print")]
    pub enable: bool,
    /// Only print the unit; write nothing.
    #[arg(long)]
    pub print: bool,
}

/// The unit with its values filled in. Each path must be absolute and
/// plain (systemd would split or expand one with spaces, quotes, `%`, `$`
/// or `\`).
pub fn render(
    bin: &Path,
    user: Option<&str>,
    data_dir: &Path,
    profiles_dir: &Path,
) -> anyhow::Result<String> {
    let plain = |what: &str, path: &Path| -> anyhow::Result<String> {
        let text = path
            .to_str()
            .with_context(|| format!("{what} {}: not UTF-8", path.display()))?;
        if !path.is_absolute() {
            bail!("{what} {text}: must be an absolute path");
        }
        if text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "\"'\\%$;".contains(c))
        {
            bail!(
                "{what} {text:?}: a path for a systemd unit must not hold spaces, quotes, '%', '$', ';' or '\\'"
            );
        }
        Ok(text.to_string())
    };
    let user_line = match user {
        None => "# User= not set: root, which starts workers as runner.worker_user".to_string(),
        Some(name) => {
            let ok = !name.is_empty()
                && name.len() <= 32
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
            if !ok {
                bail!("--user {name:?}: not a Unix user name");
            }
            format!("User={name}")
        }
    };
    Ok(UNIT_TEMPLATE
        .replace("@USER_LINE@", &user_line)
        .replace("@EAGLE_BIN@", &plain("--bin", bin)?)
        .replace("@DATA_DIR@", &plain("--data-dir", data_dir)?)
        .replace("@PROFILES_DIR@", &plain("--profiles-dir", profiles_dir)?))
}

/// The profiles directory of the service unless `--profiles-dir` says.
pub const DEFAULT_PROFILES_DIR: &str = "/etc/eagle/profiles";

/// `eagle service install`; `profiles_dir` is the global `--profiles-dir`:
/// the directory the service reads its profiles from (created if missing;
/// with no profile file there, the built-in profiles serve).
pub(super) fn install(
    args: &InstallArgs,
    profiles_dir: Option<&Path>,
    process: &Process,
) -> anyhow::Result<ExitCode> {
    let bin = match &args.bin {
        Some(bin) => bin.clone(),
        None => process.exe()?,
    };
    let profiles_dir = profiles_dir.unwrap_or(Path::new(DEFAULT_PROFILES_DIR));
    let unit = render(&bin, args.user.as_deref(), &args.data_dir, profiles_dir)?;
    if args.print {
        print!("{unit}");
        return Ok(ExitCode::SUCCESS);
    }
    if !bin.is_file() {
        bail!("--bin {}: no such file", bin.display());
    }
    let owner = match &args.user {
        None => None,
        Some(name) => Some(
            crate::ground::host::lookup_user(name)
                .with_context(|| format!("cannot look up the user {name}"))?
                .with_context(|| {
                    format!("--user {name}: no such user (useradd --system {name})")
                })?,
        ),
    };
    // The service may write only its data directory, which must exist for
    // systemd to set up its view of the file system; workers (another user)
    // pass through it to their runs.
    if !args.data_dir.is_dir() {
        std::fs::create_dir_all(&args.data_dir)
            .with_context(|| format!("cannot create {}", args.data_dir.display()))?;
        crate::ground::host::chmod(&args.data_dir, 0o711)?;
        if let Some(owner) = &owner {
            crate::ground::host::chown(&args.data_dir, owner).with_context(|| {
                format!("cannot give {} to {}", args.data_dir.display(), owner.name)
            })?;
        }
        println!("created {}", args.data_dir.display());
    }
    if !profiles_dir.is_dir() {
        std::fs::create_dir_all(profiles_dir)
            .with_context(|| format!("cannot create {}", profiles_dir.display()))?;
        crate::ground::host::chmod(profiles_dir, 0o755)?;
        println!(
            "created {} (empty: the built-in profiles serve; `eagle profile init --dir {0}` writes them to edit)",
            profiles_dir.display()
        );
    }
    std::fs::create_dir_all(&args.unit_dir)
        .with_context(|| format!("cannot create {}", args.unit_dir.display()))?;
    let path = args.unit_dir.join(UNIT_NAME);
    std::fs::write(&path, unit).with_context(|| format!("cannot write {}", path.display()))?;
    // Units are read by systemd and shown to anyone (`systemctl cat`).
    crate::ground::host::chmod(&path, 0o644)?;
    println!("wrote {}", path.display());
    let steps: Vec<Vec<&str>> = std::iter::once(vec!["daemon-reload"])
        .chain(std::iter::once(
            std::iter::once("enable")
                .chain(INSTANCES.iter().copied())
                .collect(),
        ))
        .collect();
    let show = |step: &[&str]| format!("systemctl {}", step.join(" "));
    if !args.enable {
        println!("next:");
        for step in &steps {
            println!("  {}", show(step));
        }
        println!("  systemctl start {}", INSTANCES.join(" "));
        return Ok(ExitCode::SUCCESS);
    }
    let Some(systemctl) = find_in_path("systemctl", process) else {
        println!("systemctl is not on PATH; run these where systemd runs:");
        for step in &steps {
            println!("  {}", show(step));
        }
        return Ok(ExitCode::SUCCESS);
    };
    for step in &steps {
        println!("running {}", show(step));
        let status = std::process::Command::new(&systemctl)
            .args(step)
            .status()
            .with_context(|| format!("cannot run {}", systemctl.display()))?;
        if !status.success() {
            bail!("{} failed ({status})", show(step));
        }
    }
    println!(
        "enabled; start them with: systemctl start {}",
        INSTANCES.join(" ")
    );
    Ok(ExitCode::SUCCESS)
}

/// The first executable `name` on the `PATH` `main` read.
fn find_in_path(name: &str, process: &Process) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = process.env.get("PATH")?;
    path.split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(name))
        .find(|file| {
            std::fs::metadata(file)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_is_filled_in_and_bad_paths_are_refused() {
        let unit = render(
            Path::new("/usr/local/bin/eagle"),
            Some("eagle"),
            Path::new("/var/lib/eagle"),
            Path::new("/etc/eagle/profiles"),
        )
        .unwrap();
        for line in [
            "ExecStart=/usr/local/bin/eagle run --profile %i",
            "User=eagle",
            "ReadWritePaths=/var/lib/eagle",
            "Environment=EAGLE_DATA_DIR=/var/lib/eagle",
            "Environment=EAGLE_PROFILES_DIR=/etc/eagle/profiles",
            "KillMode=process",
            "TimeoutStopSec=60s",
        ] {
            assert!(unit.lines().any(|l| l == line), "no {line:?} in:\n{unit}");
        }
        for value in ["@EAGLE_BIN@", "@DATA_DIR@", "@PROFILES_DIR@", "@USER_LINE@"] {
            assert!(!unit.contains(value), "{value} left in:\n{unit}");
        }
        let root = render(Path::new("/e"), None, Path::new("/d"), Path::new("/p")).unwrap();
        assert!(!root.lines().any(|l| l.starts_with("User=")));
        for (bin, data, why) in [
            ("bin/eagle", "/d", "must be an absolute path"),
            ("/my bin/eagle", "/d", "must not hold spaces"),
            ("/e", "/data%i", "must not hold spaces"),
        ] {
            let error = render(Path::new(bin), None, Path::new(data), Path::new("/p"))
                .unwrap_err()
                .to_string();
            assert!(error.contains(why), "{bin} {data}: {error}");
        }
        let error = render(
            Path::new("/e"),
            Some("a b"),
            Path::new("/d"),
            Path::new("/p"),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("not a Unix user name"), "{error}");
    }

    /// The drain bound the unit documents is the daemon's.
    #[test]
    fn the_unit_states_the_daemons_stop_bound() {
        let bound = crate::daemon::DRAIN_BOUND.as_secs();
        assert!(UNIT_TEMPLATE.contains(&format!("at most {bound} s")));
        let stop: u64 = UNIT_TEMPLATE
            .lines()
            .find_map(|l| l.strip_prefix("TimeoutStopSec="))
            .and_then(|v| v.strip_suffix('s'))
            .and_then(|v| v.parse().ok())
            .unwrap();
        // The drain, then the outbox's 15 s flush, with room to spare.
        assert!(stop > bound + 15, "TimeoutStopSec={stop}s");
    }
}
