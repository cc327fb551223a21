//! `!merge`: an approver has Eagle merge a run's PR, at the head Eagle
//! named to them.
//!
//! The command is bound to a head the owner was shown: the one message
//! that the PR is ready (or a refused `!merge`) recorded it on the run
//! (`merge_offered_sha`). If the PR's head moved since, nothing is merged:
//! the answer names the new head, which the next `!merge` then merges.
//! There is one merge code path: the command approves the worker's pending
//! `merge_pr` at that head, or records a `merge_pr` approved by the sender,
//! and Eagle's carrier carries it out exactly like any approved merge (the
//! run's own PR, the required checks and a writer's review green at that
//! head, a draft marked ready first: `executor::carrier::merge`).

use super::parse::id;
use super::{Access, ChatCommand, CommandContext, CommandReply, CommandSpec, Handler, ParseError};
use crate::policy::effect::{Effect, describe_merge};
use crate::store::{Approval, RequestStatus, Run, RunState, StoreError, short_sha};

/// The most runs one `!merge` names.
const MAX_RUNS: usize = 20;

/// `!merge [run id…]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merge {
    /// Empty: the run of the topic the command was typed in.
    pub runs: Vec<i64>,
}

impl ChatCommand for Merge {
    const SPEC: CommandSpec = CommandSpec {
        name: "merge",
        args: "[run id…]",
        summary: "merge runs' PRs, each at the head Eagle named",
        details: "`!merge 42` has Eagle merge run 42's PR at the head its message named (`!merge \
                  4 6` merges both, each at its own head), once the required checks and a review \
                  by someone with write access are green there; a draft is marked ready first. \
                  If the head moved since, nothing is merged: Eagle names the new head, and \
                  `!merge 42` again merges that one. A worker's pending `merge_pr` of that head \
                  is approved by it. In a run's own topic the id may be left out: `!merge`.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let mut runs = Vec::new();
        for word in args.split([' ', '\t', ',']).filter(|w| !w.is_empty()) {
            let run = id(word, "run").map_err(|m| ParseError::usage(&Self::SPEC, m))?;
            if !runs.contains(&run) {
                runs.push(run);
            }
        }
        if runs.len() > MAX_RUNS {
            return Err(ParseError::usage(
                &Self::SPEC,
                format!("At most {MAX_RUNS} runs at once."),
            ));
        }
        Ok(Merge { runs })
    }
}

