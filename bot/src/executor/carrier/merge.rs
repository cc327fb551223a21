//! `merge_pr`: Eagle merges only the run's own PR (its head a branch of
//! the repository itself, never a fork's, and the run's branch; its base
//! `github.base`), only at the approved head (the one Eagle's PR loop saw
//! when the request was made, which is what its approver was shown: a
//! request made before Eagle saw a head merges nothing, whatever commit it
//! names), only with the required checks green at that head and the
//! review of that head green (approved by someone with write access, and
//! no such reviewer's latest review asking for changes:
//! [`crate::integrations::github::trust`]); the merge call names that sha,
//! so a push since gives GitHub's 409, never a merge of unseen code. A
//! draft is marked ready for review first (GraphQL
//! `markPullRequestReadyForReview`), unless `github.drafts = "keep"`, which
//! refuses it. Otherwise it is refused, nothing is merged, and the run's
//! topic says why.
//!
//! The checks at the approved head ([`crate::integrations::github::MergeGate`]): failing
//! or absent, the merge is refused and the run's owner told, once; pending,
//! it waits (the topic is told once what for, and until when), at most
//! [`MERGEABLE_PATIENCE`] after the approval. GitHub's own refusal (405:
//! branch protection wants checks or reviews) is told to the owner once and
//! never tried again: the request is settled.

use chrono::{DateTime, Utc};

use super::{Carrier, MERGEABLE_PATIENCE, Outcome};
use crate::ground::text::{neutralize_mentions, one_line};
use crate::integrations::github::{
    Error as GitHubError, MergeGate, MergeMethod, MergeRefusal, MergeRequest, Review, Trusted,
    head_is_in, head_label, merge_gate,
};
use crate::policy::effect::{Carried, Effect};
use crate::store::{PrLink, Request, Run, short_sha};

