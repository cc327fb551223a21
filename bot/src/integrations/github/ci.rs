//! The CI summary of a commit (pure): check runs, commit statuses and
//! workflow runs, and the checks a profile requires, become one
//! [`CiState`] the PR loop branches on.
//!
//! Rules, in order:
//! 1. nothing at all (no check run, no workflow run, no status) →
//!    [`CiState::NeverRan`]: CI must be started (a workflow dispatch; a
//!    re-run would replay an old commit);
//! 2. anything unfinished (a check run or the latest run of a workflow not
//!    completed, a pending status) or a required check not there yet →
//!    [`CiState::Running`]: the failures are reported once everything is in,
//!    so a fix-ci worker sees them all;
//! 3. a failing conclusion (`failure`, `timed_out`, `cancelled`,
//!    `action_required`, `startup_failure`, `stale`, or one this client does
//!    not know) or a status `failure`/`error` → [`CiState::Failed`];
//! 4. otherwise [`CiState::Green`] (`neutral` and `skipped` pass).
//!
//! Required checks are matched by exact name against check run names and
//! status contexts, as branch protection matches them. The combined status'
//! own `state` is not used: it says `pending` when there are no statuses at
//! all (the case of Actions-only repositories).

use std::collections::{BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use crate::integrations::github::types::{
    CheckRuns, CombinedStatus, Conclusion, RunStatus, StatusState, WorkflowRun, WorkflowRuns,
};

/// What CI says about a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CiState {
    /// Something is queued or running, or a required check has not
    /// appeared yet: nothing to do this tick.
    Running,
    /// Done, and these checks (check run names, status contexts, workflow
    /// names) failed.
    Failed {
        /// The failed checks, each once, in the order found.
        failed: Vec<String>,
    },
    /// Done, and everything passed.
    Green,
    /// No CI ran on the commit at all.
    NeverRan,
}

/// Summarises CI for one commit (see the module documentation).
pub fn summarize(
    checks: &CheckRuns,
    status: &CombinedStatus,
    runs: &WorkflowRuns,
    required: &[String],
) -> CiState {
    let nothing = |total: u64, listed: usize| total == 0 && listed == 0;
    if nothing(checks.total_count, checks.check_runs.len())
        && nothing(runs.total_count, runs.workflow_runs.len())
        && nothing(status.total_count, status.statuses.len())
    {
        return CiState::NeverRan;
    }
    let latest_runs = latest_per_workflow(&runs.workflow_runs);
    let present: HashSet<&str> = checks
        .check_runs
        .iter()
        .map(|c| c.name.as_str())
        .chain(status.statuses.iter().map(|s| s.context.as_str()))
        .collect();
    let unfinished = checks
        .check_runs
        .iter()
        .any(|c| c.status != RunStatus::Completed)
        || status
            .statuses
            .iter()
            .any(|s| s.state == StatusState::Pending)
        || latest_runs.iter().any(|r| r.status != RunStatus::Completed);
    let missing = required.iter().any(|name| !present.contains(name.as_str()));
    if unfinished || missing {
        return CiState::Running;
    }

    let mut failed: Vec<String> = Vec::new();
    let mut failed_suites: BTreeSet<u64> = BTreeSet::new();
    let mut add = |name: &str| {
        if !failed.iter().any(|f| f == name) {
            failed.push(name.to_owned());
        }
    };
    for c in &checks.check_runs {
        if !c.conclusion.is_some_and(Conclusion::is_passing) {
            add(&c.name);
            failed_suites.extend(c.check_suite_id);
        }
    }
    for s in &status.statuses {
        if s.state != StatusState::Success {
            add(&s.context);
        }
    }
    for r in latest_runs {
        let passing = r.conclusion.is_some_and(Conclusion::is_passing);
        // A failed job already names the failure; the workflow is named only
        // when none of its jobs is (it failed to start, say).
        let named = r.check_suite_id.is_some_and(|s| failed_suites.contains(&s));
        if !passing && !named {
            let name = r
                .name
                .clone()
                .unwrap_or_else(|| format!("workflow run {}", r.id));
            add(&name);
        }
    }
    if failed.is_empty() {
        CiState::Green
    } else {
        CiState::Failed { failed }
    }
}

