//! The worker's familiar commands, without a token: the `eagle` binary
//! answers as `git-remote-eagle` (a git remote helper) and as `gh` when it
//! is called by those names (the runner puts links to it first on the
//! worker's `PATH`, and sets the checkout's `remote.origin.pushurl` to
//! `eagle::origin`).
//!
//! * `git push` (any refspec) becomes `push_branch` of the commit being
//!   pushed, to the branch named; Eagle pushes it only to the run's own
//!   branch (a push to another ref fails, and nothing is recorded), never
//!   deletes, never forces over commits it did not push.
//! * `gh pr create`, `gh pr comment`, `gh pr merge`, and the `gh api` calls
//!   that mean one of them, become `open_draft_pr`, `comment_on_pr` and
//!   `merge_pr`, printing what gh would (the PR's address); anything else
//!   fails and says why.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::process::ExitCode;

use super::asks::{Flags, ask_effect, read_text, report, resolve_commit};
use super::{EXIT_APPROVED, EXIT_UNREACHABLE};
use crate::ground::wire::{GH, REMOTE_HELPER, Status};
use crate::policy::effect::Effect;

/// Runs the shim `argv[0]` names, if it names one.
pub fn dispatch(argv: &[OsString], env: &BTreeMap<String, String>) -> Option<ExitCode> {
    let name = std::path::Path::new(argv.first()?).file_name()?.to_str()?;
    let args: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match name {
        REMOTE_HELPER => Some(remote_helper(env)),
        GH => Some(gh(env, &args)),
        _ => None,
    }
}