impl Carrier {
    pub(super) async fn merge(&self, request: &Request, run: &Run) -> Outcome {
        let Some((client, settings)) = &self.github else {
            return Outcome::Refused(
                "Eagle did not merge: it has no [github] configured; merge the PR by hand".into(),
            );
        };
        let number = run
            .pr_number
            .or_else(|| PrLink::find(&request.body).map(|l| l.number))
            .filter(|n| *n > 0);
        let Some(number) = number else {
            return Outcome::Refused(format!("Eagle did not merge: run {} names no PR", run.id));
        };
        let asked = match Effect::parse(&request.action, &request.body) {
            Ok(Some(Effect::MergePr { sha })) => sha,
            Ok(_) => None,
            Err(why) => return Outcome::Refused(format!("Eagle did not merge: {why}")),
        };
        // Only in the run's repository (github.repo or one an executor
        // announced), whatever a worker's line named.
        let repo = match self.repo_of(settings, run).await {
            Ok((repo, _)) => repo,
            Err(why) => return Outcome::Refused(format!("Eagle did not merge: {why}")),
        };
        let number = number as u64;
        // Looked at first: a merge made before a crash is not made again,
        // and a PR that is not the run's is refused without spending a merge.
        let pull = match client.pull_request(&repo, number).await {
            Ok(pull) => pull,
            Err(error) => return classify(number, &error),
        };
        let done = |text: String, sha: &str| {
            Outcome::Carried(
                text,
                Carried {
                    sha: Some(sha.to_string()),
                    pr_number: Some(number),
                    url: Some(pull.html_url.clone()),
                    ..Carried::default()
                },
            )
        };
        // A fork's branch may carry the run's name: only a branch of the
        // repository itself is the run's (whatever was approved).
        if !head_is_in(&pull, &repo) {
            return Outcome::Refused(format!(
                "Eagle did not merge PR #{number}: its head is {}, not a branch of {repo}; \
                 Eagle merges no fork's PR",
                one_line(&head_label(&pull), 200)
            ));
        }
        if pull.merged {
            return done(format!("PR #{number} is merged"), &pull.head_sha);
        }
        let branch = run
            .branch_name
            .clone()
            .unwrap_or_else(|| format!("eagle/run-{}", run.id));
        if pull.head_ref != branch {
            return Outcome::Refused(format!(
                "Eagle did not merge PR #{number}: it is from the branch {}, not the run's own {branch}",
                one_line(&pull.head_ref, 100)
            ));
        }
        if pull.base_ref != settings.base {
            return Outcome::Refused(format!(
                "Eagle did not merge PR #{number}: it goes into {}, not into {} (github.base)",
                one_line(&pull.base_ref, 100),
                settings.base
            ));
        }
        let sha = match (asked.as_deref(), request.bound_sha.as_deref()) {
            (Some(asked), Some(seen)) if asked != seen => {
                return Outcome::Refused(format!(
                    "Eagle did not merge PR #{number}: the request names {} but the PR's head was {} \
                     when it was made",
                    short_sha(asked),
                    short_sha(seen)
                ));
            }
            (_, Some(seen)) => seen.to_string(),
            // A commit the request names is not enough: its approver was
            // shown no head (`crate::policy::effect::describe_merge`), so
            // nothing is merged, whatever the body says.
            (_, None) => {
                return Outcome::Refused(format!(
                    "Eagle did not merge PR #{number}: the request was made before Eagle saw the PR's head, \
                     so the approval is of no particular commit; ask again once the run is in pr"
                ));
            }
        };
        if pull.head_sha != sha {
            // The owner's `!merge` named a head they were shown: they are
            // shown the new one, which their next `!merge` merges.
            if request.by_command() {
                return Outcome::Moved(
                    format!(
                        "Eagle did not merge PR #{number}: its head moved from {} to {} since                          Eagle named it to you; `!merge {}` merges it at {}",
                        short_sha(&sha),
                        short_sha(&pull.head_sha),
                        run.id,
                        short_sha(&pull.head_sha)
                    ),
                    pull.head_sha.clone(),
                );
            }
            return Outcome::Refused(format!(
                "Eagle did not merge PR #{number}: its head moved from {} to {} since the request",
                short_sha(&sha),
                short_sha(&pull.head_sha)
            ));
        }
        // Drafts stay drafts when the profile says so: nothing is spent.
        if pull.draft && settings.keep_drafts {
            return Outcome::Refused(format!(
                "Eagle did not merge PR #{number}: it is a draft, and github.drafts = \"keep\" \
                 leaves drafts as they are; mark it ready for review on GitHub, then ask again"
            ));
        }
        let decided = request.decided_at.unwrap_or(request.created_at);
        let waited = (crate::store::now() - decided).to_std().unwrap_or_default();
        let gate = match gate_at(client, &repo, &sha, &settings.required_checks).await {
            Ok(gate) => gate,
            Err(error) => return classify(number, &error),
        };
        if let Some(outcome) = gated(number, &sha, gate, decided, waited) {
            return outcome;
        }
        let reviews = match client.reviews(&repo, number).await {
            Ok(reviews) => reviews,
            Err(error) => return classify(number, &error),
        };
        if let Err(why) = review_green(&reviews, &sha, &settings.trusted) {
            return Outcome::Refused(format!("Eagle did not merge PR #{number}: {why}"));
        }
        if pull.mergeable.is_none() && waited < MERGEABLE_PATIENCE {
            return Outcome::Later("GitHub has not computed whether it can be merged".into());
        }
        // A draft cannot be merged (GitHub's 405): approving the merge of
        // one means "mark it ready, then merge", at the head checked above;
        // the merge call below is bound to that same sha.
        if pull.draft {
            match client.mark_ready_for_review(&pull.node_id).await {
                Ok(false) => {
                    tracing::info!(
                        run = run.id,
                        pr = number,
                        "marked the draft PR ready for review"
                    )
                }
                Ok(true) => {
                    return Outcome::Refused(format!(
                        "Eagle did not merge PR #{number}: GitHub still shows it as a draft after \
                         it was marked ready for review"
                    ));
                }
                Err(error) => return classify(number, &error),
            }
        }
        let method = match settings.merge_method.as_str() {
            "merge" => MergeMethod::Merge,
            "rebase" => MergeMethod::Rebase,
            _ => MergeMethod::Squash,
        };
        match client
            .merge(&repo, number, &MergeRequest::new(&sha, method))
            .await
        {
            Ok(merged) if merged.merged => done(
                format!(
                    "Eagle {}merged PR #{number} at {}",
                    if pull.draft {
                        "marked the draft ready for review and "
                    } else {
                        ""
                    },
                    short_sha(&sha)
                ),
                &sha,
            ),
            Ok(merged) => Outcome::Refused(format!(
                "Eagle did not merge PR #{number}: GitHub says {}",
                one_line(&merged.message, 200)
            )),
            Err(error) => classify(number, &error),
        }
    }
}

