//! The commands that change what runs (approvers only, each audited):
//! `!go`, `!approve`, `!deny`, `!cancel`, `!hold`, `!unhold`, `!retry`,
//! `!pause`, `!resume`, `!hold all`, `!unhold all`.
//!
//! Each acts in the message's transaction through the store's transition
//! table, and posts what it did in the run's topic (as Eagle), so the run's
//! story is in one place whatever topic the command was typed in.

use super::handlers::CommandReply;
use super::{Command, RunOrAll};
use crate::chat::ChatContext;
use crate::message::InboundMessage;
use crate::store::{
    Approval, Control, Request, Run, RunState, StoreError, TaskStatus, Transition, Tx,
};
use crate::text::{neutralize_mentions, one_line};

/// Runs one approver command (access is checked by the caller).
pub(super) async fn execute(
    tx: &mut Tx,
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    command: &Command,
) -> Result<CommandReply, StoreError> {
    let actor = message.sender_actor();
    let result = match command {
        Command::Go { task } => go(tx, ctx, message, &actor, *task).await,
        Command::Approve { run, request, note } => {
            decide(
                tx,
                ctx,
                message,
                &actor,
                *run,
                *request,
                true,
                note.as_deref(),
            )
            .await
        }
        Command::Deny {
            run,
            request,
            reason,
        } => {
            decide(
                tx,
                ctx,
                message,
                &actor,
                *run,
                *request,
                false,
                Some(reason),
            )
            .await
        }
        Command::Cancel { run } => cancel(tx, ctx, message, &actor, *run).await,
        Command::Hold {
            target: RunOrAll::Run(run),
        } => hold(tx, ctx, message, &actor, *run, true).await,
        Command::Unhold {
            target: RunOrAll::Run(run),
        } => hold(tx, ctx, message, &actor, *run, false).await,
        Command::Hold {
            target: RunOrAll::All,
        } => switch(tx, &actor, Control::HoldAll, true).await,
        Command::Unhold {
            target: RunOrAll::All,
        } => switch(tx, &actor, Control::HoldAll, false).await,
        Command::Retry { run } => retry(tx, ctx, message, &actor, *run).await,
        Command::Pause => switch(tx, &actor, Control::Paused, true).await,
        Command::Reanalyze { confirm } => reanalyze(tx, ctx, message, &actor, *confirm).await,
        Command::Resume => switch(tx, &actor, Control::Paused, false).await,
        Command::Help { .. } | Command::Queue { .. } | Command::Status(_) | Command::Why(_) => {
            return Ok(CommandReply::refused("That is not a control command."));
        }
    };
    match result {
        // The table says no: a user-facing answer, nothing changed.
        Err(StoreError::IllegalTransition { what, from, to }) => {
            Ok(CommandReply::refused(format!(
                "{} is {from}; it cannot become {to}. Nothing was changed.",
                capitalise(&what)
            )))
        }
        other => other,
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

/// Posts in a run's topic as Eagle.
async fn post(tx: &mut Tx, ctx: &ChatContext<'_>, run: &Run, text: &str) -> Result<(), StoreError> {
    ctx.poster.post(tx, &run.topic(), text).await?;
    Ok(())
}

fn who(message: &InboundMessage) -> String {
    neutralize_mentions(&one_line(&message.sender.full_name, 80))
}

async fn run_or_refuse(tx: &mut Tx, id: i64) -> Result<Result<Run, CommandReply>, StoreError> {
    Ok(match tx.run(id).await? {
        Some(run) => Ok(run),
        None => Err(CommandReply::refused(format!(
            "There is no run {id}. `!status` lists the open ones."
        ))),
    })
}

async fn go(
    tx: &mut Tx,
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    actor: &str,
    task_id: i64,
) -> Result<CommandReply, StoreError> {
    let Some(task) = tx.task(task_id).await? else {
        return Ok(CommandReply::refused(format!(
            "There is no task #{task_id}. `!status` lists the open ones."
        )));
    };
    if let Some(run) = tx
        .runs_of_task(&task.task_gid)
        .await?
        .into_iter()
        .find(|r| !r.state.is_final())
    {
        return Ok(CommandReply::refused(format!(
            "Task #{task_id} has run {} already ({}). `!status run {}` shows it.",
            run.id,
            run.state.as_str(),
            run.id
        )));
    }
    let reason = match task.status {
        TaskStatus::Skip => format!(
            "!go by {} overrides the skip (it said: {})",
            who(message),
            neutralize_mentions(&one_line(
                task.status_reason.as_deref().unwrap_or("no reason"),
                200
            ))
        ),
        TaskStatus::Done | TaskStatus::Cancelled | TaskStatus::Approved => {
            return Ok(CommandReply::refused(format!(
                "Task #{task_id} is {}; `!queue` it again to start over.",
                task.status.as_str()
            )));
        }
        _ => format!("!go by {}", who(message)),
    };
    let run = tx.start_run(task_id, actor, &reason).await?;
    let title = if task.origin_private {
        String::new()
    } else {
        format!(": {}", neutralize_mentions(&one_line(&task.title, 200)))
    };
    post(
        tx,
        ctx,
        &run,
        &format!(
            "Run {} of task #{task_id}{title} is queued ({reason}).",
            run.id
        ),
    )
    .await?;
    Ok(CommandReply::ok(format!(
        "Task #{task_id} is approved: run {} is queued and starts when a worker is free. \
         Its progress: #{} > {}.",
        run.id,
        ctx.profile.executor_channel,
        run.topic()
    )))
}

#[allow(clippy::too_many_arguments)]
async fn decide(
    tx: &mut Tx,
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    actor: &str,
    run_id: i64,
    request_id: Option<i64>,
    approve: bool,
    text: Option<&str>,
) -> Result<CommandReply, StoreError> {
    let verb = if approve { "approve" } else { "deny" };
    let run = match run_or_refuse(tx, run_id).await? {
        Ok(run) => run,
        Err(reply) => return Ok(reply),
    };
    let requests = tx.requests_of_run(run_id).await?;
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
    let decided = tx
        .human_decision(
            request.id,
            &Approval {
                approve,
                actor,
                text: text.as_deref(),
                source_message_id: Some(message.message_id),
            },
        )
        .await?;
    let Some(decided) = decided else {
        return Ok(CommandReply::refused(format!(
            "Request {} of run {run_id} was decided meanwhile; nothing was changed.",
            request.id
        )));
    };
    tx.settle_waiting(run_id).await?;
    let tag = if approve { "APPROVED" } else { "DENIED" };
    let extra = match (&text, approve) {
        (Some(note), true) => format!(" — note: {}", neutralize_mentions(note)),
        (Some(reason), false) => format!(": {}", neutralize_mentions(reason)),
        (None, _) => String::new(),
    };
    post(
        tx,
        ctx,
        &run,
        &format!(
            "[{tag}: {}] run:{run_id} req:{} by {}{extra}",
            decided.action,
            decided.id,
            who(message)
        ),
    )
    .await?;
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

async fn cancel(
    tx: &mut Tx,
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    actor: &str,
    run_id: i64,
) -> Result<CommandReply, StoreError> {
    let run = match run_or_refuse(tx, run_id).await? {
        Ok(run) => run,
        Err(reply) => return Ok(reply),
    };
    let reason = format!("cancelled by {}", who(message));
    let run = tx
        .transition_run(&Transition {
            run: run.id,
            to: RunState::Cancelled,
            actor,
            reason: &reason,
            fence: None,
        })
        .await?;
    let worker = if run.has_worker() {
        " Its worker is being stopped."
    } else {
        ""
    };
    post(tx, ctx, &run, &format!("Run {run_id} is {reason}.{worker}")).await?;
    Ok(CommandReply::ok(format!(
        "Run {run_id} is cancelled.{worker} Its open requests expired."
    )))
}

async fn hold(
    tx: &mut Tx,
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    actor: &str,
    run_id: i64,
    held: bool,
) -> Result<CommandReply, StoreError> {
    let run = match run_or_refuse(tx, run_id).await? {
        Ok(run) => run,
        Err(reply) => return Ok(reply),
    };
    if run.held == held {
        return Ok(CommandReply::refused(format!(
            "Run {run_id} is {} already.",
            if held { "held" } else { "not held" }
        )));
    }
    let reason = format!(
        "{} by {}",
        if held { "held" } else { "released" },
        who(message)
    );
    let run = tx.set_held(run_id, held, actor, &reason, false).await?;
    let (post_text, reply) = if held {
        (
            format!("Run {run_id} is {reason}: its worker stops at a safe point."),
            format!(
                "Run {run_id} is held: its worker stops at a safe point and none starts until `!unhold {run_id}`."
            ),
        )
    } else {
        (
            format!("Run {run_id} is {reason}: a worker picks it up again."),
            format!("Run {run_id} is released: a worker picks it up again."),
        )
    };
    post(tx, ctx, &run, &post_text).await?;
    Ok(CommandReply::ok(reply))
}

async fn retry(
    tx: &mut Tx,
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    actor: &str,
    run_id: i64,
) -> Result<CommandReply, StoreError> {
    let run = match run_or_refuse(tx, run_id).await? {
        Ok(run) => run,
        Err(reply) => return Ok(reply),
    };
    let reason = format!("retried by {}", who(message));
    let run = match run.state {
        RunState::Abandoned => {
            tx.transition_run(&Transition {
                run: run_id,
                to: RunState::Queued,
                actor,
                reason: &reason,
                fence: None,
            })
            .await?;
            tx.set_held(run_id, false, actor, &reason, true).await?
        }
        state if state.is_final() => {
            return Ok(CommandReply::refused(format!(
                "Run {run_id} is {}; it cannot be retried. `!go <task>` starts a new run.",
                state.as_str()
            )));
        }
        _ if !run.held => {
            return Ok(CommandReply::refused(format!(
                "Run {run_id} is not held or abandoned ({}{}): nothing to retry.",
                run.state.as_str(),
                if run.has_worker() {
                    ", a worker is on it"
                } else {
                    ""
                }
            )));
        }
        _ => tx.set_held(run_id, false, actor, &reason, true).await?,
    };
    post(
        tx,
        ctx,
        &run,
        &format!("Run {run_id} is {reason}: a fresh attempt starts when a worker is free."),
    )
    .await?;
    Ok(CommandReply::ok(format!(
        "Run {run_id} will be tried again (its failure count starts over)."
    )))
}

async fn switch(
    tx: &mut Tx,
    actor: &str,
    control: Control,
    on: bool,
) -> Result<CommandReply, StoreError> {
    let was = tx.control(control).await?;
    if was == on {
        return Ok(CommandReply::refused(match (control, on) {
            (Control::Paused, true) => "Claiming is paused already. `!resume` starts it again.",
            (Control::Paused, false) => "Claiming is not paused.",
            (Control::HoldAll, true) => "Every run is held already. `!unhold all` releases them.",
            (Control::HoldAll, false) => "Runs are not all held.",
        }));
    }
    tx.set_control(control, on, actor).await?;
    Ok(CommandReply::ok(match (control, on) {
        (Control::Paused, true) => {
            "Paused: no runner starts new work until `!resume`; running workers go on."
        }
        (Control::Paused, false) => "Resumed: runners start new work again.",
        (Control::HoldAll, true) => {
            "Every run is held: running workers stop at a safe point and nothing new starts until `!unhold all`."
        }
        (Control::HoldAll, false) => "Runs are released: workers start again.",
    }))
}

/// `!reanalyze [confirm]`: asks the analyzer (which holds the filter
/// plugins, and runs them outside any chat transaction) to count, or put
/// back, the skipped tasks the current filters would keep. It answers in
/// this conversation: a count, or one summary once they are analysed again.
async fn reanalyze(
    tx: &mut Tx,
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    actor: &str,
    confirm: bool,
) -> Result<CommandReply, StoreError> {
    if ctx.profile.role != crate::profile::Role::Orchestrator {
        return Ok(CommandReply::refused(
            "This profile does not analyse tasks: ask Eagle (the orchestrator).".to_string(),
        ));
    }
    tx.request_analyzer_job(
        confirm,
        actor,
        &message.identity,
        &message.reply_destination(),
    )
    .await?;
    Ok(CommandReply::ok(if confirm {
        "The analyzer puts back the skipped tasks the current filters would keep and analyses them \
         again; one summary follows here when it is through."
    } else {
        "The analyzer counts the skipped tasks the current filters would keep; its answer follows \
         here (nothing changes: `!reanalyze confirm` puts them back)."
    }))
}