/// What the checks at an approved head say about merging it (pure). Where
/// [`summarize`] waits for a required check that has not appeared (the PR
/// loop polls again), a merge tells a check that is *absent* (everything
/// else at the head is done, and it is not there) from one still to come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeGate {
    /// Everything done and passing, every required check among it.
    Green,
    /// Something is not done yet (these check runs, statuses or workflows;
    /// a required check not there yet is named too): wait.
    Pending {
        /// What is not done, each once.
        waiting: Vec<String>,
    },
    /// Done, and these failed: refuse.
    Failing {
        /// The failed checks.
        failed: Vec<String>,
    },
    /// Done, and these required checks never reported at the head (all of
    /// them when nothing ran; empty when nothing ran and nothing is
    /// required): refuse.
    Absent {
        /// The missing required checks.
        missing: Vec<String>,
    },
}

/// The merge gate at one commit (see [`MergeGate`]).
pub fn merge_gate(
    checks: &CheckRuns,
    status: &CombinedStatus,
    runs: &WorkflowRuns,
    required: &[String],
) -> MergeGate {
    let present: HashSet<&str> = checks
        .check_runs
        .iter()
        .map(|c| c.name.as_str())
        .chain(status.statuses.iter().map(|s| s.context.as_str()))
        .collect();
    let missing: Vec<String> = required
        .iter()
        .filter(|name| !present.contains(name.as_str()))
        .cloned()
        .collect();
    match summarize(checks, status, runs, &[]) {
        CiState::Green if missing.is_empty() => MergeGate::Green,
        CiState::Green | CiState::NeverRan => MergeGate::Absent { missing },
        CiState::Failed { failed } => MergeGate::Failing { failed },
        CiState::Running => {
            let mut waiting: Vec<String> = Vec::new();
            let mut add = |name: &str| {
                if !waiting.iter().any(|w| w == name) {
                    waiting.push(name.to_owned());
                }
            };
            for c in &checks.check_runs {
                if c.status != RunStatus::Completed {
                    add(&c.name);
                }
            }
            for s in &status.statuses {
                if s.state == StatusState::Pending {
                    add(&s.context);
                }
            }
            for r in latest_per_workflow(&runs.workflow_runs) {
                if r.status != RunStatus::Completed {
                    add(&r
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("workflow run {}", r.id)));
                }
            }
            for name in &missing {
                add(name);
            }
            MergeGate::Pending { waiting }
        }
    }
}