/// The merge gate at one commit.
async fn gate_at(
    client: &crate::integrations::github::GitHub,
    repo: &crate::integrations::github::Repo,
    sha: &str,
    required: &[String],
) -> Result<MergeGate, GitHubError> {
    let checks = client.check_runs(repo, sha).await?;
    let status = client.combined_status(repo, sha).await?;
    let runs = client.workflow_runs(repo, sha).await?;
    Ok(merge_gate(&checks, &status, &runs, required))
}

/// What the checks at the approved head mean for the merge: `None` goes
/// ahead; failing or absent checks refuse it and tell the owner; pending
/// ones wait (said once, with until when), at most [`MERGEABLE_PATIENCE`]
/// after the approval at `decided`.
fn gated(
    number: u64,
    sha: &str,
    gate: MergeGate,
    decided: DateTime<Utc>,
    waited: std::time::Duration,
) -> Option<Outcome> {
    let short = short_sha(sha);
    let list = |names: &[String]| one_line(&names.join(", "), 200);
    match gate {
        MergeGate::Green => None,
        MergeGate::Failing { failed } => Some(Outcome::Blocked(format!(
            "Eagle did not merge PR #{number}: checks failed at the approved head {short}: {}",
            list(&failed)
        ))),
        MergeGate::Absent { missing } if missing.is_empty() => Some(Outcome::Blocked(format!(
            "Eagle did not merge PR #{number}: no check ran at the approved head {short}; \
             Eagle merges only with checks green there"
        ))),
        MergeGate::Absent { missing } => Some(Outcome::Blocked(format!(
            "Eagle did not merge PR #{number}: the required check(s) {} never reported at the \
             approved head {short}",
            list(&missing)
        ))),
        MergeGate::Pending { waiting } if waited < MERGEABLE_PATIENCE => {
            let until =
                decided + chrono::TimeDelta::from_std(MERGEABLE_PATIENCE).unwrap_or_default();
            Some(Outcome::Waits(format!(
                "Eagle waits to merge PR #{number}: the checks at the approved head {short} are \
                 not done ({}); it merges once they are green there, and refuses if they are \
                 not by {} UTC",
                list(&waiting),
                until.format("%Y-%m-%d %H:%M:%S")
            )))
        }
        MergeGate::Pending { waiting } => Some(Outcome::Blocked(format!(
            "Eagle did not merge PR #{number}: {} at the approved head {short} did not finish \
             within {} of the approval",
            list(&waiting),
            humantime::format_duration(MERGEABLE_PATIENCE)
        ))),
    }
}

/// The review of `sha` is green: the latest review of someone `trusted`
/// (write access, or named in `github.trusted_logins`) approves that
/// commit, and no trusted reviewer's latest review asks for changes.
/// Anyone else's review, approving or not, counts for nothing.
pub(super) fn review_green(reviews: &[Review], sha: &str, trusted: &Trusted) -> Result<(), String> {
    let mut latest: Vec<(&str, &Review)> = Vec::new();
    let mut outsiders: Vec<&str> = Vec::new();
    for review in reviews {
        if !trusted.counts(review.author.as_deref(), review.association.as_deref()) {
            if review.state == "APPROVED" {
                let who = review.author.as_deref().unwrap_or("a deleted user");
                if !outsiders.contains(&who) {
                    outsiders.push(who);
                }
            }
            continue;
        }
        // Comments and pending reviews do not change a reviewer's verdict.
        if !matches!(
            review.state.as_str(),
            "APPROVED" | "CHANGES_REQUESTED" | "DISMISSED"
        ) {
            continue;
        }
        let who = review.author.as_deref().unwrap_or("");
        match latest.iter_mut().find(|(w, _)| *w == who) {
            Some(slot) => slot.1 = review,
            None => latest.push((who, review)),
        }
    }
    if let Some((who, _)) = latest.iter().find(|(_, r)| r.state == "CHANGES_REQUESTED") {
        return Err(format!(
            "{} asked for changes",
            if who.is_empty() { "a reviewer" } else { who }
        ));
    }
    let approved = latest
        .iter()
        .any(|(_, r)| r.state == "APPROVED" && r.commit_id.as_deref() == Some(sha));
    if !approved {
        let ignored = if outsiders.is_empty() {
            String::new()
        } else {
            format!(
                " (approvals by {} do not count: no write access)",
                neutralize_mentions(&one_line(&outsiders.join(", "), 100))
            )
        };
        return Err(format!(
            "no review by someone with write access approves {}{ignored}",
            short_sha(sha)
        ));
    }
    Ok(())
}

