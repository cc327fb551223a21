//! `eagle policy list` and `eagle policy test`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;

use super::PolicyCommand;
use crate::policy::{
    Decision, FilterDecision, FilterVerdict, PolicyHost, PolicyRequest, PolicyTask, Verdict, Vote,
};

/// Exit code for bad usage (a malformed request line, an unreadable task file).
const USAGE: u8 = 2;

pub async fn run(
    dir: &super::Profiles,
    command: PolicyCommand,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<ExitCode> {
    match command {
        PolicyCommand::CompileIntoCache { sha256, dir } => {
            let mut input = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(
                    std::io::stdin(),
                    crate::policy::MAX_PLUGIN_BYTES as u64 + 1,
                ),
                &mut input,
            )
            .context("reading the plugin from standard input")?;
            crate::policy::compile_into_cache(&input, &sha256, &dir)?;
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::List(profile) => {
            let profile = super::load(dir, &profile.profile, env)?;
            let host = PolicyHost::for_profile(&profile).await?;
            print!("{}", list(&host));
            let failed = host.plugins().iter().any(|p| !p.loaded);
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        PolicyCommand::Test {
            profile,
            plugin,
            config,
            request,
            task,
        } => {
            // Read the input first: a usage error needs no plugins.
            let input = match (request, task) {
                (Some(line), _) => match parse_request(&line) {
                    Ok(request) => Input::Request(request),
                    Err(message) => return usage(&message),
                },
                (None, Some(file)) => match read_task(&file) {
                    Ok(task) => Input::Task(task),
                    Err(message) => return usage(&message),
                },
                (None, None) => return usage("give --request LINE or --task FILE"),
            };
            let host = match plugin {
                Some(path) => {
                    let config = config.unwrap_or_else(|| "{}".into());
                    if !serde_json::from_str::<serde_json::Value>(&config)
                        .is_ok_and(|v| v.is_object())
                    {
                        return usage(&format!("--config {config:?} is not a JSON object"));
                    }
                    let cache = super::load(dir, "eagle", env)
                        .ok()
                        .map(|p| p.plugin_cache_dir());
                    PolicyHost::single_file_with_config(&path, &config, cache).await?
                }
                None => {
                    let name = profile.unwrap_or_else(|| "eagle".into());
                    let profile = super::load(dir, &name, env)?;
                    PolicyHost::for_profile(&profile).await?
                }
            };
            let report = match &input {
                Input::Request(request) => show_decision(request, &host.decide(request).await),
                Input::Task(task) => show_filter(task, &host.filter(task).await),
            };
            print!("{report}");
            let load_errors: Vec<String> = host
                .plugins()
                .into_iter()
                .filter(|p| !p.loaded)
                .map(|p| format!("{}: {}", p.identity.source, p.state))
                .collect();
            if load_errors.is_empty() {
                Ok(ExitCode::SUCCESS)
            } else {
                for error in &load_errors {
                    eprintln!("eagle: plugin {error}");
                }
                Ok(ExitCode::FAILURE)
            }
        }
    }
}

enum Input {
    Request(PolicyRequest),
    Task(PolicyTask),
}

fn usage(message: &str) -> anyhow::Result<ExitCode> {
    eprintln!("eagle: {message}");
    Ok(ExitCode::from(USAGE))
}

fn parse_request(line: &str) -> Result<PolicyRequest, String> {
    match crate::ground::protocol::parse_line(line) {
        None => Err(format!("--request {line:?} is not a protocol line like '[REQUEST: run_tests] run:42 ...'")),
        Some(Err(e)) => Err(format!("--request {line:?}: {e}")),
        Some(Ok(parsed)) => PolicyRequest::from_line(&parsed, "eagle policy test").ok_or_else(|| {
            format!(
                "--request {line:?} is a [{}: ...] line; only [REQUEST: ...] and [ESCALATE: ...] are decided",
                parsed.tag.as_str()
            )
        }),
    }
}

fn read_task(file: &Path) -> Result<PolicyTask, String> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("--task {}", file.display()))
        .map_err(|e| format!("{e:#}"))?;
    serde_json::from_str(&text).map_err(|e| format!("--task {}: {e}", file.display()))
}

