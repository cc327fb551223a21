//! `!approve` and `!deny`: an approver answers a worker's pending request.
//!
//! The answer is recorded as a human decision (bound to the request and its
//! parameters), the run waiting on it is settled, and the decision is posted
//! in the run's topic, all in the message's transaction.

use super::parse::id;
use super::{Access, ChatCommand, CommandContext, CommandReply, CommandSpec, Handler, ParseError};
use crate::ground::text::{neutralize_mentions, one_line};
use crate::store::{Approval, Request, RequestStatus, Run, StoreError};

/// `!approve <run id> [request id] [note]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approve {
    /// `None`: the run of the topic the command was typed in.
    pub run: Option<i64>,
    pub request: Option<i64>,
    /// What the worker is told with the approval.
    pub note: Option<String>,
}

impl ChatCommand for Approve {
    const SPEC: CommandSpec = CommandSpec {
        name: "approve",
        args: "[run id] [request id] [note]",
        summary: "approve a worker's pending request",
        details: "`!approve 42` approves the request run 42 is waiting on (when exactly one \
                  waits); `!approve 42 7` approves request 7 of run 42 exactly. A merge, a PR \
                  comment, a thread reply or an Asana comment is approved only by its id \
                  (`!show 42 7` shows it in full). Words after the ids are a note the worker gets \
                  when it is resumed: `!approve 42 7 squash it first`. An approval binds to that \
                  request and its exact text: the worker may do exactly what it asked, once. In \
                  a run's own topic the run's id may be left out: `!approve`, `!approve 7`.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let (run, request, note) = run_and_request(&Self::SPEC, &words)?;
        let note = note.join(" ");
        Ok(Approve {
            run,
            request,
            note: (!note.is_empty()).then_some(note),
        })
    }
}

impl Handler for Approve {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        decide(cx, self.run, self.request, true, self.note.as_deref()).await
    }
}

/// `!deny <run id> [request id] <reason>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deny {
    /// `None`: the run of the topic the command was typed in.
    pub run: Option<i64>,
    pub request: Option<i64>,
    /// Why: the worker is told.
    pub reason: String,
}

impl ChatCommand for Deny {
    const SPEC: CommandSpec = CommandSpec {
        name: "deny",
        args: "[run id] [request id] <reason>",
        summary: "deny a worker's pending request, with a reason",
        details: "`!deny 42 out of scope` denies the request run 42 is waiting on; \
                  `!deny 42 7 not now` denies request 7. The reason reaches the worker. In a \
                  run's own topic the run's id may be left out: `!deny not now`.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let (run, request, reason) = run_and_request(&Self::SPEC, &words)?;
        if reason.is_empty() {
            return Err(ParseError::usage(
                &Self::SPEC,
                "`!deny` needs a reason for the worker.",
            ));
        }
        Ok(Deny {
            run,
            request,
            reason: reason.join(" "),
        })
    }
}

impl Handler for Deny {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        decide(cx, self.run, self.request, false, Some(&self.reason)).await
    }
}

/// A run id, a request id, and the words after them.
type RunAndRequest<'w> = (Option<i64>, Option<i64>, &'w [&'w str]);

/// The run id and the request id, if the first words are ids (in a run's
/// topic the run's may be left out: `!approve 7` there is `run? = topic,
/// request 7` once the handler knows the topic), and the words after them.
fn run_and_request<'w>(
    spec: &CommandSpec,
    words: &'w [&'w str],
) -> Result<RunAndRequest<'w>, ParseError> {
    let is_id = |w: &str| id(w, "run").is_ok();
    Ok(match words {
        [run, request, rest @ ..] if is_id(run) && is_id(request) => (
            Some(id(run, "run").map_err(|m| ParseError::usage(spec, m))?),
            id(request, "request").ok(),
            rest,
        ),
        [run, rest @ ..] if is_id(run) => (
            Some(id(run, "run").map_err(|m| ParseError::usage(spec, m))?),
            None,
            rest,
        ),
        rest => (None, None, rest),
    })
}