/// A GitHub error while merging: transient ones wait for a later sweep;
/// the rest are recorded. GitHub's refusal of the merge itself (405, its
/// branch protection above all) is told to the owner, once, and never
/// tried again: asking again would get the same answer.
fn classify(number: u64, error: &GitHubError) -> Outcome {
    match error {
        GitHubError::MergeRefused {
            reason: MergeRefusal::NotMergeable,
            ..
        } => Outcome::Blocked(format!(
            "Eagle did not merge PR #{number}: GitHub says it is not mergeable (a conflict?)"
        )),
        GitHubError::MergeRefused {
            reason: MergeRefusal::HeadChanged,
            ..
        } => Outcome::Refused(format!(
            "Eagle did not merge PR #{number}: {}",
            MergeRefusal::HeadChanged
        )),
        GitHubError::MergeRefused {
            reason: reason @ (MergeRefusal::RequiredCheck(_) | MergeRefusal::RequiredReviews),
            ..
        } => Outcome::Blocked(format!(
            "Eagle did not merge PR #{number}: GitHub's branch protection refused it: {reason}"
        )),
        GitHubError::MergeRefused { reason, .. } => Outcome::Blocked(format!(
            "Eagle did not merge PR #{number}: GitHub refused it: {}",
            one_line(&reason.to_string(), 300)
        )),
        error if error.is_transient() || error.retry_after().is_some() => {
            Outcome::Later(error.to_string())
        }
        error => Outcome::Refused(format!(
            "Eagle did not merge PR #{number}: {}",
            one_line(&error.to_string(), 300)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "1111111111111111111111111111111111111111";
    const OLD: &str = "2222222222222222222222222222222222222222";

    fn review(who: &str, state: &str, sha: &str) -> Review {
        by(who, "MEMBER", state, sha)
    }

    fn by(who: &str, association: &str, state: &str, sha: &str) -> Review {
        Review {
            id: 1,
            author: Some(who.into()),
            association: Some(association.into()),
            state: state.into(),
            body: String::new(),
            commit_id: Some(sha.into()),
            submitted_at: None,
        }
    }

    fn green(reviews: &[Review]) -> Result<(), String> {
        review_green(reviews, SHA, &Trusted::default())
    }

    #[test]
    fn the_review_of_the_head_must_be_green() {
        assert!(green(&[review("a", "APPROVED", SHA)]).is_ok());
        assert!(green(&[review("a", "APPROVED", OLD)]).is_err());
        assert!(green(&[]).is_err());
        let changes = [
            review("a", "APPROVED", SHA),
            review("b", "CHANGES_REQUESTED", OLD),
        ];
        assert!(green(&changes).unwrap_err().contains("b asked"));
        let changed_mind = [
            review("b", "CHANGES_REQUESTED", OLD),
            review("b", "APPROVED", SHA),
            review("b", "COMMENTED", SHA),
        ];
        assert!(green(&changed_mind).is_ok());
    }

    #[test]
    fn only_reviews_of_people_with_write_access_count() {
        // An outsider's approval is no approval, and says so.
        let outsiders = [
            by("mallory", "NONE", "APPROVED", SHA),
            by("eve", "CONTRIBUTOR", "APPROVED", SHA),
        ];
        let why = green(&outsiders).unwrap_err();
        assert!(
            why.contains("no review by someone with write access approves 1111111")
                && why.contains("approvals by mallory, eve do not count"),
            "{why}"
        );
        // An outsider asking for changes blocks nothing.
        let blocked_by_nobody = [
            by("alex", "OWNER", "APPROVED", SHA),
            by(
                "mallory",
                "FIRST_TIME_CONTRIBUTOR",
                "CHANGES_REQUESTED",
                SHA,
            ),
        ];
        assert!(green(&blocked_by_nobody).is_ok());
        // A collaborator's request for changes does.
        let blocked = [
            by("alex", "OWNER", "APPROVED", SHA),
            by("sam", "COLLABORATOR", "CHANGES_REQUESTED", SHA),
        ];
        assert!(
            green(&blocked)
                .unwrap_err()
                .contains("sam asked for changes")
        );
        // A login the profile trusts counts, whatever GitHub calls it.
        let named = [by("outside-reviewer", "NONE", "APPROVED", SHA)];
        assert!(review_green(&named, SHA, &Trusted::new(["Outside-Reviewer"])).is_ok());
        assert!(green(&named).is_err());
    }

    #[test]
    fn checks_at_the_approved_head_refuse_wait_or_let_through() {
        let decided: DateTime<Utc> = "2026-01-02T03:04:05Z".parse().unwrap();
        let soon = std::time::Duration::from_secs(60);
        let late = MERGEABLE_PATIENCE + soon;
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let kind = |o: Option<Outcome>| match o {
            None => "merge".to_string(),
            Some(Outcome::Blocked(text)) => format!("blocked: {text}"),
            Some(Outcome::Waits(text)) => format!("waits: {text}"),
            Some(other) => format!("{other:?}"),
        };
        let cases = [
            (MergeGate::Green, soon, "merge"),
            (
                MergeGate::Failing {
                    failed: names(&["CI"]),
                },
                soon,
                "blocked: Eagle did not merge PR #7: checks failed at the approved head 1111111: CI",
            ),
            (
                MergeGate::Absent {
                    missing: names(&["CI"]),
                },
                soon,
                "blocked: Eagle did not merge PR #7: the required check(s) CI never reported at \
                 the approved head 1111111",
            ),
            (
                MergeGate::Absent { missing: vec![] },
                soon,
                "blocked: Eagle did not merge PR #7: no check ran at the approved head 1111111; \
                 Eagle merges only with checks green there",
            ),
            (
                MergeGate::Pending {
                    waiting: names(&["CI"]),
                },
                soon,
                "waits: Eagle waits to merge PR #7: the checks at the approved head 1111111 are \
                 not done (CI); it merges once they are green there, and refuses if they are not \
                 by 2026-01-02 03:14:05 UTC",
            ),
            (
                MergeGate::Pending {
                    waiting: names(&["CI", "lint"]),
                },
                late,
                "blocked: Eagle did not merge PR #7: CI, lint at the approved head 1111111 did \
                 not finish within 10m of the approval",
            ),
        ];
        for (gate, waited, want) in cases {
            assert_eq!(
                kind(gated(7, SHA, gate.clone(), decided, waited)),
                want,
                "{gate:?}"
            );
        }
    }

    #[test]
    fn github_refusing_the_merge_is_told_once_and_not_tried_again() {
        let refused = |reason| GitHubError::MergeRefused {
            what: "PUT /repos/acme/app/pulls/7/merge".into(),
            reason,
        };
        for reason in [
            MergeRefusal::RequiredCheck(Some("CI".into())),
            MergeRefusal::RequiredReviews,
        ] {
            match classify(7, &refused(reason)) {
                Outcome::Blocked(text) => assert!(
                    text.starts_with(
                        "Eagle did not merge PR #7: GitHub's branch protection refused it"
                    ),
                    "{text}"
                ),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            classify(7, &refused(MergeRefusal::Other("new".into()))),
            Outcome::Blocked(_)
        ));
        assert!(matches!(
            classify(7, &refused(MergeRefusal::HeadChanged)),
            Outcome::Refused(_)
        ));
    }
}