/// The newest run of each workflow (GitHub lists newest first): an old
/// failed run that a later one replaced does not count.
fn latest_per_workflow(runs: &[WorkflowRun]) -> Vec<&WorkflowRun> {
    let mut seen = HashSet::new();
    let mut sorted: Vec<&WorkflowRun> = runs.iter().collect();
    sorted.sort_by_key(|r| std::cmp::Reverse(r.id));
    sorted
        .into_iter()
        .filter(|r| seen.insert(r.workflow_id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrations::github::types::{CheckRun, CommitStatus};

    /// A check run `name:status[:conclusion][@suite]`, e.g. `build:completed:success@1`.
    fn check(spec: &str) -> CheckRun {
        let (spec, suite) = match spec.split_once('@') {
            Some((s, suite)) => (s, suite.parse().ok()),
            None => (spec, None),
        };
        let mut parts = spec.split(':');
        let name = parts.next().unwrap_or_default();
        let status = word::<RunStatus>(parts.next().unwrap_or_default());
        let conclusion = parts.next().map(word::<Conclusion>);
        CheckRun {
            id: 1,
            name: name.into(),
            head_sha: "abc".into(),
            status,
            conclusion,
            check_suite_id: suite,
            app_slug: None,
            details_url: None,
        }
    }

    /// A workflow run `id:workflow:name:status[:conclusion][@suite]`.
    fn run(spec: &str) -> WorkflowRun {
        let (spec, suite) = match spec.split_once('@') {
            Some((s, suite)) => (s, suite.parse().ok()),
            None => (spec, None),
        };
        let parts: Vec<&str> = spec.split(':').collect();
        WorkflowRun {
            id: parts[0].parse().unwrap(),
            workflow_id: parts[1].parse().unwrap(),
            name: Some(parts[2].into()),
            head_sha: "abc".into(),
            head_branch: None,
            event: "pull_request".into(),
            status: word(parts[3]),
            conclusion: parts.get(4).map(|c| word(c)),
            check_suite_id: suite,
            run_attempt: Some(1),
            html_url: None,
        }
    }

    fn status(spec: &str) -> CommitStatus {
        let (context, state) = spec.split_once(':').unwrap();
        CommitStatus {
            context: context.into(),
            state: word(state),
            target_url: None,
            description: None,
        }
    }

    fn word<T: serde::de::DeserializeOwned>(w: &str) -> T {
        serde_json::from_value(serde_json::Value::String(w.into())).unwrap()
    }

    fn failed(names: &[&str]) -> CiState {
        CiState::Failed {
            failed: names.iter().map(|n| n.to_string()).collect(),
        }
    }

    #[test]
    fn ci_states() {
        use CiState::*;
        #[allow(clippy::type_complexity)]
        let cases: &[(&str, &[&str], &[&str], &[&str], &[&str], CiState)] = &[
            // (name, check runs, statuses, workflow runs, required, expected)
            ("nothing at all", &[], &[], &[], &[], NeverRan),
            (
                "nothing, though required",
                &[],
                &[],
                &[],
                &["build"],
                NeverRan,
            ),
            ("queued", &["build:queued"], &[], &[], &[], Running),
            (
                "in progress",
                &["build:in_progress"],
                &[],
                &[],
                &[],
                Running,
            ),
            (
                "waiting (actions)",
                &["build:waiting"],
                &[],
                &[],
                &[],
                Running,
            ),
            (
                "an unknown status",
                &["build:teleporting"],
                &[],
                &[],
                &[],
                Running,
            ),
            ("green", &["build:completed:success"], &[], &[], &[], Green),
            (
                "neutral and skipped pass",
                &["lint:completed:neutral", "docs:completed:skipped"],
                &[],
                &[],
                &[],
                Green,
            ),
            (
                "failure",
                &["build:completed:failure"],
                &[],
                &[],
                &[],
                failed(&["build"]),
            ),
            (
                "timed out",
                &["build:completed:timed_out"],
                &[],
                &[],
                &[],
                failed(&["build"]),
            ),
            (
                "cancelled",
                &["build:completed:cancelled"],
                &[],
                &[],
                &[],
                failed(&["build"]),
            ),
            (
                "action required",
                &["build:completed:action_required"],
                &[],
                &[],
                &[],
                failed(&["build"]),
            ),
            (
                "startup failure",
                &["build:completed:startup_failure"],
                &[],
                &[],
                &[],
                failed(&["build"]),
            ),
            (
                "stale",
                &["build:completed:stale"],
                &[],
                &[],
                &[],
                failed(&["build"]),
            ),
            (
                "an unknown conclusion fails",
                &["build:completed:exploded"],
                &[],
                &[],
                &[],
                failed(&["build"]),
            ),
            (
                "a failure waits for the rest",
                &["build:completed:failure", "test:in_progress"],
                &[],
                &[],
                &[],
                Running,
            ),
            (
                "a required check not there yet",
                &["build:completed:success"],
                &[],
                &[],
                &["macOS UI Tests"],
                Running,
            ),
            (
                "a required check green",
                &[
                    "build:completed:success",
                    "macOS UI Tests:completed:success",
                ],
                &[],
                &[],
                &["macOS UI Tests"],
                Green,
            ),
            (
                "a required check met by a status",
                &[],
                &["ci/circleci:success"],
                &[],
                &["ci/circleci"],
                Green,
            ),
            (
                "a pending status",
                &[],
                &["ci/circleci:pending"],
                &[],
                &[],
                Running,
            ),
            (
                "a failing status",
                &["build:completed:success"],
                &["ci/circleci:failure"],
                &[],
                &[],
                failed(&["ci/circleci"]),
            ),
            (
                "an errored status",
                &[],
                &["deploy:error"],
                &[],
                &[],
                failed(&["deploy"]),
            ),
            (
                "a queued workflow run before its jobs",
                &[],
                &[],
                &["1:7:CI:queued"],
                &[],
                Running,
            ),
            (
                "a workflow that failed to start",
                &[],
                &[],
                &["1:7:CI:completed:startup_failure"],
                &[],
                failed(&["CI"]),
            ),
            (
                "a failed job names the failure, not its workflow too",
                &["build:completed:failure@5"],
                &[],
                &["1:7:CI:completed:failure@5"],
                &[],
                failed(&["build"]),
            ),
            (
                "an old failed run replaced by a green one",
                &["build:completed:success@6"],
                &[],
                &["1:7:CI:completed:failure@5", "2:7:CI:completed:success@6"],
                &[],
                Green,
            ),
            (
                "every failure once, in order",
                &[
                    "build:completed:failure",
                    "test:completed:timed_out",
                    "build:completed:failure",
                ],
                &["ci/x:failure"],
                &[],
                &[],
                failed(&["build", "test", "ci/x"]),
            ),
        ];
        for (name, checks, statuses, runs, required, expected) in cases {
            let (checks, statuses, runs, required) = world(checks, statuses, runs, required);
            assert_eq!(
                summarize(&checks, &statuses, &runs, &required),
                *expected,
                "{name}"
            );
        }
    }

    fn world(
        checks: &[&str],
        statuses: &[&str],
        runs: &[&str],
        required: &[&str],
    ) -> (CheckRuns, CombinedStatus, WorkflowRuns, Vec<String>) {
        (
            CheckRuns {
                total_count: checks.len() as u64,
                check_runs: checks.iter().map(|c| check(c)).collect(),
            },
            CombinedStatus {
                state: "pending".into(),
                sha: "abc".into(),
                total_count: statuses.len() as u64,
                statuses: statuses.iter().map(|s| status(s)).collect(),
            },
            WorkflowRuns {
                total_count: runs.len() as u64,
                workflow_runs: runs.iter().map(|r| run(r)).collect(),
            },
            required.iter().map(|r| r.to_string()).collect(),
        )
    }

    #[test]
    fn the_merge_gate_tells_absent_from_pending() {
        use MergeGate::*;
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        #[allow(clippy::type_complexity)]
        let cases: &[(&str, &[&str], &[&str], &[&str], &[&str], MergeGate)] = &[
            ("green", &["CI:completed:success"], &[], &[], &["CI"], Green),
            (
                "failing",
                &["CI:completed:failure"],
                &[],
                &[],
                &["CI"],
                Failing {
                    failed: names(&["CI"]),
                },
            ),
            (
                "another check failing fails it too",
                &["CI:completed:success", "lint:completed:failure"],
                &[],
                &[],
                &["CI"],
                Failing {
                    failed: names(&["lint"]),
                },
            ),
            (
                "pending",
                &["CI:in_progress"],
                &[],
                &[],
                &["CI"],
                Pending {
                    waiting: names(&["CI"]),
                },
            ),
            (
                "a required check may still come while others run",
                &["lint:queued"],
                &["ci/x:pending"],
                &["1:7:Build:in_progress"],
                &["CI"],
                Pending {
                    waiting: names(&["lint", "ci/x", "Build", "CI"]),
                },
            ),
            (
                "absent: everything else done",
                &["lint:completed:success"],
                &[],
                &[],
                &["CI"],
                Absent {
                    missing: names(&["CI"]),
                },
            ),
            (
                "nothing ran at all",
                &[],
                &[],
                &[],
                &["CI"],
                Absent {
                    missing: names(&["CI"]),
                },
            ),
            (
                "nothing ran, nothing required",
                &[],
                &[],
                &[],
                &[],
                Absent { missing: vec![] },
            ),
            (
                "a status meets a requirement",
                &[],
                &["CI:success"],
                &[],
                &["CI"],
                Green,
            ),
        ];
        for (name, checks, statuses, runs, required, expected) in cases {
            let (checks, statuses, runs, required) = world(checks, statuses, runs, required);
            assert_eq!(
                merge_gate(&checks, &statuses, &runs, &required),
                *expected,
                "{name}"
            );
        }
    }
}
