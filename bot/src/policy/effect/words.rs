//! What an effect a worker asks for means, said in Eagle's words.
//!
//! An approver decides on what Eagle will do, not on what the worker wrote
//! about it: a merge is named by what Eagle's PR loop last saw of the run's
//! PR (its number and title, branch and base, head and CI), a push by the
//! commit and the run's own branch, a comment by its length and first
//! lines. The decider's escalation and `!show` both say it from here, so
//! the two never disagree, and both say it from the request's parameters
//! as Eagle parses them to carry them out ([`Effect::parse`]), never from
//! a reading of the raw text: a commit written with JSON escapes is named
//! as the commit that is pushed, and parameters Eagle cannot carry out are
//! said to be so. Everything quoted is one line per line, capped, with
//! mentions made inert and invisible code points written out (`<U+202E>`).

use super::Effect;
use crate::ground::text::{neutralize_mentions, visible_line};
use crate::store::{Request, Run, short_sha};

/// The longest PR title or quoted line shown.
const LINE_CHARS: usize = 200;
/// How many first lines of a text are quoted.
const FIRST_LINES: usize = 3;

/// The kinds of effect Eagle carries out or lets happen for a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    PushBranch,
    OpenDraftPr,
    CommentOnPr,
    ReplyThread,
    MergePr,
    PostAsanaComment,
    /// A command an operator's `hook_rules` asks about.
    RunCommand,
}

impl Kind {
    /// The effect a request's action names, if it names one.
    pub fn of(action: &str) -> Option<Kind> {
        Some(match action {
            "push_branch" => Kind::PushBranch,
            "open_draft_pr" => Kind::OpenDraftPr,
            "comment_on_pr" => Kind::CommentOnPr,
            "reply_thread" => Kind::ReplyThread,
            "merge_pr" => Kind::MergePr,
            "post_asana_comment" => Kind::PostAsanaComment,
            "run_command" => Kind::RunCommand,
            _ => return None,
        })
    }

    /// Whether an approval must name the request exactly (`!approve <run>
    /// <request>`): what it does cannot be taken back, or is posted in
    /// Eagle's name.
    pub fn needs_request_id(self) -> bool {
        matches!(
            self,
            Kind::MergePr | Kind::PostAsanaComment | Kind::CommentOnPr | Kind::ReplyThread
        )
    }
}

/// What approving `request` makes happen, in one or more lines, or `None`
/// when its action is not an effect (a question, a routine step): then the
/// worker's own words are all there is. `private`: the task is private, so
/// no text of the request is quoted (`!show` in its conversation shows it).
pub fn describe(request: &Request, run: &Run, private: bool) -> Option<String> {
    describe_for(request, run, private, false)
}

/// [`describe`] under a profile whose `github.drafts` is `"keep"`
/// (`keep_drafts`): an approved merge of a draft is refused, and says so.
pub fn describe_for(
    request: &Request,
    run: &Run,
    private: bool,
    keep_drafts: bool,
) -> Option<String> {
    let kind = Kind::of(&request.action)?;
    // What Eagle carries out is parsed from the body: so is what it says.
    let effect = match Effect::parse(&request.action, &request.body) {
        Ok(effect) => effect,
        Err(why) => {
            return Some(format!(
                "Eagle will not carry this out, whatever the answer: {}",
                inert(&why)
            ));
        }
    };
    let text = worded_text(request, effect.as_ref());
    let text = text.as_str();
    let pr = run
        .pr_number
        .map(|n| format!("PR #{n}"))
        .unwrap_or_else(|| "the run's PR (none known yet)".into());
    let branch = run
        .branch_name
        .as_deref()
        .map(|b| format!("`{}`", inert(b)))
        .unwrap_or_else(|| "(not named yet)".into());
    Some(match kind {
        Kind::MergePr => merge(request, run, effect.as_ref()) + &draft_note(run, keep_drafts),
        Kind::PushBranch => match &effect {
            // The full commit id: a short one may name two commits.
            Some(Effect::PushBranch { sha, .. }) => format!(
                "Eagle will push commit `{sha}` to the run's own branch {branch}, nothing else."
            ),
            _ => format!(
                "Eagle will push nothing to the run's own branch {branch}: the request names no \
                 commit."
            ),
        },
        Kind::OpenDraftPr => format!(
            "Eagle will open a draft PR from the run's own branch {branch}, with the worker's \
             title and description: {}",
            text_summary(text, private)
        ),
        Kind::CommentOnPr => format!(
            "Eagle will post a comment on {pr}, as written: {}",
            text_summary(text, private)
        ),
        Kind::ReplyThread => format!(
            "Eagle will reply in a review thread of {pr}, as written: {}",
            text_summary(text, private)
        ),
        Kind::PostAsanaComment => format!(
            "Eagle will post a comment on the task in Asana, as written: {}",
            text_summary(text, private)
        ),
        Kind::RunCommand => format!(
            "The worker will run a command the operator's rules ask about: {}",
            text_summary(text, private)
        ),
    })
}

/// The text an effect carries (its title and body for a PR), from its
/// parsed parameters; the body as written for the old free-text forms (and
/// a command the operator's rules ask about).
fn worded_text(request: &Request, effect: Option<&Effect>) -> String {
    match effect {
        Some(Effect::OpenDraftPr { title, body }) => format!("{title}\n\n{body}"),
        Some(
            Effect::CommentOnPr { body }
            | Effect::ReplyThread { body, .. }
            | Effect::PostAsanaComment { body },
        ) => body.clone(),
        _ => request.body.clone(),
    }
}

