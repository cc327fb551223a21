//! Seed 003's "PR sub-logic" as a pure function: what one poll of a run's
//! PR means for the run ([`next_step`]), within the caps (`ci_attempts`,
//! `max_rounds`). No IO, so that each rule is tested on its own; the loop
//! that applies it is [`super::PrLoop`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ground::text::one_line;
use crate::integrations::github::{
    CiState, Conclusion, OpenThread, PollMark, PrState, PullRequestView, RunStatus,
};
use crate::profile::GithubSettings;
use crate::store::{PrWork, Run, short_sha};

/// What the loop remembers of a PR between polls (the run's `pr_poll`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memo {
    /// The last poll's mark: whether review threads must be read again.
    pub mark: Option<PollMark>,
    /// The open threads as last read.
    #[serde(default)]
    pub open_threads: Vec<OpenThread>,
    /// How many comments the PR had (conversation and review): a human's
    /// new comment on a complete draft is looked for only when it grew.
    #[serde(default)]
    pub comments: u64,
}

/// What the PR loop decides for one run, from one poll (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing for a worker to do; the status says why it waits.
    Wait { status: String },
    /// The run waits for answers to its worker's requests: what is asked of
    /// it stays as it is, and nothing else happens.
    Answers { status: String },
    /// Ask a worker for `work`.
    Work {
        work: PrWork,
        status: String,
        /// Asked for anew, not already asked (it counts against the caps).
        new: bool,
    },
    /// CI never ran on the head: start it.
    TriggerCi { how: Trigger, status: String },
    /// Past the cap of fix-ci workers, or of PR workers of every kind: hold
    /// the run for its owner.
    Hold { status: String },
    /// Green, reviewed, nothing unresolved.
    Complete { status: String },
    /// The PR the worker named is not the run's own (another branch, or
    /// merged or closed before the loop saw it open): the run is held for
    /// its owner, and nothing of the PR is recorded as the run's.
    NotItsPr { status: String },
    /// The PR was merged.
    Merged,
    /// The PR was closed without merging.
    Closed,
}

/// How CI is started again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// `POST …/actions/workflows/{workflow}/dispatches` on the PR's branch.
    Dispatch { workflow: String, branch: String },
    /// `POST …/actions/runs/{id}/rerun`: the head's own run was cancelled
    /// or went stale.
    Rerun { run_id: u64 },
    /// Nothing to start it with.
    None,
}

/// What the run remembers of its PR, as [`next_step`] reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFacts {
    /// The head the last poll saw.
    pub head_sha: Option<String>,
    pub head_seen_at: Option<DateTime<Utc>>,
    pub ci_triggered_sha: Option<String>,
    /// fix-ci workers asked for so far.
    pub ci_attempts: i64,
    pub pr_work: Option<PrWork>,
    pub review_green_sha: Option<String>,
    pub pr_work_done_sha: Option<String>,
    pub pr_work_done_at: Option<DateTime<Utc>>,
    /// PR workers asked for so far.
    pub pr_rounds: i64,
    /// Its worker waits for answers: a request is open, or answered and
    /// not yet delivered to the worker that is to be resumed.
    pub waiting: bool,
    /// The run's own branch: its PR must come from it.
    pub branch: Option<String>,
}

impl RunFacts {
    pub fn of(run: &Run) -> RunFacts {
        RunFacts {
            head_sha: run.head_sha.clone(),
            head_seen_at: run.head_seen_at,
            ci_triggered_sha: run.ci_triggered_sha.clone(),
            ci_attempts: run.ci_attempts,
            pr_work: run.pr_work.0,
            review_green_sha: run.review_green_sha.clone(),
            pr_work_done_sha: run.pr_work_done_sha.clone(),
            pr_work_done_at: run.pr_work_done_at,
            pr_rounds: run.pr_rounds,
            waiting: false,
            branch: run.branch_name.clone(),
        }
    }
}

/// What one poll saw of the PR, as [`next_step`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrFacts {
    pub merged: bool,
    pub closed: bool,
    pub head_sha: String,
    pub head_ref: String,
    /// The repository the head branch is in (`None`: a deleted fork).
    pub head_repo: Option<String>,
    pub ci: CiState,
    /// The head's own workflow run, when CI failed only because it was
    /// cancelled or went stale (see [`rerunnable`]).
    pub rerun: Option<u64>,
}

impl PrFacts {
    pub fn of(view: &PullRequestView) -> PrFacts {
        PrFacts {
            merged: view.pull.merged,
            closed: view.pull.state == PrState::Closed,
            head_sha: view.pull.head_sha.clone(),
            head_ref: view.pull.head_ref.clone(),
            head_repo: view.pull.head_repo.clone(),
            ci: view.ci.clone(),
            rerun: rerunnable(view, &view.pull.head_sha),
        }
    }
}