fn list(host: &PolicyHost) -> String {
    let mut out = String::new();
    let plugins = host.plugins();
    if plugins.is_empty() {
        out.push_str("no plugins configured: every request goes to a human\n");
    }
    for (i, p) in plugins.iter().enumerate() {
        let _ = writeln!(out, "{}. {} {}", i + 1, p.identity.name, p.identity.version);
        let _ = writeln!(out, "   source:    {}", p.identity.source);
        let _ = writeln!(out, "   sha256:    {}", p.identity.sha256);
        if let Some(version) = &p.interface_version {
            let _ = writeln!(out, "   interface: eagle:policy@{version}");
        }
        let _ = writeln!(out, "   state:     {}", p.state);
        let _ = writeln!(
            out,
            "   limits:    fuel {}, memory {} MiB, timeout {} ms",
            p.limits.fuel,
            p.limits.memory_bytes >> 20,
            p.limits.timeout.as_millis()
        );
        if !p.description.is_empty() {
            let _ = writeln!(out, "   decides:   {}", p.description);
        }
        if let Some(rejected) = &p.rejected {
            let _ = writeln!(out, "   refused:   a newer file: {rejected}");
        }
    }
    out
}

fn verdict_words(verdict: &Verdict) -> (&'static str, Option<&str>) {
    match verdict {
        Verdict::Approve => ("approve", None),
        Verdict::Deny(r) => ("deny", Some(r)),
        Verdict::Escalate(r) => ("escalate", Some(r)),
        Verdict::Abstain => ("abstain", None),
    }
}

fn vote_line<V>(out: &mut String, vote: &Vote<V>, word: &str, reason: Option<&str>) {
    // The source and the full hash: an impostor that copies another
    // plugin's name, version and words is plain to see.
    let p = &vote.plugin;
    let _ = write!(
        out,
        "  {} {} ({}, sha256:{}): {word}",
        p.name, p.version, p.source, p.sha256
    );
    if let Some(reason) = reason {
        let _ = write!(out, ": {reason}");
    }
    if vote.notify_owner {
        out.push_str(" (notify the owner)");
    }
    out.push('\n');
}

fn show_decision(request: &PolicyRequest, decision: &Decision) -> String {
    let mut out = format!(
        "request: [{}: {}] run:{} {}\nvotes:\n",
        match request.kind {
            crate::policy::RequestKind::Request => "REQUEST",
            crate::policy::RequestKind::Escalate => "ESCALATE",
        },
        request.action,
        request.run_id,
        request.body
    );
    if decision.votes.is_empty() {
        out.push_str("  (no plugins)\n");
    }
    for vote in &decision.votes {
        let (word, reason) = verdict_words(&vote.verdict);
        vote_line(&mut out, vote, word, reason);
    }
    let _ = writeln!(out, "decision: {}", decision.outcome.as_str());
    let _ = writeln!(out, "reason: {}", decision.reason);
    if let Some(by) = &decision.decided_by {
        let _ = writeln!(
            out,
            "decided by: {} {} ({}, sha256:{})",
            by.name, by.version, by.source, by.sha256
        );
    }
    if decision.notify_owner {
        out.push_str("the owner is notified\n");
    }
    out
}

fn show_filter(task: &PolicyTask, decision: &FilterDecision) -> String {
    let mut out = format!("task: {} {}\nvotes:\n", task.gid, task.title);
    if decision.votes.is_empty() {
        out.push_str("  (no plugins)\n");
    }
    for vote in &decision.votes {
        let (word, reason) = match &vote.verdict {
            FilterVerdict::Keep => ("keep", None),
            FilterVerdict::Skip(r) => ("skip", Some(r.as_str())),
            FilterVerdict::Abstain => ("abstain", None),
        };
        let failure = vote
            .failure
            .as_ref()
            .map(|f| format!("failed, so it keeps: {f}"));
        vote_line(&mut out, vote, word, reason.or(failure.as_deref()));
    }
    let _ = writeln!(out, "decision: {}", decision.word());
    let _ = writeln!(out, "reason: {}", decision.reason());
    out
}
