//! `eagle profile list | show | create | init`: the profiles directory as
//! an operator sees it (never a secret).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, bail};

use crate::profile::{self, Profile, ProfilesDir, UserRef};

/// `eagle profile list`: each profile's role, name and file (or
/// "built-in"), or why it is invalid.
pub(super) fn list(dir: &ProfilesDir, env: &BTreeMap<String, String>) -> anyhow::Result<ExitCode> {
    let mut names = dir
        .files()
        .with_context(|| format!("cannot read the profiles directory {}", dir.path.display()))?;
    println!("profiles in {} ({})", dir.path.display(), dir.chosen_by);
    for builtin in profile::BUILT_IN {
        if !names.iter().any(|n| n == builtin.name) {
            names.push(builtin.name.to_string());
        }
    }
    names.sort();
    for name in names {
        match dir.load(&name, env) {
            Ok(p) => println!(
                "{name}\t{}\t{}\t{}",
                p.role.as_str(),
                p.display_name,
                match p.origin {
                    profile::Origin::File => p.path.display().to_string(),
                    profile::Origin::BuiltIn => "built-in".into(),
                }
            ),
            Err(e) => println!("{name}\tinvalid: {e}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `eagle profile init`: the built-in profiles written out to edit.
pub(super) fn init(dir: &Path, force: bool) -> anyhow::Result<ExitCode> {
    let written = profile::locate::init(dir, force).map_err(anyhow::Error::msg)?;
    for path in &written {
        println!("wrote {}", path.display());
    }
    println!(
        "edit them there; put each bot's zuliprc beside them ({}, {})",
        dir.join("eagle.zuliprc").display(),
        dir.join("executor.zuliprc").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The human-readable view of a profile. Never prints a secret: the API key
/// is reported as present or missing, the database URL without its password.
pub fn show_profile(profile: &Profile, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let list = |items: &[UserRef]| {
        if items.is_empty() {
            "(none)".to_string()
        } else {
            items
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let _ = writeln!(
        out,
        "profile:       {} ({})",
        profile.name,
        profile.source()
    );
    let _ = writeln!(out, "role:          {}", profile.role.as_str());
    let _ = writeln!(out, "display name:  {}", profile.display_name);
    let zulip = match crate::transport::zulip::zuliprc::credentials(profile, env) {
        Ok(creds) => format!(
            "{} as {} (API key: present; from {})",
            creds.site, creds.email, creds.source
        ),
        Err(e) => format!("not usable: {e}"),
    };
    let _ = writeln!(out, "zuliprc:       {}", profile.zuliprc.display());
    let _ = writeln!(out, "zulip:         {zulip}");
    let _ = writeln!(out, "database:      {}", profile.database_url.redacted());
    let _ = writeln!(out, "data dir:      {}", profile.data_dir.display());
    let _ = writeln!(out, "profile state: {}", profile.state_dir().display());
    let _ = writeln!(out, "approvers:     {}", list(&profile.approvers));
    let _ = writeln!(
        out,
        "owner:         {}",
        profile
            .owner
            .as_ref()
            .map_or("(none)".into(), ToString::to_string)
    );
    let channels = if profile.channels.is_empty() {
        "(every channel the bot is subscribed to)".to_string()
    } else {
        profile.channels.join(", ")
    };
    let _ = writeln!(out, "channels:      {channels}");
    let _ = writeln!(out, "executor runs: #{}", profile.executor_channel);
    if let Some(bot) = &profile.eagle.executor_bot {
        let _ = writeln!(out, "executor bot:  {bot}");
    }
    let _ = writeln!(
        out,
        "persona:       {}",
        profile
            .persona
            .as_ref()
            .map_or("(none)".into(), ToString::to_string)
    );
    let _ = writeln!(
        out,
        "late commands: older than {} are reported, not run",
        humantime::format_duration(profile.zulip.late_command_age)
    );
    let _ = writeln!(
        out,
        "plugins:       dir {}{}",
        profile.eagle.policy.dir.display(),
        if profile.eagle.policy.load_all {
            ", loading every .wasm in it"
        } else {
            ""
        }
    );
    if profile.role == crate::profile::Role::Executor {
        let sandbox = &profile.executor.runner.sandbox;
        let hosts = if sandbox.allow_hosts.is_empty() {
            "no host".to_string()
        } else {
            sandbox
                .allow_hosts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "sandbox:       {} (workers reach {hosts}; {} processes, files up to {} MiB, {} open files, {} MiB on disk)",
            match sandbox.mode {
                crate::profile::SandboxMode::On => "on",
                crate::profile::SandboxMode::Off => "OFF: workers run unconfined",
            },
            sandbox.max_processes,
            sandbox.max_file_size >> 20,
            sandbox.max_open_files,
            sandbox.max_disk >> 20,
        );
        if let Some(model) = &profile.executor.runner.model {
            let _ = writeln!(
                out,
                "model key:     {} kept by Eagle; workers hold a placeholder, their proxy sets the key for {}",
                model.name,
                model.url.as_str().trim_end_matches('/')
            );
        }
    }
    for (i, plugin) in profile.eagle.policy.plugins.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {}. {} (fuel {}, memory {} MiB, timeout {} ms, config {})",
            i + 1,
            plugin.source,
            plugin.limits.fuel,
            plugin.limits.memory_bytes >> 20,
            plugin.limits.timeout.as_millis(),
            plugin.config_json
        );
    }
    out
}

/// Copies profile `from` (and its persona) to `name`, pointing the copy at
/// its own zuliprc so that two profiles never share one bot identity.
pub fn create_profile(dir: &ProfilesDir, name: &str, from: &str) -> anyhow::Result<()> {
    profile::validate_name(name).map_err(anyhow::Error::msg)?;
    profile::validate_name(from).map_err(anyhow::Error::msg)?;
    let dir = &dir.path;
    let source = dir.join(format!("{from}.toml"));
    let target = dir.join(format!("{name}.toml"));
    if target.exists() {
        bail!("{} exists already; pick another name", target.display());
    }
    // A built-in profile is copied from the binary.
    let builtin = profile::locate::built_in(from).filter(|_| !source.is_file());
    let text = match builtin {
        Some(b) => b.toml.to_string(),
        None => std::fs::read_to_string(&source)
            .with_context(|| format!("cannot read profile {}", source.display()))?,
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let text = text
        .replace(
            &format!("\"{from}.zuliprc\""),
            &format!("\"{name}.zuliprc\""),
        )
        .replace(
            &format!("\"{from}.soul.md\""),
            &format!("\"{name}.soul.md\""),
        );
    std::fs::write(&target, text).with_context(|| format!("cannot write {}", target.display()))?;
    let persona = dir.join(format!("{from}.soul.md"));
    let copy = dir.join(format!("{name}.soul.md"));
    if persona.is_file() {
        if !copy.exists() {
            std::fs::copy(&persona, &copy)
                .with_context(|| format!("cannot copy {}", persona.display()))?;
        }
    } else if let Some(b) = builtin
        && !copy.exists()
    {
        std::fs::write(&copy, b.soul.1)
            .with_context(|| format!("cannot write {}", copy.display()))?;
    }
    println!(
        "created {} from {}; give it its own bot: put its zuliprc at {}",
        target.display(),
        match builtin {
            Some(_) => format!("the built-in {from}"),
            None => source.display().to_string(),
        },
        dir.join(format!("{name}.zuliprc")).display()
    );
    Ok(())
}
