//! The effects a worker asks Eagle to carry out, from its side:
//! `eagle request push_branch [--sha <sha>]`, `open_draft_pr --title …
//! --body-file …`, `comment_on_pr --body-file …`, `reply_thread <id>
//! --body-file …`, `merge_pr [--sha <sha>]`, `post_asana_comment
//! --body-file …`. Each becomes one request whose body is the effect's
//! exact parameters ([`crate::policy::effect::Effect`]); the answer carries what
//! Eagle did (the pushed sha, the PR's number and address).

use std::collections::BTreeMap;
use std::process::ExitCode;

use super::{AskError, EXIT_APPROVED, EXIT_DENIED, EXIT_STOP, EXIT_UNREACHABLE, ask, request_key};
use crate::ground::wire::{Answer, Ask, ENV_RUN, Status};
use crate::policy::effect::{CARRIED, Effect, usage};

/// `eagle request <action> <details…>`: the effects in their new forms; any
/// other action (and `--escalate`) as before.
pub fn request(
    env: &BTreeMap<String, String>,
    action: &str,
    details: &[String],
    escalate: bool,
    within: std::time::Duration,
) -> ExitCode {
    if escalate || !CARRIED.contains(&action) {
        return super::request(env, action, &details.join(" "), escalate, within);
    }
    match effect_of(action, details) {
        Ok(Some(effect)) => {
            let answer = ask_effect(env, &effect, Some(within));
            ExitCode::from(report(&answer, env, action))
        }
        // The old free-text forms of merge_pr and post_asana_comment.
        Ok(None) => super::request(env, action, &details.join(" "), false, within),
        Err(why) => {
            eprintln!("eagle request {action}: {why}");
            ExitCode::from(EXIT_UNREACHABLE)
        }
    }
}

/// Asks for one effect and waits for what Eagle did.
pub fn ask_effect(
    env: &BTreeMap<String, String>,
    effect: &Effect,
    within: Option<std::time::Duration>,
) -> Result<Answer, AskError> {
    let key = request_key();
    let body = effect.to_body();
    ask(
        env,
        |token| Ask::Request {
            token,
            key: key.clone(),
            action: effect.action().to_string(),
            body: body.clone(),
            escalate: false,
        },
        within,
    )
}

/// The effect `details` name; `None` for an old free-text form that still
/// means what it did.
fn effect_of(action: &str, details: &[String]) -> Result<Option<Effect>, String> {
    let flags = Flags::parse(details, &["--sha", "--title", "--body", "--body-file"])
        .map_err(|why| format!("{why} (usage: {})", usage(action)))?;
    let free = || {
        Err(format!(
            "{action} names its parameters now, Eagle carries it out (you need no token): {}",
            usage(action)
        ))
    };
    let effect = match action {
        "push_branch" => {
            if !flags.positional.is_empty() {
                return free();
            }
            let sha = match flags.get("--sha") {
                Some(sha) => resolve_commit(sha)?,
                None => resolve_commit("HEAD")?,
            };
            Effect::PushBranch { sha, branch: None }
        }
        "open_draft_pr" => {
            let Some(title) = flags.get("--title") else {
                return free();
            };
            Effect::OpenDraftPr {
                title: title.to_string(),
                body: flags.text()?.unwrap_or_default(),
            }
        }
        "comment_on_pr" => match flags.text()? {
            Some(body) if flags.positional.is_empty() => Effect::CommentOnPr { body },
            _ => return free(),
        },
        "reply_thread" => match (flags.positional.as_slice(), flags.text()?) {
            ([thread], Some(body)) => Effect::ReplyThread {
                thread: thread.clone(),
                body,
            },
            _ => return free(),
        },
        "merge_pr" => match flags.get("--sha") {
            Some(sha) if flags.positional.is_empty() => Effect::MergePr {
                sha: Some(resolve_commit(sha)?),
            },
            _ if flags.positional.is_empty() && details.is_empty() => Effect::MergePr { sha: None },
            _ if flags.named.is_empty() => return Ok(None),
            _ => return free(),
        },
        "post_asana_comment" => match flags.text()? {
            Some(body) if flags.positional.is_empty() => Effect::PostAsanaComment { body },
            None if flags.named.is_empty() => return Ok(None),
            _ => return free(),
        },
        _ => return Ok(None),
    };
    effect.check()?;
    Ok(Some(effect))
}

/// `--name value` and `--name=value` options among positional words.
#[derive(Debug, Default)]
pub(super) struct Flags {
    pub named: Vec<(String, String)>,
    pub positional: Vec<String>,
}

