//! The approver commands that keep the inbox clean (seed 003's GTD
//! clarify step): `!review` (for_review → awaiting_go), `!skip` (kept with
//! its reason, like a filter's), `!drop` (withdrawn) and `!priority`.
//!
//! Each takes several task ids at once (`!skip 4 5 9 not ours`) and gives
//! one answer with a line per task: its new status, or why it was left as
//! it was (no such task, running, already there). Every change goes through
//! the store's transition table, which audits it, in the message's
//! transaction; a task whose run is still open is never dropped or skipped
//! under it: the answer names the `!cancel` that stops the run.

use super::parse::id;
use super::{Access, ChatCommand, CommandContext, CommandReply, CommandSpec, Handler, ParseError};
use crate::ground::text::{neutralize_mentions, one_line};
use crate::store::{NewAuditEntry, StoreError, Task, TaskStatus};

/// At most this many task ids in one command (one answer stays readable).
pub const MAX_IDS: usize = 50;
/// The priorities a task may have: 1 (urgent) to 5 (someday), as the
/// analyzer gives them.
pub const PRIORITIES: std::ops::RangeInclusive<i64> = 1..=5;

/// The leading task ids of `args` (`4 5 9`, `#4,#5`) and the words after them.
fn ids_then_rest<'a>(spec: &CommandSpec, args: &'a str) -> Result<(Vec<i64>, &'a str), ParseError> {
    let mut ids = Vec::new();
    let mut rest = args.trim_start();
    while let Some(word) = rest.split_whitespace().next() {
        let parts: Vec<&str> = word.split(',').filter(|p| !p.is_empty()).collect();
        let parsed: Result<Vec<i64>, String> = parts.iter().map(|p| id(p, "task")).collect();
        match parsed {
            Ok(more) if !more.is_empty() => ids.extend(more),
            // The first word that is no id starts the rest (a reason).
            _ if !ids.is_empty() => break,
            Ok(_) => break,
            Err(message) => return Err(ParseError::usage(spec, message)),
        }
        rest = rest[word.len()..].trim_start();
    }
    if ids.is_empty() {
        return Err(ParseError::usage(
            spec,
            format!("`!{}` needs at least one task id.", spec.name),
        ));
    }
    if ids.len() > MAX_IDS {
        return Err(ParseError::usage(
            spec,
            format!("At most {MAX_IDS} task ids at once."),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(*id));
    Ok((ids, rest.trim()))
}

/// `!review <task id>…`: a human has looked, the task waits for `!go`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub tasks: Vec<i64>,
}

impl ChatCommand for Review {
    const SPEC: CommandSpec = CommandSpec {
        name: "review",
        args: "<task id>…",
        summary: "mark tasks reviewed: they wait for `!go`",
        details: "`!review 12` moves task 12 from for_review to awaiting_go (a skipped task too: \
                  the review overrides its skip). `!review 12 13 14` does several at once.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let (tasks, rest) = ids_then_rest(&Self::SPEC, args)?;
        if !rest.is_empty() {
            return Err(ParseError::usage(
                &Self::SPEC,
                format!("{:?} is not a task id.", one_line(rest, 40)),
            ));
        }
        Ok(Review { tasks })
    }
}

impl Handler for Review {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let reason = format!("reviewed by {}", cx.who());
        each(cx, &self.tasks, &Act::Review(&reason)).await
    }
}

/// `!skip <task id>… <reason>`: kept in the inbox, skipped with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub tasks: Vec<i64>,
    pub reason: String,
}

impl ChatCommand for Skip {
    const SPEC: CommandSpec = CommandSpec {
        name: "skip",
        args: "<task id>… <reason>",
        summary: "skip tasks, with the reason",
        details: "`!skip 4 5 9 not ours` marks tasks 4, 5 and 9 skip with the reason \"not ours\", \
                  as a filter would: they stay in the inbox, `!status 4` shows why, and \
                  `!review` or `!go` brings one back.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let (tasks, rest) = ids_then_rest(&Self::SPEC, args)?;
        if rest.is_empty() {
            return Err(ParseError::usage(
                &Self::SPEC,
                "Say why after the ids: `!skip 4 5 not ours`.",
            ));
        }
        Ok(Skip {
            tasks,
            reason: one_line(rest, 300),
        })
    }
}

impl Handler for Skip {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let reason = format!(
            "{} (skipped by {})",
            neutralize_mentions(&self.reason),
            cx.who()
        );
        each(cx, &self.tasks, &Act::Skip(&reason)).await
    }
}

