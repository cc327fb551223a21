//! The approver commands about tasks: `!go` starts a run for a task, and
//! `!reanalyze` asks the analyzer to look at the skipped tasks again.
//!
//! Both act in the message's transaction; `!go` posts the new run in its
//! topic (as Eagle), and `!reanalyze` leaves the filters to the analyzer,
//! which answers in the conversation the command came from.

use super::parse::one_id;
use super::{Access, ChatCommand, CommandContext, CommandReply, CommandSpec, Handler, ParseError};
use crate::ground::text::{neutralize_mentions, one_line};
use crate::profile::Role;
use crate::store::{StoreError, TaskStatus};

/// `!go <task id>`: approves a task and queues a run for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Go {
    pub task: i64,
    /// `--dry-run`: nothing the run asks for is carried out; Eagle says
    /// what it would have done.
    pub dry_run: bool,
}

impl ChatCommand for Go {
    const SPEC: CommandSpec = CommandSpec {
        name: "go",
        args: "<task id> [--dry-run]",
        summary: "approve a task for execution",
        details: "`!go 12` approves task 12 and queues a run for it; a runner starts a worker \
                  on it as soon as a slot is free. Its progress is posted in the executor channel, \
                  topic `run <id>`. `!go 12 --dry-run`: the worker works as always and every \
                  request is decided as usual, but Eagle carries nothing out (no push, no PR, no \
                  comment, no merge); it says in the run's topic what it would have done.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let dry_run = words.contains(&"--dry-run");
        let rest: Vec<&str> = words.into_iter().filter(|w| *w != "--dry-run").collect();
        Ok(Go {
            task: one_id(&Self::SPEC, &rest.join(" "), "task")?,
            dry_run,
        })
    }
}

impl Handler for Go {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let task_id = self.task;
        let Some(task) = cx.tx.tasks().task(task_id).await? else {
            return Ok(CommandReply::refused(format!(
                "There is no task #{task_id}. `!status` lists the open ones."
            )));
        };
        if let Some(run) = cx
            .tx
            .tasks()
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
            // A private task's skip reason may quote it: the run's topic is
            // public, so only the fact of the override is said there.
            TaskStatus::Skip if task.origin_private => {
                format!("!go by {} overrides the skip", cx.who())
            }
            TaskStatus::Skip => format!(
                "!go by {} overrides the skip (it said: {})",
                cx.who(),
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
            _ => format!("!go by {}", cx.who()),
        };
        let actor = cx.message.sender_actor();
        let reason = if self.dry_run {
            format!("{reason}, a dry run")
        } else {
            reason
        };
        let run = cx
            .tx
            .transitions()
            .start_run(task_id, &actor, &reason)
            .await?;
        if self.dry_run {
            cx.tx.tasks().set_dry_run(run.id).await?;
        }
        let title = if task.origin_private {
            String::new()
        } else {
            format!(": {}", neutralize_mentions(&one_line(&task.title, 200)))
        };
        let post = format!(
            "Run {} of task #{task_id}{title} is queued ({reason}).",
            run.id
        );
        cx.post(&run, &post).await?;
        let dry = if self.dry_run {
            " It is a dry run: Eagle carries out nothing it asks for, and says what it would have done."
        } else {
            ""
        };
        Ok(CommandReply::ok(format!(
            "Task #{task_id} is approved: run {} is queued and starts when a worker is free. \
             Its progress: #{} > {}.{dry}",
            run.id,
            cx.profile.executor_channel,
            run.topic()
        )))
    }
}

/// `!reanalyze [confirm]`: counts, or puts back, the skipped tasks the
/// current filters would keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reanalyze {
    /// Put them back; otherwise count only.
    pub confirm: bool,
}

impl ChatCommand for Reanalyze {
    const SPEC: CommandSpec = CommandSpec {
        name: "reanalyze",
        args: "[confirm]",
        summary: "analyse skipped tasks again that the filters now keep",
        details: "`!reanalyze` counts the skipped tasks the current filters would keep and changes \
                  nothing; `!reanalyze confirm` puts them back, and the analyzer posts one summary \
                  in the inbox topic when it is through.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        match words.as_slice() {
            [] => Ok(Reanalyze { confirm: false }),
            [word] if word.eq_ignore_ascii_case("confirm") => Ok(Reanalyze { confirm: true }),
            _ => Err(ParseError::usage(
                &Self::SPEC,
                "`!reanalyze` takes nothing, or `confirm`.",
            )),
        }
    }
}

impl Handler for Reanalyze {
    /// Asks the analyzer (which holds the filter plugins, and runs them
    /// outside any chat transaction) to do it: it answers in this
    /// conversation, a count, or one summary once they are analysed again.
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        if cx.profile.role != Role::Orchestrator {
            return Ok(CommandReply::refused(
                "This profile does not analyse tasks: ask Eagle (the orchestrator).".to_string(),
            ));
        }
        let actor = cx.message.sender_actor();
        cx.tx
            .analyses()
            .request_analyzer_job(
                self.confirm,
                &actor,
                &cx.message.identity,
                &cx.message.reply_destination(),
            )
            .await?;
        Ok(CommandReply::ok(if self.confirm {
            "The analyzer puts back the skipped tasks the current filters would keep and analyses them \
             again; one summary follows here when it is through."
        } else {
            "The analyzer counts the skipped tasks the current filters would keep; its answer follows \
             here (nothing changes: `!reanalyze confirm` puts them back)."
        }))
    }
}
