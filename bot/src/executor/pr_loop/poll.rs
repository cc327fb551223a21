//! One poll of one run's PR: the four conditional reads, the rule's
//! verdict ([`super::rule::next_step`]) and the writes it implies (labels,
//! CI started, a worker asked for, a hold, completion), in one fenced
//! transaction with the post that tells the run's topic.

use chrono::{DateTime, SubsecRound, Utc};

use super::rule::{Facts, Memo, PrFacts, RunFacts, Step, Trigger, by_human, next_step};
use super::{ACTOR, NO_PR_NUMBER, PollError, PrLoop, Watcher, quote};
use crate::ground::text::{neutralize_mentions, one_line};
use crate::integrations::github::{PrState, PullRequestView, Repo};
use crate::store::{PrPoll, PrSeen, PrWork, RequestStatus, Run, RunState, Transition, short_sha};

impl PrLoop {
    pub(super) async fn poll(&self, watcher: &Watcher, run: &Run) -> Result<(), PollError> {
        let Some(number) = run.pr_number.filter(|n| *n > 0) else {
            if run.state == RunState::Pr {
                self.store.prs().set_pr_status(run.id, NO_PR_NUMBER).await?;
            }
            return Ok(());
        };
        // Only the run's repository (github.repo or one an executor
        // announced): a worker's line must not make Eagle watch, label or
        // merge elsewhere.
        let repo = match crate::executor::repos::github_of_run(
            &self.store,
            (&watcher.settings.repo, &watcher.settings.base),
            run,
        )
        .await
        {
            Ok((repo, _)) => repo,
            Err(why) => {
                // Held for its owner, said once: never a run waiting on nobody.
                let status = format!("{why}: Eagle does not follow it");
                return self.not_its_pr(run, number, &status).await;
            }
        };
        let memo: Memo = run
            .pr_poll
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        let view = watcher
            .client
            .poll_pull_request(&repo, number as u64, &watcher.poll, memo.mark.as_ref())
            .await?;
        let comments_before = memo.comments;
        let open_threads = view.open_threads.clone().unwrap_or(memo.open_threads);
        let memo = Memo {
            mark: Some(view.mark.clone()),
            open_threads: open_threads.clone(),
            comments: view.pull.comments + view.pull.review_comments,
        };
        let memo_json = serde_json::to_string(&memo).ok();
        if run.state == RunState::Complete {
            let grew = memo.comments > comments_before;
            return self
                .watch_complete(watcher, run, &repo, &view, memo_json, grew)
                .await;
        }
        // Draft PRs carry the labels the profile requires. A refusal (the
        // token may not write issues) is logged and blocks nothing.
        if view.pull.draft && view.pull.state == PrState::Open {
            let missing: Vec<String> = watcher
                .settings
                .required_labels
                .iter()
                .filter(|l| {
                    !view
                        .pull
                        .labels
                        .iter()
                        .any(|have| have.eq_ignore_ascii_case(l))
                })
                .cloned()
                .collect();
            if !missing.is_empty() {
                match watcher
                    .client
                    .add_labels(&repo, number as u64, &missing)
                    .await
                {
                    Ok(_) => {
                        tracing::info!(run = run.id, labels = ?missing, "added the required labels to a draft PR")
                    }
                    Err(error) if error.is_transient() || error.retry_after().is_some() => {
                        return Err(error.into());
                    }
                    Err(error) => {
                        tracing::warn!(run = run.id, %error, "cannot add the required labels")
                    }
                }
            }
        }
        let requests = self.store.requests().requests_of_run(run.id).await?;
        let mut facts = RunFacts::of(run);
        facts.waiting = requests.iter().any(|r| {
            r.status.is_open()
                || (run.pr_work.0.is_some()
                    && r.delivered_at.is_none()
                    && matches!(
                        r.status,
                        RequestStatus::Approved | RequestStatus::Denied | RequestStatus::Expired
                    ))
        });
        let now = crate::store::now();
        let mut step = next_step(&Facts {
            run: &facts,
            pr: &PrFacts::of(&view),
            open_threads: &open_threads,
            settings: &watcher.settings,
            repo: &repo,
            now,
        });
        if let Step::NotItsPr { status } = &step {
            return self.not_its_pr(run, number, status).await;
        }
        let head = view.pull.head_sha.as_str();
        let mut triggered = None;
        if let Step::TriggerCi { how, status } = &step {
            let started = match how {
                Trigger::Dispatch { workflow, branch } => {
                    watcher
                        .client
                        .dispatch_workflow(&repo, workflow, branch, &serde_json::Map::new())
                        .await
                }
                Trigger::Rerun { run_id } => {
                    watcher.client.rerun_workflow_run(&repo, *run_id).await
                }
                Trigger::None => Ok(()),
            };
            triggered = Some(head);
            match started {
                Ok(()) => {}
                Err(error) if error.is_transient() || error.retry_after().is_some() => {
                    return Err(error.into());
                }
                // Refused for good (no workflow_dispatch trigger, a
                // permission): said once, not asked again for this head.
                Err(error) => {
                    step = Step::TriggerCi {
                        how: Trigger::None,
                        status: format!(
                            "{status}, but GitHub refused: {}",
                            one_line(&error.to_string(), 200)
                        ),
                    };
                }
            }
        }
        let (status, work, new) = match &step {
            Step::Wait { status }
            | Step::TriggerCi { status, .. }
            | Step::Hold { status }
            | Step::Complete { status } => (status.clone(), None, false),
            // What is asked of the run stays as it is.
            Step::Answers { status } => (status.clone(), run.pr_work.0, false),
            Step::Work { work, status, new } => (status.clone(), Some(*work), *new),
            Step::Merged => ("merged".to_string(), None, false),
            Step::Closed => ("closed without merging".to_string(), None, false),
            Step::NotItsPr { status } => (status.clone(), None, false),
        };
        let mut tx = self.store.begin_write().await?;
        let Some(polled) = tx
            .prs()
            .record_pr_poll(&PrPoll {
                run: run.id,
                state: run.state,
                head_sha: head,
                pr_url: Some(view.pull.html_url.as_str()),
                status: &status,
                poll: memo_json.as_deref(),
                work,
                counts_ci_attempt: new && work == Some(PrWork::FixCi),
                counts_round: new,
                read_at: run.updated_at,
                ci_triggered_sha: triggered,
                comments_seen_at: None,
                seen: Some(&pr_seen(&view)),
            })
            .await?
        else {
            // The run changed meanwhile (a runner claimed it, a worker
            // ended): the next tick looks again.
            return Ok(());
        };
        for request in &polled.expired {
            tx.controls()
                .insert_notice(
                    run.id,
                    "merge_expired",
                    &format!(
                        "req:{} the PR's head moved to {}; the worker asks again",
                        request.id,
                        short_sha(head)
                    ),
                )
                .await?;
        }
        let topic = run.topic();
        let pr = format!("PR #{number}");
        match step {
            Step::Merged => {
                tx.prs().close_pr(run.id, "merged").await?;
                tx.transitions()
                    .transition_run(&Transition {
                        run: run.id,
                        to: RunState::Complete,
                        actor: ACTOR,
                        reason: "its PR was merged",
                        fence: None,
                    })
                    .await?;
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!("[STATUS: complete] run:{} {pr} was merged", run.id),
                    )
                    .await?;
            }
            Step::Closed => {
                tx.prs().close_pr(run.id, "closed without merging").await?;
                tx.transitions()
                    .transition_run(&Transition {
                        run: run.id,
                        to: RunState::Abandoned,
                        actor: ACTOR,
                        reason: "its PR was closed without merging",
                        fence: None,
                    })
                    .await?;
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!(
                            "[STATUS: abandoned] run:{} {pr} was closed without merging; the task goes back for review",
                            run.id
                        ),
                    )
                    .await?;
            }
            Step::Hold { status } if !run.held => {
                tx.holds()
                    .set_held(run.id, true, ACTOR, &status, false)
                    .await?;
                let owner = self.owner_label(run).await;
                tx.holds()
                    .set_waiting_on(run.id, Some(&owner), None)
                    .await?;
                tx.controls()
                    .insert_notice(run.id, "pr_held", &format!("{pr}: {status}"))
                    .await?;
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!("[STATUS: held] run:{} {}", run.id, quote(&status)),
                    )
                    .await?;
            }
            Step::Complete { status } => {
                tx.transitions()
                    .transition_run(&Transition {
                        run: run.id,
                        to: RunState::Complete,
                        actor: ACTOR,
                        reason: &status,
                        fence: None,
                    })
                    .await?;
                tx.prs().mark_comments_seen(run.id, now).await?;
                tx.controls()
                    .insert_notice(run.id, "complete", view.pull.html_url.as_str())
                    .await?;
                let draft = if !view.pull.draft {
                    ""
                } else if watcher.settings.keep_drafts {
                    " · it is a draft and stays one (github.drafts = \"keep\"): mark it ready for \
                     review on GitHub before it can be merged"
                } else {
                    " · it is a draft: an approved merge_pr marks it ready for review, then merges it"
                };
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!(
                            "[STATUS: complete] run:{} {pr}: {}{draft}",
                            run.id,
                            quote(&status)
                        ),
                    )
                    .await?;
            }
            Step::TriggerCi {
                how: Trigger::None,
                status,
            } => {
                tx.controls()
                    .insert_notice(run.id, "ci_never_ran", &format!("{pr}: {status}"))
                    .await?;
            }
            Step::TriggerCi { status, .. } => {
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!("[STATUS: ci] run:{} {}", run.id, quote(&status)),
                    )
                    .await?;
            }
            Step::Work { work, status, .. } if run.pr_work.0 != Some(work) => {
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!(
                            "[STATUS: {}] run:{} {}; a worker follows",
                            work.as_str(),
                            run.id,
                            quote(&status)
                        ),
                    )
                    .await?;
            }
            _ => {}
        }
        tx.commit().await?;
        Ok(())
    }

    /// A complete run: merged or closed ends the watch; a human's comment
    /// on its draft PR since it completed sends it back to `pr`.
    async fn watch_complete(
        &self,
        watcher: &Watcher,
        run: &Run,
        repo: &Repo,
        view: &PullRequestView,
        memo: Option<String>,
        comments_grew: bool,
    ) -> Result<(), PollError> {
        let pull = &view.pull;
        if pull.merged || pull.state == PrState::Closed {
            let mut tx = self.store.begin_write().await?;
            tx.prs()
                .close_pr(run.id, if pull.merged { "merged" } else { "closed" })
                .await?;
            tx.commit().await?;
            return Ok(());
        }
        // GitHub's times have whole seconds: a comment in the second the
        // run completed counts (only comments made since the last poll are
        // looked at, so an older one cannot).
        let seen = run
            .pr_comments_seen_at
            .or(run.completed_at)
            .unwrap_or(run.updated_at)
            .trunc_subsecs(0);
        // The newest human comment after `seen`: in the conversation, or
        // the last reply of a review thread.
        let mut human: Option<(DateTime<Utc>, String)> = None;
        // Only someone with write access (or trusted by name) steers a run.
        let mut consider =
            |at: &str, author: Option<&str>, association: Option<&str>, body: &str| {
                if let Ok(at) = at.parse::<DateTime<Utc>>()
                    && at >= seen
                    && watcher.settings.trusted.counts(author, association)
                    && by_human(author, body, &watcher.settings)
                    && human.as_ref().is_none_or(|(t, _)| at > *t)
                {
                    human = Some((at, author.unwrap_or_default().to_string()));
                }
            };
        if pull.draft && comments_grew {
            for c in watcher
                .client
                .issue_comments(repo, pull.number, Some(seen))
                .await?
            {
                consider(
                    &c.created_at,
                    c.author.as_deref(),
                    c.association.as_deref(),
                    &c.body,
                );
            }
            for t in view.threads.iter().flat_map(|t| &t.threads) {
                if let Some(last) = &t.last_comment {
                    consider(
                        &last.created_at,
                        last.author.as_deref(),
                        last.association.as_deref(),
                        &last.body,
                    );
                }
            }
        }
        let mut tx = self.store.begin_write().await?;
        match human {
            Some((at, author)) => {
                let reason = format!(
                    "{} commented on its draft PR",
                    neutralize_mentions(&one_line(&author, 60))
                );
                tx.prs().reopen_pr(run.id, at, &reason).await?;
                self.poster
                    .post(
                        &mut tx,
                        &run.topic(),
                        &format!(
                            "[STATUS: pr] run:{} {reason}: back to pr, a worker answers",
                            run.id
                        ),
                    )
                    .await?;
            }
            None => {
                tx.prs()
                    .record_pr_poll(&PrPoll {
                        run: run.id,
                        state: RunState::Complete,
                        head_sha: &pull.head_sha,
                        pr_url: Some(&pull.html_url),
                        status: "complete: waiting for a human to merge it",
                        poll: memo.as_deref(),
                        work: None,
                        counts_ci_attempt: false,
                        counts_round: false,
                        read_at: run.updated_at,
                        ci_triggered_sha: None,
                        comments_seen_at: None,
                        seen: Some(&pr_seen(view)),
                    })
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }
}

/// What Eagle keeps of a poll for what it says about a merge.
fn pr_seen(view: &PullRequestView) -> PrSeen {
    use crate::integrations::github::CiState;
    PrSeen {
        title: view.pull.title.clone(),
        head_ref: view.pull.head_ref.clone(),
        head_repo: view.pull.head_repo.clone(),
        base_ref: view.pull.base_ref.clone(),
        ci: match &view.ci {
            CiState::Green => "green".into(),
            CiState::Running => "running".into(),
            CiState::NeverRan => "never ran".into(),
            CiState::Failed { failed } => format!("failed: {}", failed.join(", ")),
        },
        draft: view.pull.draft,
    }
}

impl PrLoop {
    /// The worker named a PR that is not its run's: the run is held for its
    /// owner (once), and nothing of that PR (its head, its state) is
    /// recorded as the run's, so a `!retry` finds it not the run's again.
    async fn not_its_pr(&self, run: &Run, number: i64, status: &str) -> Result<(), PollError> {
        if run.held {
            self.store.prs().set_pr_status(run.id, status).await?;
            return Ok(());
        }
        let owner = self.owner_label(run).await;
        let mut tx = self.store.begin_write().await?;
        tx.holds()
            .set_held(run.id, true, ACTOR, status, false)
            .await?;
        tx.holds()
            .set_waiting_on(run.id, Some(&owner), None)
            .await?;
        tx.controls()
            .insert_notice(run.id, "pr_held", &format!("PR #{number}: {status}"))
            .await?;
        self.poster
            .post(
                &mut tx,
                &run.topic(),
                &format!(
                    "[STATUS: held] run:{} PR #{number}: {}",
                    run.id,
                    quote(status)
                ),
            )
            .await?;
        tx.commit().await?;
        self.store.prs().set_pr_status(run.id, status).await?;
        Ok(())
    }
}