/// `!drop <task id>… [reason]`: withdrawn from the inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropTask {
    pub tasks: Vec<i64>,
    pub reason: Option<String>,
}

impl ChatCommand for DropTask {
    const SPEC: CommandSpec = CommandSpec {
        name: "drop",
        args: "<task id>… [reason]",
        summary: "withdraw tasks from the inbox",
        details: "`!drop 7` withdraws task 7 (a stray capture, a duplicate): it becomes cancelled \
                  and leaves the lists. `!drop 7 8 duplicate of 6` drops several with a reason. \
                  A task whose run is still open is not dropped: `!cancel <run>` stops the run.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let (tasks, rest) = ids_then_rest(&Self::SPEC, args)?;
        Ok(DropTask {
            tasks,
            reason: (!rest.is_empty()).then(|| one_line(rest, 300)),
        })
    }
}

impl Handler for DropTask {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let reason = match &self.reason {
            Some(why) => format!("{} (dropped by {})", neutralize_mentions(why), cx.who()),
            None => format!("dropped by {}", cx.who()),
        };
        each(cx, &self.tasks, &Act::Drop(&reason)).await
    }
}

/// `!priority <task id>… <n>`: 1 (urgent) to 5 (someday).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priority {
    pub tasks: Vec<i64>,
    pub priority: i64,
}

impl ChatCommand for Priority {
    const SPEC: CommandSpec = CommandSpec {
        name: "priority",
        args: "<task id>… <1-5>",
        summary: "set tasks' priority (1 urgent … 5 someday)",
        details: "`!priority 12 1` makes task 12 urgent; `!priority 12 13 4` sets both to 4. \
                  Lists and the runner go by priority (1 first, tasks without one last), then \
                  by age.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let (mut tasks, rest) = ids_then_rest(&Self::SPEC, args)?;
        let usage = |m: String| ParseError::usage(&Self::SPEC, m);
        if !rest.is_empty() {
            return Err(usage(format!(
                "{:?} is not a priority (1 to 5).",
                one_line(rest, 40)
            )));
        }
        // The last number is the priority.
        let priority = match tasks.pop() {
            Some(n) if tasks.is_empty() => {
                return Err(usage(format!(
                    "Give the task id, then the priority: `!priority {n} 2`."
                )));
            }
            Some(n) => n,
            None => return Err(usage("Give the task id, then the priority.".into())),
        };
        if !PRIORITIES.contains(&priority) {
            return Err(usage(format!(
                "{priority} is not a priority: 1 (urgent) to 5 (someday)."
            )));
        }
        Ok(Priority { tasks, priority })
    }
}

impl Handler for Priority {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        each(cx, &self.tasks, &Act::Priority(self.priority)).await
    }
}

