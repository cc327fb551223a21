//! `!approve` and `!deny`: an approver answers a worker's pending request.
//!
//! The answer is recorded as a human decision (bound to the request and its
//! parameters), the run waiting on it is settled, and the decision is posted
//! in the run's topic, all in the message's transaction.

use super::parse::id;
use super::{Access, ChatCommand, CommandContext, CommandReply, CommandSpec, Handler, ParseError};
use crate::store::{Approval, Request, StoreError};
use crate::text::{neutralize_mentions, one_line};

/// `!approve <run id> [request id] [note]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approve {
    pub run: i64,
    pub request: Option<i64>,
    /// What the worker is told with the approval.
    pub note: Option<String>,
}

impl ChatCommand for Approve {
    const SPEC: CommandSpec = CommandSpec {
        name: "approve",
        args: "<run id> [request id] [note]",
        summary: "approve a worker's pending request",
        details: "`!approve 42` approves the request run 42 is waiting on (when exactly one \
                  waits); `!approve 42 7` approves request 7 of run 42 exactly. A merge, a PR \
                  comment, a thread reply or an Asana comment is approved only by its id \
                  (`!show 42 7` shows it in full). Words after the ids are a note the worker gets \
                  when it is resumed: `!approve 42 7 squash it first`. An approval binds to that \
                  request and its exact text: the worker may do exactly what it asked, once.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let (run, request, note) = run_and_request(&Self::SPEC, &words, "a run id")?;
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
    pub run: i64,
    pub request: Option<i64>,
    /// Why: the worker is told.
    pub reason: String,
}

impl ChatCommand for Deny {
    const SPEC: CommandSpec = CommandSpec {
        name: "deny",
        args: "<run id> [request id] <reason>",
        summary: "deny a worker's pending request, with a reason",
        details: "`!deny 42 out of scope` denies the request run 42 is waiting on; \
                  `!deny 42 7 not now` denies request 7. The reason reaches the worker.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let (run, request, reason) = run_and_request(&Self::SPEC, &words, "a run id and a reason")?;
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

/// The run id, the request id if the next word is one, and the words after
/// them; `needs` says what a bare command lacks.
fn run_and_request<'w>(
    spec: &CommandSpec,
    words: &'w [&'w str],
    needs: &str,
) -> Result<(i64, Option<i64>, &'w [&'w str]), ParseError> {
    let Some((run, rest)) = words.split_first() else {
        return Err(ParseError::usage(
            spec,
            format!("`!{}` needs {needs}.", spec.name),
        ));
    };
    let run = id(run, "run").map_err(|m| ParseError::usage(spec, m))?;
    Ok(match rest.split_first() {
        Some((first, tail)) if id(first, "request").is_ok() => {
            (run, id(first, "request").ok(), tail)
        }
        _ => (run, None, rest),
    })
}

async fn decide(
    cx: &mut CommandContext<'_, '_>,
    run_id: i64,
    request_id: Option<i64>,
    approve: bool,
    text: Option<&str>,
) -> Result<CommandReply, StoreError> {
    let verb = if approve { "approve" } else { "deny" };
    let run = match cx.run_or_refuse(run_id).await? {
        Ok(run) => run,
        Err(reply) => return Ok(reply),
    };
    let requests = cx.tx.requests_of_run(run_id).await?;
    let open: Vec<&Request> = requests.iter().filter(|r| r.status.is_open()).collect();
    let request = match request_id {
        Some(id) => match requests.iter().find(|r| r.id == id) {
            Some(r) if r.status.is_open() => r,
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
                    && crate::effect::Kind::of(&one.action)
                        .is_some_and(crate::effect::Kind::needs_request_id) =>
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
    cx.tx.settle_waiting(run_id).await?;
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