/// What approving a merge does to a draft PR, if the PR loop saw a draft.
fn draft_note(run: &Run, keep_drafts: bool) -> String {
    match (run.pr_draft, keep_drafts) {
        (Some(true), false) => " The PR is a draft: approving marks it ready for review at that \
             head, then merges it."
            .into(),
        (Some(true), true) => " The PR is a draft, and github.drafts = \"keep\": `!approve` will \
             not merge it (Eagle leaves drafts as they are); mark it ready for review on GitHub \
             first."
            .into(),
        _ => String::new(),
    }
}

/// A merge, as the PR loop last saw the PR, at the head the request is
/// bound to: what the carrier merges (`crate::executor::carrier::merge`),
/// which refuses a request naming another commit than that head.
fn merge(request: &Request, run: &Run, effect: Option<&Effect>) -> String {
    let asked = match effect {
        Some(Effect::MergePr { sha }) => sha.as_deref(),
        _ => None,
    };
    match (asked, request.bound_sha.as_deref()) {
        (Some(asked), Some(seen)) if asked != seen => format!(
            "Eagle will not merge: the request names commit `{}`, but the PR's head was `{}` \
             when it was made; approving it merges nothing.",
            short_sha(asked),
            short_sha(seen)
        ),
        (_, seen) => describe_merge(run, seen),
    }
}

/// The merge of the run's PR at `sha` (the head a request or `!merge` is
/// bound to), in Eagle's words, as the PR loop last saw the PR: its title,
/// where its head comes from, CI there.
pub fn describe_merge(run: &Run, sha: Option<&str>) -> String {
    let Some(number) = run.pr_number else {
        return "Eagle knows of no PR of this run: there is nothing it could merge.".into();
    };
    // Eagle merges only at a head it saw (the carrier refuses the rest),
    // whatever commit the request names.
    let Some(sha) = sha else {
        return format!(
            "Eagle will not merge PR #{number}: the request was made before Eagle saw the PR's \
             head, so there is no commit an approval could be of; approving it merges nothing."
        );
    };
    let head = format!("at head `{}`", short_sha(sha));
    let Some(title) = &run.pr_title else {
        return format!(
            "Eagle will merge PR #{number} {head}; its PR loop has not looked at the PR yet \
             (no title, branches or CI known)."
        );
    };
    // Where the head comes from, repository and branch: the PR loop follows
    // only a branch of the repository itself, never a fork's.
    let branches = match (&run.pr_head_ref, &run.pr_base_ref) {
        (Some(head_ref), Some(base)) => {
            let from = match &run.pr_head_repo {
                Some(repo) => format!("{repo}:{head_ref}"),
                None => head_ref.clone(),
            };
            format!(" from `{}` into `{}`", inert(&from), inert(base))
        }
        _ => String::new(),
    };
    let ci = run
        .pr_ci
        .as_deref()
        .map(inert)
        .unwrap_or_else(|| "unknown".into());
    format!(
        "Eagle will merge PR #{number} “{}”{branches} {head}; CI there: {ci} (as Eagle's PR \
         loop last saw it).",
        inert(title)
    )
}

/// A text's length and first lines, quoted (none for a private task).
pub fn text_summary(text: &str, private: bool) -> String {
    let chars = text.chars().count();
    let lines = text.lines().count();
    let size = format!(
        "{chars} character{}, {lines} line{}",
        plural(chars),
        plural(lines)
    );
    if text.trim().is_empty() {
        return format!("{size} (empty).");
    }
    if private {
        return format!("{size}; a private task's text is shown only in its own conversation.");
    }
    let first: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(FIRST_LINES)
        .map(|l| format!("> {}", inert(l)))
        .collect();
    let more = if text.lines().filter(|l| !l.trim().is_empty()).count() > FIRST_LINES {
        "\n> …"
    } else {
        ""
    };
    format!("{size}, beginning:\n{}{more}", first.join("\n"))
}

/// One line of someone else's text, safe to post and shown as it is.
fn inert(text: &str) -> String {
    neutralize_mentions(&visible_line(text, LINE_CHARS))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_summarised_by_its_size_and_first_lines() {
        assert_eq!(
            text_summary("LGTM @**all**\n\nsecond\nthird\nfourth\n", false),
            "35 characters, 5 lines, beginning:\n> LGTM @\u{200B}**all**\n> second\n> third\n> …"
        );
        assert_eq!(
            text_summary("secret plan", true),
            "11 characters, 1 line; a private task's text is shown only in its own conversation."
        );
        assert_eq!(text_summary("", false), "0 characters, 0 lines (empty).");
    }

    #[test]
    fn which_effects_need_the_request_named() {
        for (action, needs) in [
            ("merge_pr", true),
            ("post_asana_comment", true),
            ("comment_on_pr", true),
            ("reply_thread", true),
            ("push_branch", false),
            ("run_tests", false),
        ] {
            assert_eq!(
                Kind::of(action).is_some_and(Kind::needs_request_id),
                needs,
                "{action}"
            );
        }
    }
}
