//! The approver commands that stop and start work: `!cancel`, `!hold`,
//! `!unhold`, `!retry` (one run, or `all` for holds), `!pause` and `!resume`
//! (claiming new work).
//!
//! Each acts in the message's transaction through the store's transition
//! table, and posts what it did to a run in the run's topic (as Eagle), so
//! the run's story is in one place whatever topic the command was typed in.

use super::parse::{id, no_args, one_id};
use super::{Access, ChatCommand, CommandContext, CommandReply, CommandSpec, Handler, ParseError};
use crate::store::{Control, RunState, StoreError, Transition};

/// One run, or every run (`!hold all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOrAll {
    Run(i64),
    All,
}

impl RunOrAll {
    fn parse(spec: &CommandSpec, args: &str) -> Result<RunOrAll, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        match words.as_slice() {
            [word] if word.eq_ignore_ascii_case("all") => Ok(RunOrAll::All),
            [run] => id(run, "run").map(RunOrAll::Run),
            [] => Err("Say which run, or `all`.".into()),
            _ => Err("Give one run id, or `all`.".into()),
        }
        .map_err(|m| ParseError::usage(spec, m))
    }
}

/// `!cancel <run id>`: stops a run for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancel {
    pub run: i64,
}

impl ChatCommand for Cancel {
    const SPEC: CommandSpec = CommandSpec {
        name: "cancel",
        args: "<run id>",
        summary: "stop a run for good",
        details: "`!cancel 42` stops run 42's worker (on whichever host it runs) and marks the \
                  run cancelled; its open requests expire.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        Ok(Cancel {
            run: one_id(&Self::SPEC, args, "run")?,
        })
    }
}

impl Handler for Cancel {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let run_id = self.run;
        let run = match cx.run_or_refuse(run_id).await? {
            Ok(run) => run,
            Err(reply) => return Ok(reply),
        };
        let reason = format!("cancelled by {}", cx.who());
        let actor = cx.message.sender_actor();
        let run = cx
            .tx
            .transitions()
            .transition_run(&Transition {
                run: run.id,
                to: RunState::Cancelled,
                actor: &actor,
                reason: &reason,
                fence: None,
            })
            .await?;
        let worker = if run.has_worker() {
            " Its worker is being stopped."
        } else {
            ""
        };
        cx.post(&run, &format!("Run {run_id} is {reason}.{worker}"))
            .await?;
        Ok(CommandReply::ok(format!(
            "Run {run_id} is cancelled.{worker} Its open requests expired."
        )))
    }
}

/// `!hold <run id> | all`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub target: RunOrAll,
}

impl ChatCommand for Hold {
    const SPEC: CommandSpec = CommandSpec {
        name: "hold",
        args: "<run id> | all",
        summary: "stop a run's worker at a safe point and keep it stopped",
        details: "`!hold 42` stops run 42's worker at a safe point and starts none until \
                  `!unhold 42`. `!hold all` does that for every run and starts nothing new, \
                  until `!unhold all`.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        Ok(Hold {
            target: RunOrAll::parse(&Self::SPEC, args)?,
        })
    }
}

impl Handler for Hold {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        match self.target {
            RunOrAll::Run(run) => hold(cx, run, true).await,
            RunOrAll::All => switch(cx, Control::HoldAll, true).await,
        }
    }
}

/// `!unhold <run id> | all`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhold {
    pub target: RunOrAll,
}

impl ChatCommand for Unhold {
    const SPEC: CommandSpec = CommandSpec {
        name: "unhold",
        args: "<run id> | all",
        summary: "let a held run continue",
        details: "`!unhold 42` releases a run held with `!hold`; `!unhold all` undoes `!hold all`.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        Ok(Unhold {
            target: RunOrAll::parse(&Self::SPEC, args)?,
        })
    }
}

impl Handler for Unhold {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        match self.target {
            RunOrAll::Run(run) => hold(cx, run, false).await,
            RunOrAll::All => switch(cx, Control::HoldAll, false).await,
        }
    }
}