/// What a command does to each task it names.
enum Act<'r> {
    Review(&'r str),
    Skip(&'r str),
    Drop(&'r str),
    Priority(i64),
}

/// Carries `act` out on every task that exists; one answer, a line each.
async fn each(
    cx: &mut CommandContext<'_, '_>,
    ids: &[i64],
    act: &Act<'_>,
) -> Result<CommandReply, StoreError> {
    let mut lines = Vec::new();
    let mut all_ok = true;
    for &id in ids {
        let line = match cx.tx.tasks().task(id).await? {
            None => Err("does not exist (`!status` lists the open ones)".to_string()),
            Some(task) => one(cx, &task, act).await?,
        };
        all_ok &= line.is_ok();
        lines.push(match line {
            Ok(text) => format!("Task #{id} is {text}."),
            Err(text) => format!("Task #{id} {text}; nothing changed."),
        });
    }
    let text = if lines.len() == 1 {
        lines.remove(0)
    } else {
        lines
            .iter()
            .map(|l| format!("* {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(if all_ok {
        CommandReply::ok(text)
    } else {
        CommandReply::refused(text)
    })
}

/// One task's part: its new status (`Ok`), or why it stays as it is.
async fn one(
    cx: &mut CommandContext<'_, '_>,
    task: &Task,
    act: &Act<'_>,
) -> Result<Result<String, String>, StoreError> {
    let (to, reason, verb, done) = match act {
        Act::Priority(priority) => return set_priority(cx, task, *priority).await,
        Act::Review(reason) => (TaskStatus::AwaitingGo, *reason, "review", "reviewed"),
        Act::Skip(reason) => (TaskStatus::Skip, *reason, "skip", "skipped"),
        Act::Drop(reason) => (TaskStatus::Cancelled, *reason, "drop", "dropped"),
    };
    if task.status == to {
        let already = match to {
            TaskStatus::Cancelled => "withdrawn",
            other => other.as_str(),
        };
        return Ok(Err(format!("is {already} already")));
    }
    if to != TaskStatus::AwaitingGo
        && let Some(refusal) = running(cx, task, verb).await?
    {
        return Ok(Err(refusal));
    }
    let actor = cx.message.sender_actor();
    match cx
        .tx
        .transitions()
        .transition_task(task.id, to, &actor, reason)
        .await
    {
        Ok(()) => {}
        Err(StoreError::IllegalTransition { from, .. }) => {
            return Ok(Err(format!("is {from}, which cannot be {done}")));
        }
        Err(other) => return Err(other),
    }
    Ok(Ok(match to {
        TaskStatus::AwaitingGo => format!("awaiting_go: `!go {}` starts it", task.id),
        other => format!("{}: {reason}", other.as_str()),
    }))
}

/// `!priority` on one task, audited.
async fn set_priority(
    cx: &mut CommandContext<'_, '_>,
    task: &Task,
    priority: i64,
) -> Result<Result<String, String>, StoreError> {
    if task.priority == Some(priority) {
        return Ok(Err(format!("has priority {priority} already")));
    }
    cx.tx
        .tasks()
        .set_task_priority(task.id, Some(priority))
        .await?;
    let before = task
        .priority
        .map_or_else(|| "none".to_string(), |p| p.to_string());
    let entry = NewAuditEntry {
        actor: cx.message.sender_actor(),
        action: "task.priority".into(),
        subject: format!("task:{}", task.id),
        decision: Some(format!("{before} → {priority}")),
        reason: Some(format!("!priority by {}", cx.who())),
        source_message_id: Some(cx.message.message_id),
        ..NewAuditEntry::default()
    };
    cx.tx.audit_log().audit(&entry).await?;
    Ok(Ok(format!(
        "{} with priority {priority}",
        task.status.as_str()
    )))
}

/// Why a task with an open run cannot be skipped or dropped: the command
/// that stops the run.
async fn running(
    cx: &mut CommandContext<'_, '_>,
    task: &Task,
    verb: &str,
) -> Result<Option<String>, StoreError> {
    let open = cx
        .tx
        .tasks()
        .runs_of_task(&task.task_gid)
        .await?
        .into_iter()
        .find(|r| !r.state.is_final());
    Ok(open.map(|run| {
        format!(
            "has run {} ({}), which must stop before you {verb} it: `!cancel {}` stops the run \
             (and withdraws the task)",
            run.id,
            run.state.as_str(),
            run.id
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_first_and_the_rest_is_the_reason() {
        let skip = Skip::parse("4 5 #9 not ours", &[]).unwrap();
        assert_eq!(skip.tasks, vec![4, 5, 9]);
        assert_eq!(skip.reason, "not ours");
        let skip = Skip::parse("4,5, 6 dup", &[]).unwrap();
        assert_eq!(skip.tasks, vec![4, 5, 6]);
        assert!(Skip::parse("4 5", &[]).is_err(), "a skip needs a reason");
        assert!(Skip::parse("ours 4", &[]).is_err(), "ids come first");
        assert!(Skip::parse("", &[]).is_err());
        let drop = DropTask::parse("7 7 8", &[]).unwrap();
        assert_eq!(drop.tasks, vec![7, 8], "an id twice counts once");
        assert_eq!(drop.reason, None);
        let drop = DropTask::parse("7 duplicate of 6", &[]).unwrap();
        assert_eq!(drop.tasks, vec![7]);
        assert_eq!(drop.reason.as_deref(), Some("duplicate of 6"));
        assert!(Review::parse("3 x", &[]).is_err());
        assert!(Review::parse("-3", &[]).is_err());
        assert_eq!(Review::parse("3 4", &[]).unwrap().tasks, vec![3, 4]);
        let many = (1..=51)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(Review::parse(&many, &[]).is_err());
    }

    #[test]
    fn the_last_number_is_the_priority() {
        let p = Priority::parse("12 13 2", &[]).unwrap();
        assert_eq!((p.tasks, p.priority), (vec![12, 13], 2));
        for bad in ["12", "12 9", "12 0", "12 high", "", "12 2 x"] {
            let error = Priority::parse(bad, &[]).unwrap_err();
            assert!(error.to_string().contains("!priority"), "{bad}: {error}");
        }
    }
}