impl Flags {
    /// Reads `args`; every option must be one of `known` and have a value.
    pub fn parse(args: &[String], known: &[&str]) -> Result<Flags, String> {
        let mut flags = Flags::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            if !arg.starts_with("--") || arg == "--" {
                flags.positional.push(arg.clone());
                continue;
            }
            let (name, value) = match arg.split_once('=') {
                Some((name, value)) => (name.to_string(), value.to_string()),
                None => (
                    arg.clone(),
                    args.next()
                        .cloned()
                        .ok_or_else(|| format!("{arg} needs a value"))?,
                ),
            };
            if !known.contains(&name.as_str()) {
                return Err(format!("{name} is not an option here"));
            }
            flags.named.push((name, value));
        }
        Ok(flags)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.named
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The text of `--body` or `--body-file` (`-` is stdin), exactly as given.
    pub fn text(&self) -> Result<Option<String>, String> {
        if let Some(file) = self.get("--body-file") {
            return read_text(file).map(Some);
        }
        Ok(self.get("--body").map(str::to_string))
    }
}

/// A file's text (`-`: stdin), exactly, as UTF-8.
pub(super) fn read_text(file: &str) -> Result<String, String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    let read = if file == "-" {
        std::io::stdin()
            .lock()
            .take(crate::policy::effect::MAX_TEXT as u64 * 4 + 1)
            .read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|f| {
            f.take(crate::policy::effect::MAX_TEXT as u64 * 4 + 1)
                .read_to_end(&mut bytes)
        })
    };
    read.map_err(|e| format!("cannot read {file}: {e}"))?;
    String::from_utf8(bytes).map_err(|_| format!("{file} is not UTF-8 text"))
}

/// The full commit id `rev` names in the current repository (the worker's
/// own git, run in its own checkout).
pub(super) fn resolve_commit(rev: &str) -> Result<String, String> {
    if rev.starts_with('-') {
        return Err(format!("{rev:?} is not a commit"));
    }
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{rev}^{{commit}}"))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git to read {rev}: {e}"))?;
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || sha.is_empty() {
        return Err(format!("{rev:?} names no commit in this repository"));
    }
    Ok(sha)
}

/// Prints the answer as `eagle request` does, with what Eagle carried out;
/// returns the exit code.
pub(super) fn report(
    answer: &Result<Answer, AskError>,
    env: &BTreeMap<String, String>,
    action: &str,
) -> u8 {
    let run = env.get(ENV_RUN).cloned().unwrap_or_default();
    print_answer(answer, &run, action)
}

/// The one way an answer is printed (`eagle request`, the shims): the
/// approval on stdout, with the reason, a note and what Eagle carried out
/// on lines of their own; anything else on stderr. Returns the exit code.
pub(super) fn print_answer(answer: &Result<Answer, AskError>, run: &str, action: &str) -> u8 {
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            eprintln!("eagle request (run {run}): {error}");
            return EXIT_UNREACHABLE;
        }
    };
    let id = answer
        .request
        .map(|r| format!(" (request {r})"))
        .unwrap_or_default();
    match answer.status {
        Status::Approved => {
            println!("approved{id}: {action}");
            if !answer.reason.is_empty() {
                println!("{}", answer.reason);
            }
            if let Some(note) = &answer.note {
                println!("note: {note}");
            }
            if let Some(outcome) = &answer.outcome {
                for (key, value) in [
                    ("sha", outcome.sha.clone()),
                    ("branch", outcome.branch.clone()),
                    ("pr", outcome.pr_number.map(|n| n.to_string())),
                    ("url", outcome.url.clone()),
                ] {
                    if let Some(value) = value {
                        println!("{key}: {value}");
                    }
                }
            }
            EXIT_APPROVED
        }
        Status::Denied => {
            eprintln!("denied{id}: {}", answer.reason);
            EXIT_DENIED
        }
        Status::Escalated | Status::Stop => {
            eprintln!("stop{id}: {}", answer.reason);
            EXIT_STOP
        }
        Status::Invalid => {
            eprintln!("eagle request: {}", answer.reason);
            EXIT_UNREACHABLE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn forms_and_what_changed() {
        let pr = effect_of("open_draft_pr", &words("--title Fix --body hi")).unwrap();
        assert_eq!(
            pr,
            Some(Effect::OpenDraftPr {
                title: "Fix".into(),
                body: "hi".into()
            })
        );
        let old = effect_of("open_draft_pr", &words("Draft PR: x")).unwrap_err();
        assert!(old.contains("--title"), "{old}");
        assert_eq!(effect_of("merge_pr", &words("PR #4")).unwrap(), None);
        assert_eq!(
            effect_of("merge_pr", &[]).unwrap(),
            Some(Effect::MergePr { sha: None })
        );
        assert_eq!(
            effect_of("post_asana_comment", &words("Fixed it")).unwrap(),
            None
        );
        let reply = effect_of("reply_thread", &words("PRRT_1 --body done")).unwrap();
        assert_eq!(
            reply,
            Some(Effect::ReplyThread {
                thread: "PRRT_1".into(),
                body: "done".into()
            })
        );
        assert!(effect_of("comment_on_pr", &words("--nope x")).is_err());
    }
}