/// The git remote-helper protocol (`gitremote-helpers(7)`), `push` only.
fn remote_helper(env: &BTreeMap<String, String>) -> ExitCode {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut lines = stdin.lock().lines();
    let mut pushes: Vec<String> = Vec::new();
    while let Some(Ok(line)) = lines.next() {
        let reply = if line == "capabilities" {
            "push\noption\n\n".to_string()
        } else if line.starts_with("option ") {
            "unsupported\n".to_string()
        } else if line == "list" || line == "list for-push" {
            // Eagle reads the branch itself; git need not know it.
            "\n".to_string()
        } else if let Some(spec) = line.strip_prefix("push ") {
            pushes.push(spec.to_string());
            continue;
        } else if line.is_empty() {
            if pushes.is_empty() {
                return ExitCode::SUCCESS;
            }
            let mut reply = String::new();
            for spec in std::mem::take(&mut pushes) {
                reply.push_str(&push_one(env, &spec));
            }
            reply.push('\n');
            reply
        } else {
            eprintln!("git-remote-eagle: {line:?} is not supported (Eagle's remote only pushes)");
            return ExitCode::from(EXIT_UNREACHABLE);
        };
        if out
            .write_all(reply.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// One `push [+]<src>:<dst>`: `ok <dst>` or `error <dst> <why>`.
fn push_one(env: &BTreeMap<String, String>, spec: &str) -> String {
    let spec = spec.strip_prefix('+').unwrap_or(spec);
    let (src, dst) = spec.split_once(':').unwrap_or((spec, spec));
    let refuse = |why: &str| {
        eprintln!("eagle: {why}");
        format!("error {dst} {}\n", crate::ground::text::one_line(why, 300))
    };
    if src.is_empty() {
        return refuse("Eagle never deletes a branch: nothing was pushed");
    }
    let Some(branch) = dst.strip_prefix("refs/heads/") else {
        return refuse(&format!(
            "Eagle pushes only to this run's branch, not to {dst}: nothing was pushed"
        ));
    };
    let sha = match resolve_commit(src) {
        Ok(sha) => sha,
        Err(why) => return refuse(&why),
    };
    let effect = Effect::PushBranch {
        sha,
        branch: Some(branch.to_string()),
    };
    match ask_effect(env, &effect, None) {
        Ok(answer) if answer.status == Status::Approved => {
            if !answer.reason.is_empty() {
                eprintln!("eagle: {}", answer.reason);
            }
            format!("ok {dst}\n")
        }
        Ok(answer) => refuse(&answer.reason),
        Err(error) => refuse(&error.to_string()),
    }
}

/// The `gh` shim.
fn gh(env: &BTreeMap<String, String>, args: &[String]) -> ExitCode {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let effect = match words.as_slice() {
        ["pr", "create", rest @ ..] => pr_create(rest),
        ["pr", "comment", rest @ ..] => pr_comment(rest),
        ["pr", "merge", rest @ ..] => pr_merge(rest),
        ["api", rest @ ..] => api(rest),
        _ => Err(unsupported(args)),
    };
    let effect = match effect.and_then(|e| e.check().map(|()| e)) {
        Ok(effect) => effect,
        Err(why) => {
            eprintln!("gh (Eagle): {why}");
            return ExitCode::FAILURE;
        }
    };
    let answer = ask_effect(env, &effect, None);
    if let Ok(a) = &answer
        && a.status == Status::Approved
    {
        // What gh prints: the PR's (or the comment's) address.
        match &a.outcome {
            Some(outcome) if outcome.url.is_some() => {
                println!("{}", outcome.url.as_deref().unwrap_or_default());
            }
            _ => println!("{}", a.reason),
        }
        return ExitCode::from(EXIT_APPROVED);
    }
    ExitCode::from(report(&answer, env, effect.action()))
}

fn unsupported(args: &[String]) -> String {
    format!(
        "`gh {}` is not available in an Eagle run: a worker holds no GitHub token. \
         Eagle does these for you: git push, gh pr create, gh pr comment, gh pr merge \
         (and gh api calls that mean them); eagle request reply_thread <id> --body-file <file> \
         answers a review thread",
        crate::ground::text::one_line(&args.join(" "), 200)
    )
}

/// Short options gh has, as their long names.
fn long(args: &[&str], short: &[(&str, &str)], switches: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for arg in args {
        let arg = short
            .iter()
            .find(|(s, _)| s == arg)
            .map_or(*arg, |(_, l)| *l);
        // Switches without a value are dropped (Eagle's PRs are drafts
        // anyway; the merge method is the profile's).
        if switches.contains(&arg) {
            continue;
        }
        out.push(arg.to_string());
    }
    out
}

fn pr_create(args: &[&str]) -> Result<Effect, String> {
    let switches = ["--draft", "--fill", "--fill-first", "--fill-verbose"];
    let fill = args
        .iter()
        .any(|a| matches!(*a, "--fill" | "-f" | "--fill-first" | "--fill-verbose"));
    let args = long(
        args,
        &[
            ("-t", "--title"),
            ("-b", "--body"),
            ("-F", "--body-file"),
            ("-d", "--draft"),
            ("-f", "--fill"),
            ("-B", "--base"),
            ("-H", "--head"),
        ],
        &switches,
    );
    let flags = Flags::parse(
        &args,
        &["--title", "--body", "--body-file", "--base", "--head"],
    )?;
    if !flags.positional.is_empty() {
        return Err(format!(
            "gh pr create takes no argument {:?}",
            flags.positional[0]
        ));
    }
    let (mut title, mut body) = (flags.get("--title").map(str::to_string), flags.text()?);
    if fill {
        title = title.or_else(|| git_log("%s"));
        body = body.or_else(|| git_log("%b"));
    }
    let Some(title) = title else {
        return Err("gh pr create needs --title (or --fill)".into());
    };
    Ok(Effect::OpenDraftPr {
        title,
        body: body.unwrap_or_default(),
    })
}

fn git_log(format: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["log", "-1", &format!("--format={format}")])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

fn pr_comment(args: &[&str]) -> Result<Effect, String> {
    let args = long(args, &[("-b", "--body"), ("-F", "--body-file")], &[]);
    let flags = Flags::parse(&args, &["--body", "--body-file"])?;
    if flags.positional.len() > 1 {
        return Err("gh pr comment takes at most the PR (the run's own)".into());
    }
    let body = flags
        .text()?
        .ok_or("gh pr comment needs --body or --body-file")?;
    Ok(Effect::CommentOnPr { body })
}

fn pr_merge(args: &[&str]) -> Result<Effect, String> {
    let args = long(
        args,
        &[
            ("-s", "--squash"),
            ("-m", "--merge"),
            ("-r", "--rebase"),
            ("-d", "--delete-branch"),
        ],
        &[
            "--squash",
            "--merge",
            "--rebase",
            "--delete-branch",
            "--auto",
        ],
    );
    let flags = Flags::parse(&args, &["--match-head-commit"])?;
    if flags.positional.len() > 1 {
        return Err("gh pr merge takes at most the PR (the run's own)".into());
    }
    let sha = flags
        .get("--match-head-commit")
        .map(resolve_commit)
        .transpose()?;
    Ok(Effect::MergePr { sha })
}

/// `gh api`: the three calls that mean an effect, by method and path.
fn api(args: &[&str]) -> Result<Effect, String> {
    let mut method = None;
    let mut path = None;
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .map(|v| v.to_string())
                .ok_or(format!("gh api: {name} needs a value"))
        };
        match *arg {
            "-X" | "--method" => method = Some(value(arg)?.to_ascii_uppercase()),
            "-f" | "-F" | "--field" | "--raw-field" => {
                let field = value(arg)?;
                let (k, v) = field
                    .split_once('=')
                    .ok_or(format!("gh api: {field:?} is not key=value"))?;
                let v = match v.strip_prefix('@') {
                    Some(file) if *arg == "-F" || *arg == "--field" => read_text(file)?,
                    _ => v.to_string(),
                };
                fields.insert(k.to_string(), v);
            }
            "--input" => {
                let text = read_text(&value(arg)?)?;
                let json: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| format!("gh api --input: not JSON: {e}"))?;
                for (k, v) in json.as_object().into_iter().flatten() {
                    if let Some(s) = v.as_str() {
                        fields.insert(k.clone(), s.to_string());
                    }
                }
            }
            other if !other.starts_with('-') && path.is_none() => {
                path = Some(other.trim_start_matches('/').to_string());
            }
            other => return Err(format!("gh api: {other} is not supported in an Eagle run")),
        }
    }
    let path = path.ok_or("gh api needs an endpoint")?;
    let method =
        method.unwrap_or_else(|| if fields.is_empty() { "GET" } else { "POST" }.to_string());
    let parts: Vec<&str> = path.split('/').collect();
    match (method.as_str(), parts.as_slice()) {
        ("POST", ["repos", _, _, "pulls"]) => Ok(Effect::OpenDraftPr {
            title: fields
                .get("title")
                .cloned()
                .ok_or("gh api: a PR needs title")?,
            body: fields.get("body").cloned().unwrap_or_default(),
        }),
        ("POST", ["repos", _, _, "issues", _, "comments"]) => Ok(Effect::CommentOnPr {
            body: fields
                .get("body")
                .cloned()
                .ok_or("gh api: a comment needs body")?,
        }),
        ("PUT", ["repos", _, _, "pulls", _, "merge"]) => Ok(Effect::MergePr {
            sha: fields.get("sha").cloned(),
        }),
        _ => Err(format!(
            "`gh api -X {method} {path}` is not available in an Eagle run: a worker holds no \
             GitHub token (Eagle opens PRs, comments and merges for it)"
        )),
    }
}