impl Handler for Merge {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let mut runs = Vec::new();
        if self.runs.is_empty() {
            match cx.named_or_topic_run(None, "!merge <run id>").await? {
                Ok(run) => runs.push(Ok(run)),
                Err(reply) => return Ok(reply),
            }
        }
        for &id in &self.runs {
            runs.push(cx.tx.tasks().run(id).await?.ok_or(id));
        }
        let mut lines = Vec::new();
        let mut all_ok = true;
        for run in runs {
            let line = match run {
                Ok(run) => merge_one(cx, &run).await?,
                Err(id) => Err(format!(
                    "There is no run {id}. `!status` lists the open ones."
                )),
            };
            all_ok &= line.is_ok();
            lines.push(line.unwrap_or_else(|refused| refused));
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
}

/// One run's part: what Eagle will do (`Ok`), or why it merges nothing.
async fn merge_one(
    cx: &mut CommandContext<'_, '_>,
    run: &Run,
) -> Result<Result<String, String>, StoreError> {
    let id = run.id;
    let Some(number) = run.pr_number.filter(|n| *n > 0) else {
        return Ok(Err(format!(
            "Run {id} has no PR Eagle knows of; nothing was merged."
        )));
    };
    if matches!(run.state, RunState::Cancelled | RunState::Abandoned) {
        return Ok(Err(format!(
            "Run {id} is {}; nothing was merged.",
            run.state.as_str()
        )));
    }
    if run.pr_closed_at.is_some() {
        return Ok(Err(format!(
            "Run {id}'s PR #{number} is {} already; nothing was merged.",
            run.pr_status.as_deref().unwrap_or("closed")
        )));
    }
    let (Some(head), Some(shown)) = (run.head_sha.as_deref(), run.merge_offered_sha.as_deref())
    else {
        return Ok(Err(format!(
            "Eagle has not offered run {id}'s PR #{number} for merging yet{}: it names the head \
             to merge once CI and the review are green there. Nothing was merged.",
            run.pr_status
                .as_deref()
                .map(|s| format!(" ({})", crate::ground::text::neutralize_mentions(s)))
                .unwrap_or_default()
        )));
    };
    // Bound to what the owner was shown: a head that moved since is named,
    // and becomes what the next `!merge` merges.
    if head != shown {
        cx.tx.prs().record_merge_offer(id, head).await?;
        return Ok(Err(format!(
            "Run {id}'s PR #{number} moved from `{}` to `{}` since Eagle named it to you: nothing \
             was merged. {} `!merge {id}` merges it at `{}`.",
            short_sha(shown),
            short_sha(head),
            describe_merge(run, Some(head)),
            short_sha(head)
        )));
    }
    // From here on the head is the one shown: should the PR loop lag behind
    // a push, the carrier finds the PR's head moved and offers it instead.
    let head = shown;
    let requests = cx.tx.requests().requests_of_run(id).await?;
    let at = |r: &&crate::store::Request| {
        r.action == "merge_pr" && r.bound_sha.as_deref() == Some(head) && r.bound_to.is_none()
    };
    if let Some(going) = requests
        .iter()
        .filter(at)
        .find(|r| r.status == RequestStatus::Approved && r.carried_out_at.is_none())
    {
        return Ok(Ok(format!(
            "Run {id}'s PR #{number} is being merged at `{}` already (req {}).",
            short_sha(head),
            going.id
        )));
    }
    let actor = cx.message.sender_actor();
    let approval = Approval {
        approve: true,
        actor: &actor,
        text: None,
        source_message_id: Some(cx.message.message_id),
    };
    // The worker's own request at that head is the same decision: answered.
    let asked: Vec<i64> = requests
        .iter()
        .filter(at)
        .filter(|r| r.status.is_open())
        .map(|r| r.id)
        .collect();
    let mut approved = Vec::new();
    for request in asked {
        if let Some(decided) = cx.tx.requests().human_decision(request, &approval).await? {
            approved.push(decided.id);
        }
    }
    if approved.is_empty() {
        let body = Effect::MergePr {
            sha: Some(head.to_string()),
        }
        .to_body();
        match cx
            .tx
            .requests()
            .record_merge_command(run, head, &body, &approval)
            .await?
        {
            Some(made) => approved.push(made.id),
            None => {
                return Ok(Ok(format!(
                    "Run {id}'s PR #{number} is being merged at `{}` already.",
                    short_sha(head)
                )));
            }
        }
    } else {
        cx.tx.holds().settle_waiting(id).await?;
    }
    let who = cx.who();
    for request in &approved {
        cx.post(
            run,
            &format!(
                "[APPROVED: merge_pr] run:{id} req:{request} by {who} (`!merge {id}` at {})",
                short_sha(head)
            ),
        )
        .await?;
    }
    Ok(Ok(format!(
        "Eagle merges run {id}'s PR #{number} at `{}` (req {}) once the required checks and a \
         writer's review are green there; the run's topic says how it went.",
        short_sha(head),
        approved
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_reads_run_ids_and_refuses_anything_else() {
        let ok = |args: &str| Merge::parse(args, &[]).map(|m| m.runs);
        assert_eq!(ok(""), Ok(vec![]));
        assert_eq!(ok("4"), Ok(vec![4]));
        assert_eq!(ok("4 6"), Ok(vec![4, 6]));
        assert_eq!(ok("#4, run:6 4"), Ok(vec![4, 6]));
        for bad in ["four", "4 now", "0", "-3", "4 6 please"] {
            let error = ok(bad).unwrap_err();
            assert!(
                error.to_string().contains("!merge [run id…]"),
                "{bad}: {error}"
            );
        }
        let many: Vec<String> = (1..=21).map(|n| n.to_string()).collect();
        assert!(ok(&many.join(" ")).is_err());
    }
}