/// The facts [`next_step`] needs.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub run: &'a RunFacts,
    pub pr: &'a PrFacts,
    pub open_threads: &'a [OpenThread],
    pub settings: &'a GithubSettings,
    /// The run's repository on GitHub (its task's, else `github.repo`).
    pub repo: &'a crate::integrations::github::Repo,
    pub now: DateTime<Utc>,
}

/// Decides what happens to a run in `pr` after a poll (seed 003's rules,
/// in order), within the caps. Pure, so that each rule is tested on its own.
pub fn next_step(f: &Facts<'_>) -> Step {
    match rule(f) {
        Step::Work {
            work,
            status,
            new: true,
        } => {
            if work == PrWork::FixCi && f.run.ci_attempts >= f.settings.ci_attempts {
                return Step::Hold {
                    status: format!(
                        "{status}, after {} fix-ci worker(s): held for its owner",
                        f.run.ci_attempts
                    ),
                };
            }
            if f.run.pr_rounds >= f.settings.max_rounds {
                return Step::Hold {
                    status: format!(
                        "{status}, after {} PR worker(s): held for its owner",
                        f.run.pr_rounds
                    ),
                };
            }
            Step::Work {
                work,
                status,
                new: true,
            }
        }
        step => step,
    }
}

/// Seed 003's rules, without the caps.
fn rule(f: &Facts<'_>) -> Step {
    let pull = f.pr;
    // Only the run's own PR counts: from a branch of the repository itself
    // (a fork's branch may take the run's name), from the run's branch, and
    // open when the loop first saw it (a worker naming a PR merged or
    // closed already, its own or anyone's, neither completes nor abandons
    // the run).
    let repo = f.repo;
    if !pull.head_repo.as_deref().is_some_and(|r| repo.is_named(r)) {
        return Step::NotItsPr {
            status: format!(
                "the PR the worker named comes from {}:{}, not from a branch of {repo}: \
                 Eagle follows no fork's PR",
                one_line(
                    pull.head_repo.as_deref().unwrap_or("a deleted repository"),
                    100
                ),
                one_line(&pull.head_ref, 100),
            ),
        };
    }
    if let Some(branch) = f.run.branch.as_deref()
        && pull.head_ref != branch
    {
        return Step::NotItsPr {
            status: format!(
                "the PR the worker named is from the branch {}, not the run's {}: it is not this run's PR",
                one_line(&pull.head_ref, 100),
                one_line(branch, 100)
            ),
        };
    }
    if f.run.head_sha.is_none() && (pull.merged || pull.closed) {
        return Step::NotItsPr {
            status: format!(
                "the PR the worker named was {} before Eagle saw it open: it is not this run's work",
                if pull.merged { "merged" } else { "closed" }
            ),
        };
    }
    if pull.merged {
        return Step::Merged;
    }
    if pull.closed {
        return Step::Closed;
    }
    let head = pull.head_sha.as_str();
    let short = short_sha(head);
    if f.run.waiting {
        return Step::Answers {
            status: format!("on {short}, its worker waits for answers to its requests"),
        };
    }
    let new_head = f.run.head_sha.as_deref() != Some(head);
    // Work asked for by a person's comment or a review that wanted changes
    // stands until it is done or the head moves (CI failing comes first).
    if f.run.pr_work == Some(PrWork::FixComments)
        && !new_head
        && !matches!(pull.ci, CiState::Failed { .. })
    {
        return Step::Work {
            work: PrWork::FixComments,
            status: format!("comments to answer on {short}"),
            new: false,
        };
    }
    let grace =
        chrono::TimeDelta::from_std(f.settings.ci_grace).unwrap_or(chrono::TimeDelta::minutes(10));
    // The same work is not asked again for the head it ended on until the
    // push it made had time to show.
    let just_worked_on = !new_head
        && f.run.pr_work_done_sha.as_deref() == Some(head)
        && f.run.pr_work_done_at.is_some_and(|at| f.now - at < grace);
    match &pull.ci {
        CiState::Running => Step::Wait {
            status: format!("waiting for CI on {short}"),
        },
        CiState::NeverRan => {
            let since = if new_head {
                f.now
            } else {
                f.run.head_seen_at.unwrap_or(f.now)
            };
            if f.now - since < grace || just_worked_on {
                return Step::Wait {
                    status: format!("waiting for CI to start on {short}"),
                };
            }
            if f.run.ci_triggered_sha.as_deref() == Some(head) {
                return Step::Wait {
                    status: format!(
                        "CI never ran on {short}, even after it was started again: a human looks"
                    ),
                };
            }
            match &f.settings.ci_workflow {
                Some(workflow) => Step::TriggerCi {
                    how: Trigger::Dispatch {
                        workflow: workflow.clone(),
                        branch: pull.head_ref.clone(),
                    },
                    status: format!(
                        "CI never ran on {short}: {workflow} is dispatched on {}",
                        pull.head_ref
                    ),
                },
                None => Step::TriggerCi {
                    how: Trigger::None,
                    status: format!(
                        "CI never ran on {short}, and github.ci_workflow is unset: nothing can start it"
                    ),
                },
            }
        }
        CiState::Failed { failed } => {
            if let Some(run_id) = pull.rerun
                && f.run.ci_triggered_sha.as_deref() != Some(head)
            {
                return Step::TriggerCi {
                    how: Trigger::Rerun { run_id },
                    status: format!("CI on {short} was cancelled or went stale: it is re-run"),
                };
            }
            let names = failed.join(", ");
            if just_worked_on {
                return Step::Wait {
                    status: format!(
                        "CI failed on {short} ({names}); waiting for the fix to reach GitHub"
                    ),
                };
            }
            Step::Work {
                work: PrWork::FixCi,
                status: format!("CI failed on {short}: {names}"),
                new: f.run.pr_work != Some(PrWork::FixCi),
            }
        }
        CiState::Green if !f.open_threads.is_empty() => {
            let status = format!(
                "{} unresolved review thread(s): {}",
                f.open_threads.len(),
                f.open_threads
                    .iter()
                    .take(3)
                    .map(|t| match t.line {
                        Some(line) => format!("{}:{line}", t.path),
                        None => t.path.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if just_worked_on && f.run.pr_work.is_none() {
                return Step::Wait {
                    status: format!("{status}; waiting for the answers to reach GitHub"),
                };
            }
            Step::Work {
                work: PrWork::FixComments,
                status,
                new: f.run.pr_work != Some(PrWork::FixComments),
            }
        }
        CiState::Green if f.run.review_green_sha.as_deref() == Some(head) => Step::Complete {
            status: format!("complete: CI and the review green on {short}, nothing unresolved"),
        },
        CiState::Green => Step::Work {
            work: PrWork::PrReview,
            status: format!("CI green on {short}, nothing unresolved: a review follows"),
            new: f.run.pr_work != Some(PrWork::PrReview),
        },
    }
}

/// The head's own workflow run to re-run, when CI failed only because its
/// latest run was cancelled or went stale (no job of it failed).
fn rerunnable(view: &PullRequestView, head: &str) -> Option<u64> {
    let checks_failed = view.check_runs.check_runs.iter().any(|c| {
        c.status == RunStatus::Completed
            && !c.conclusion.is_some_and(Conclusion::is_passing)
            && !matches!(
                c.conclusion,
                Some(Conclusion::Cancelled | Conclusion::Stale)
            )
    });
    if checks_failed {
        return None;
    }
    view.workflow_runs
        .workflow_runs
        .iter()
        .filter(|r| r.head_sha == head && r.status == RunStatus::Completed)
        .max_by_key(|r| r.id)
        .filter(|r| {
            matches!(
                r.conclusion,
                Some(Conclusion::Cancelled | Conclusion::Stale)
            )
        })
        .map(|r| r.id)
}

/// Whether a comment is a human's: not a bot account, not one of the
/// profile's own logins, and not a protocol line.
pub(super) fn by_human(author: Option<&str>, body: &str, settings: &GithubSettings) -> bool {
    let Some(author) = author else { return false };
    let author = author.to_lowercase();
    !author.ends_with("[bot]")
        && !settings.bot_logins.contains(&author)
        && !body.trim_start().starts_with("[ACKNOWLEDGED")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn settings() -> GithubSettings {
        GithubSettings {
            api_url: url::Url::parse("https://api.github.com").unwrap(),
            repo: "acme/app".parse().unwrap(),
            base: "main".into(),
            credential: crate::profile::GitHubCredential::Token(secrecy::SecretString::from(
                "t".to_string(),
            )),
            required_checks: vec![],
            required_labels: vec![],
            ci_workflow: Some("ci.yml".into()),
            ci_grace: Duration::from_secs(600),
            poll_interval: Duration::from_secs(120),
            merge_method: "squash".into(),
            keep_drafts: false,
            ci_attempts: 2,
            max_rounds: 5,
            bot_logins: vec!["executor-bot".into()],
            trusted: crate::integrations::github::Trusted::default(),
        }
    }

    fn pr(ci: CiState) -> PrFacts {
        PrFacts {
            merged: false,
            closed: false,
            head_sha: A.into(),
            head_ref: "eagle/run-1".into(),
            head_repo: Some("acme/app".into()),
            ci,
            rerun: None,
        }
    }

    fn seen(head: &str) -> RunFacts {
        RunFacts {
            head_sha: Some(head.into()),
            head_seen_at: Some(Utc::now() - chrono::TimeDelta::hours(1)),
            ..RunFacts::default()
        }
    }

    fn thread() -> OpenThread {
        OpenThread {
            id: "T1".into(),
            path: "TabBar.swift".into(),
            line: Some(12),
            outdated: false,
            last_author: Some("alex".into()),
            excerpt: "rename".into(),
        }
    }

    fn step(run: &RunFacts, pr: &PrFacts, threads: &[OpenThread]) -> Step {
        next_step(&Facts {
            run,
            pr,
            open_threads: threads,
            settings: &settings(),
            repo: &settings().repo,
            now: Utc::now(),
        })
    }

    fn failed() -> CiState {
        CiState::Failed {
            failed: vec!["macOS UI Tests".into()],
        }
    }

    #[test]
    fn seed_003s_rules_in_order() {
        let kind = |s: &Step| match s {
            Step::Wait { .. } => "wait".to_string(),
            Step::Work { work, new, .. } => format!("{} new={new}", work.as_str()),
            Step::Answers { .. } => "answers".into(),
            Step::TriggerCi { how, .. } => format!("trigger {how:?}"),
            Step::Hold { .. } | Step::NotItsPr { .. } => "hold".into(),
            Step::Complete { .. } => "complete".into(),
            Step::Merged => "merged".into(),
            Step::Closed => "closed".into(),
        };
        let just_fixed = RunFacts {
            pr_work_done_sha: Some(A.into()),
            pr_work_done_at: Some(Utc::now()),
            ..seen(A)
        };
        let reviewed = RunFacts {
            review_green_sha: Some(A.into()),
            ..seen(A)
        };
        let capped = RunFacts {
            ci_attempts: 2,
            ..seen(A)
        };
        let merged = PrFacts {
            merged: true,
            ..pr(CiState::Green)
        };
        let closed = PrFacts {
            closed: true,
            ..pr(CiState::Green)
        };
        let cancelled = PrFacts {
            rerun: Some(77),
            ..pr(failed())
        };
        let cases: Vec<(&str, RunFacts, PrFacts, Vec<OpenThread>, &str)> = vec![
            ("merged wins", seen(A), merged.clone(), vec![], "merged"),
            (
                "merged before it was ever seen open: not the run's work",
                RunFacts::default(),
                merged.clone(),
                vec![],
                "hold",
            ),
            (
                "closed before it was ever seen open",
                RunFacts::default(),
                closed.clone(),
                vec![],
                "hold",
            ),
            (
                "another branch's PR, even merged",
                RunFacts {
                    branch: Some("eagle/run-2".into()),
                    ..seen(A)
                },
                merged.clone(),
                vec![],
                "hold",
            ),
            (
                "a fork's branch with the run's name, even green and reviewed",
                RunFacts {
                    branch: Some("eagle/run-1".into()),
                    review_green_sha: Some(A.into()),
                    ..seen(A)
                },
                PrFacts {
                    head_repo: Some("attacker/app".into()),
                    ..pr(CiState::Green)
                },
                vec![],
                "hold",
            ),
            (
                "a deleted fork's branch",
                seen(A),
                PrFacts {
                    head_repo: None,
                    ..pr(CiState::Green)
                },
                vec![],
                "hold",
            ),
            (
                "the repository's name in another case is the repository",
                seen(A),
                PrFacts {
                    head_repo: Some("ACME/App".into()),
                    ..pr(CiState::Running)
                },
                vec![],
                "wait",
            ),
            (
                "the run's own branch",
                RunFacts {
                    branch: Some("eagle/run-1".into()),
                    ..seen(A)
                },
                merged,
                vec![],
                "merged",
            ),
            ("closed", seen(A), closed, vec![], "closed"),
            (
                "CI running: nothing",
                seen(A),
                pr(CiState::Running),
                vec![],
                "wait",
            ),
            (
                "a new head gets its grace",
                seen(B),
                pr(CiState::NeverRan),
                vec![],
                "wait",
            ),
            (
                "never ran after the grace: dispatch",
                seen(A),
                pr(CiState::NeverRan),
                vec![],
                "trigger Dispatch { workflow: \"ci.yml\", branch: \"eagle/run-1\" }",
            ),
            (
                "dispatched once per head",
                RunFacts {
                    ci_triggered_sha: Some(A.into()),
                    ..seen(A)
                },
                pr(CiState::NeverRan),
                vec![],
                "wait",
            ),
            (
                "failed: fix-ci",
                seen(A),
                pr(failed()),
                vec![],
                "fix_ci new=true",
            ),
            (
                "a fix-ci worker already asked for does not count again",
                RunFacts {
                    pr_work: Some(PrWork::FixCi),
                    ..seen(A)
                },
                pr(failed()),
                vec![],
                "fix_ci new=false",
            ),
            (
                "the fix has not reached GitHub yet",
                just_fixed.clone(),
                pr(failed()),
                vec![],
                "wait",
            ),
            (
                "past ci_attempts: the owner",
                capped,
                pr(failed()),
                vec![],
                "hold",
            ),
            (
                "cancelled: re-run, not fix",
                seen(A),
                cancelled,
                vec![],
                "trigger Rerun { run_id: 77 }",
            ),
            (
                "green, a thread open: fix-comments",
                seen(A),
                pr(CiState::Green),
                vec![thread()],
                "fix_comments new=true",
            ),
            (
                "answers not on GitHub yet",
                just_fixed,
                pr(CiState::Green),
                vec![thread()],
                "wait",
            ),
            (
                "green, nothing open: review",
                seen(A),
                pr(CiState::Green),
                vec![],
                "pr_review new=true",
            ),
            (
                "reviewed green on this head: complete",
                reviewed.clone(),
                pr(CiState::Green),
                vec![],
                "complete",
            ),
            (
                "a review of another head does not count",
                RunFacts {
                    review_green_sha: Some(B.into()),
                    ..seen(A)
                },
                pr(CiState::Green),
                vec![],
                "pr_review new=true",
            ),
            (
                "reviewed, but a thread opened since",
                reviewed,
                pr(CiState::Green),
                vec![thread()],
                "fix_comments new=true",
            ),
            (
                "its worker waits for answers: nothing else happens",
                RunFacts {
                    waiting: true,
                    pr_work: Some(PrWork::PrReview),
                    ..seen(A)
                },
                pr(CiState::Green),
                vec![],
                "answers",
            ),
            (
                "comments a person asked about stand, not overwritten by a review",
                RunFacts {
                    pr_work: Some(PrWork::FixComments),
                    ..seen(A)
                },
                pr(CiState::Green),
                vec![],
                "fix_comments new=false",
            ),
            (
                "... even while CI runs",
                RunFacts {
                    pr_work: Some(PrWork::FixComments),
                    ..seen(A)
                },
                pr(CiState::Running),
                vec![],
                "fix_comments new=false",
            ),
            (
                "... but a failing CI comes first",
                RunFacts {
                    pr_work: Some(PrWork::FixComments),
                    ..seen(A)
                },
                pr(failed()),
                vec![],
                "fix_ci new=true",
            ),
            (
                "past max_rounds: the owner",
                RunFacts {
                    pr_rounds: 5,
                    ..seen(A)
                },
                pr(CiState::Green),
                vec![],
                "hold",
            ),
            (
                "work already asked for is not a new round",
                RunFacts {
                    pr_rounds: 5,
                    pr_work: Some(PrWork::PrReview),
                    ..seen(A)
                },
                pr(CiState::Green),
                vec![],
                "pr_review new=false",
            ),
        ];
        for (what, run, pr, threads, want) in cases {
            assert_eq!(kind(&step(&run, &pr, &threads)), want, "{what}");
        }
    }

    #[test]
    fn no_workflow_to_dispatch_is_said() {
        let mut s = settings();
        s.ci_workflow = None;
        let step = next_step(&Facts {
            run: &seen(A),
            pr: &pr(CiState::NeverRan),
            open_threads: &[],
            settings: &s,
            repo: &s.repo,
            now: Utc::now(),
        });
        match step {
            Step::TriggerCi {
                how: Trigger::None,
                status,
            } => assert!(status.contains("github.ci_workflow is unset"), "{status}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn humans_are_told_from_bots_and_protocol_lines() {
        let s = settings();
        assert!(by_human(Some("alex"), "please fix", &s));
        assert!(!by_human(Some("Executor-Bot"), "done", &s));
        assert!(!by_human(Some("dependabot[bot]"), "bump", &s));
        assert!(!by_human(Some("alex"), "  [ACKNOWLEDGED: fixed]", &s));
        assert!(!by_human(None, "a deleted user", &s));
    }
}