async fn decide(
    cx: &mut CommandContext<'_, '_>,
    named: Option<i64>,
    request_id: Option<i64>,
    approve: bool,
    text: Option<&str>,
) -> Result<CommandReply, StoreError> {
    let verb = if approve { "approve" } else { "deny" };
    // In a run's topic one id may be the request's: `!approve 7` in run 3's
    // topic means request 7 of run 3 when run 3 has one; the topic's own run
    // id (`!approve 3` there) always means the run.
    let (named, request_id) = match (named, request_id) {
        (Some(first), None) => match cx.topic_run().await? {
            Some(here)
                if here.id != first
                    && cx
                        .tx
                        .requests()
                        .requests_of_run(here.id)
                        .await?
                        .iter()
                        .any(|r| r.id == first) =>
            {
                (Some(here.id), Some(first))
            }
            _ => (Some(first), None),
        },
        other => other,
    };
    let usage = format!("!{verb} <run id> [request id]");
    let run = match cx.named_or_topic_run(named, &usage).await? {
        Ok(run) => run,
        Err(reply) => return Ok(reply),
    };
    let run_id = run.id;
    let requests = cx.tx.requests().requests_of_run(run_id).await?;
    let open: Vec<&Request> = requests.iter().filter(|r| r.status.is_open()).collect();
    let request = match request_id {
        Some(id) => match requests.iter().find(|r| r.id == id) {
            Some(r) if r.status.is_open() => r,
            Some(r) if r.status == RequestStatus::Expired => {
                return Ok(CommandReply::refused(stale_answer(&run, r, &requests)));
            }
            Some(r) => {
                return Ok(CommandReply::refused(format!(
                    "Request {id} of run {run_id} ({}) is {} already{}; nothing was changed.",
                    r.action,
                    r.status.as_str(),
                    r.decided_by
                        .as_deref()
                        .map(|b| format!(" (by {})", neutralize_mentions(b)))
                        .unwrap_or_default()
                )));
            }
            None => {
                return Ok(CommandReply::refused(format!(
                    "Run {run_id} has no request {id}. `!status run {run_id}` lists its requests."
                )));
            }
        },
        None => match open.as_slice() {
            // What cannot be taken back, or is posted in Eagle's name, is
            // approved only by its id: the approver names what they read.
            [one]
                if approve
                    && crate::policy::effect::Kind::of(&one.action)
                        .is_some_and(crate::policy::effect::Kind::needs_request_id) =>
            {
                return Ok(CommandReply::refused(format!(
                    "Run {run_id} waits on request {id} ({action}), which is approved only by \
                     its id: `!approve {run_id} {id}` (`!show {run_id} {id}` shows it in full \
                     first). Nothing was changed.",
                    id = one.id,
                    action = one.action
                )));
            }
            [one] => *one,
            [] => {
                return Ok(CommandReply::refused(format!(
                    "Run {run_id} has no request waiting ({}). Nothing was changed.",
                    run.state.as_str()
                )));
            }
            several => {
                let list: Vec<String> = several
                    .iter()
                    .map(|r| format!("req {} {}", r.id, r.action))
                    .collect();
                return Ok(CommandReply::refused(format!(
                    "Run {run_id} has {} requests waiting: {}. Say which: `!{verb} {run_id} {}`.",
                    several.len(),
                    list.join(", "),
                    several[0].id
                )));
            }
        },
    };
    let text = text.map(|t| one_line(t, 1_000));
    let actor = cx.message.sender_actor();
    let decided = cx
        .tx
        .requests()
        .human_decision(
            request.id,
            &Approval {
                approve,
                actor: &actor,
                text: text.as_deref(),
                source_message_id: Some(cx.message.message_id),
            },
        )
        .await?;
    let Some(decided) = decided else {
        return Ok(CommandReply::refused(format!(
            "Request {} of run {run_id} was decided meanwhile; nothing was changed.",
            request.id
        )));
    };
    cx.tx.holds().settle_waiting(run_id).await?;
    let tag = if approve { "APPROVED" } else { "DENIED" };
    let extra = match (&text, approve) {
        (Some(note), true) => format!(" — note: {}", neutralize_mentions(note)),
        (Some(reason), false) => format!(": {}", neutralize_mentions(reason)),
        (None, _) => String::new(),
    };
    let post = format!(
        "[{tag}: {}] run:{run_id} req:{} by {}{extra}",
        decided.action,
        decided.id,
        cx.who()
    );
    cx.post(&run, &post).await?;
    let next = if approve {
        "The worker goes ahead with it (resumed if it had stopped)."
    } else {
        "The worker is told why."
    };
    Ok(CommandReply::ok(format!(
        "{} request {} ({}) of run {run_id}. {next}",
        if approve { "Approved" } else { "Denied" },
        decided.id,
        decided.action
    )))
}

/// The answer to an approval or denial of a request that no longer
/// applies (expired, superseded, its head moved): why, and what answers the
/// run now, if anything does. Nothing is changed.
fn stale_answer(run: &Run, stale: &Request, requests: &[Request]) -> String {
    let run_id = run.id;
    let why = stale
        .decision_reason
        .as_deref()
        .map(|w| format!(": {}", neutralize_mentions(&one_line(w, 200))))
        .unwrap_or_default();
    let merge_offered = |sha: Option<&str>| {
        sha.is_some()
            && run.merge_offered_sha.as_deref() == sha
            && run.head_sha.as_deref() == sha
            && run.pr_closed_at.is_none()
    };
    // The newest open request for the same effect, else the merge Eagle
    // offers now.
    let current = requests
        .iter()
        .filter(|r| r.status.is_open() && r.action == stale.action && r.id != stale.id)
        .max_by_key(|r| r.id);
    let now = match current {
        Some(r) if r.action == "merge_pr" && merge_offered(r.bound_sha.as_deref()) => format!(
            " The current one is request {id}: `!merge {run_id}` answers it (`!show {run_id} \
             {id}` shows it).",
            id = r.id
        ),
        Some(r) => format!(
            " The current one is request {id}: `!approve {run_id} {id}` or `!deny {run_id} {id} \
             <reason>`.",
            id = r.id
        ),
        None if stale.action == "merge_pr" && merge_offered(run.merge_offered_sha.as_deref()) => {
            format!(" `!merge {run_id}` merges run {run_id}'s PR at the head Eagle offered.")
        }
        None => {
            format!(" Nothing of run {run_id} waits for the same; `!status run {run_id}` shows it.")
        }
    };
    format!(
        "Request {id} of run {run_id} ({action}) no longer applies{why}; nothing was \
         approved or denied.{now}",
        id = stale.id,
        action = stale.action
    )
}