/// Holds (`held`) or releases one run.
async fn hold(
    cx: &mut CommandContext<'_, '_>,
    run_id: i64,
    held: bool,
) -> Result<CommandReply, StoreError> {
    let run = match cx.run_or_refuse(run_id).await? {
        Ok(run) => run,
        Err(reply) => return Ok(reply),
    };
    if run.held == held {
        return Ok(CommandReply::refused(format!(
            "Run {run_id} is {} already.",
            if held { "held" } else { "not held" }
        )));
    }
    let reason = format!("{} by {}", if held { "held" } else { "released" }, cx.who());
    let actor = cx.message.sender_actor();
    let run = cx
        .tx
        .holds()
        .set_held(run_id, held, &actor, &reason, false)
        .await?;
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
    cx.post(&run, &post_text).await?;
    Ok(CommandReply::ok(reply))
}

/// `!retry <run id>`: a fresh worker for a held or abandoned run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    pub run: i64,
}

impl ChatCommand for Retry {
    const SPEC: CommandSpec = CommandSpec {
        name: "retry",
        args: "<run id>",
        summary: "start a held or abandoned run again",
        details: "`!retry 42` gives run 42 a fresh worker after it was held for too many failed \
                  attempts or its cost cap (which it raises by as much again), or after it was \
                  abandoned.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        Ok(Retry {
            run: one_id(&Self::SPEC, args, "run")?,
        })
    }
}

impl Handler for Retry {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let run_id = self.run;
        let run = match cx.run_or_refuse(run_id).await? {
            Ok(run) => run,
            Err(reply) => return Ok(reply),
        };
        let reason = format!("retried by {}", cx.who());
        let actor = cx.message.sender_actor();
        let run = match run.state {
            RunState::Abandoned => {
                cx.tx
                    .transitions()
                    .transition_run(&Transition {
                        run: run_id,
                        to: RunState::Queued,
                        actor: &actor,
                        reason: &reason,
                        fence: None,
                    })
                    .await?;
                cx.tx
                    .holds()
                    .set_held(run_id, false, &actor, &reason, true)
                    .await?
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
            _ => {
                cx.tx
                    .holds()
                    .set_held(run_id, false, &actor, &reason, true)
                    .await?
            }
        };
        let post =
            format!("Run {run_id} is {reason}: a fresh attempt starts when a worker is free.");
        cx.post(&run, &post).await?;
        Ok(CommandReply::ok(format!(
            "Run {run_id} will be tried again (its failure count starts over)."
        )))
    }
}

/// `!pause`: no runner claims new work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause;

impl ChatCommand for Pause {
    const SPEC: CommandSpec = CommandSpec {
        name: "pause",
        args: "",
        summary: "stop claiming new work",
        details: "`!pause` lets running workers finish but starts no new ones until `!resume`.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        no_args(&Self::SPEC, args).map(|()| Pause)
    }
}

impl Handler for Pause {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        switch(cx, Control::Paused, true).await
    }
}

/// `!resume`: undoes `!pause`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume;

impl ChatCommand for Resume {
    const SPEC: CommandSpec = CommandSpec {
        name: "resume",
        args: "",
        summary: "claim new work again",
        details: "`!resume` undoes `!pause`.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        no_args(&Self::SPEC, args).map(|()| Resume)
    }
}

impl Handler for Resume {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        switch(cx, Control::Paused, false).await
    }
}

/// Turns a deployment-wide switch on or off (`!pause`, `!hold all`, …).
async fn switch(
    cx: &mut CommandContext<'_, '_>,
    control: Control,
    on: bool,
) -> Result<CommandReply, StoreError> {
    let was = cx.tx.controls().control(control).await?;
    if was == on {
        return Ok(CommandReply::refused(match (control, on) {
            (Control::Paused, true) => "Claiming is paused already. `!resume` starts it again.",
            (Control::Paused, false) => "Claiming is not paused.",
            (Control::HoldAll, true) => "Every run is held already. `!unhold all` releases them.",
            (Control::HoldAll, false) => "Runs are not all held.",
        }));
    }
    let actor = cx.message.sender_actor();
    cx.tx.controls().set_control(control, on, &actor).await?;
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
