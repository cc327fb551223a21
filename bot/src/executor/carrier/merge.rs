//! `merge_pr`: Eagle merges only the run's own PR (its head branch is the
//! run's branch, its base is `github.base`), only at the approved head,
//! only with the required checks green at that head and the review of that
//! head green (approved, nobody's latest review asking for changes); the
//! merge call names that sha, so a push since gives GitHub's 409, never a
//! merge of unseen code. A draft is marked ready for review first (GraphQL
//! `markPullRequestReadyForReview`), unless `github.drafts = "keep"`, which
//! refuses it. Otherwise it is refused, nothing is merged, and the run's
//! topic says why.

use super::{Carrier, MERGEABLE_PATIENCE, Outcome};
use crate::ground::text::one_line;
use crate::integrations::github::{
    CiState, Error as GitHubError, MergeMethod, MergeRefusal, MergeRequest, Review, summarize,
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
        // Only in the profile's repository, whatever a worker's line named.
        if let Some(other) = run
            .pr_repo
            .as_deref()
            .filter(|r| !settings.repo.is_named(r))
        {
            return Outcome::Refused(format!(
                "Eagle did not merge: the run's PR is in {}, not in github.repo {}",
                one_line(other, 100),
                settings.repo
            ));
        }
        let repo = settings.repo.clone();
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
            (Some(sha), _) | (None, Some(sha)) => sha.to_string(),
            (None, None) => {
                return Outcome::Refused(format!(
                    "Eagle did not merge PR #{number}: the request was made before Eagle saw the PR's head, \
                     so the approval is of no particular commit; ask again once the run is in pr"
                ));
            }
        };
        if pull.head_sha != sha {
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
        let waited = request
            .decided_at
            .map(|at| (crate::store::now() - at).to_std().unwrap_or_default())
            .unwrap_or_default();
        let ci = match ci_at(client, &repo, &sha, &settings.required_checks).await {
            Ok(ci) => ci,
            Err(error) => return classify(number, &error),
        };
        match ci {
            CiState::Green => {}
            CiState::Running if waited < MERGEABLE_PATIENCE => {
                return Outcome::Later(format!("CI is still running at {}", short_sha(&sha)));
            }
            CiState::Running => {
                return Outcome::Refused(format!(
                    "Eagle did not merge PR #{number}: CI at {} did not finish (or a required check never appeared)",
                    short_sha(&sha)
                ));
            }
            CiState::Failed { failed } => {
                return Outcome::Refused(format!(
                    "Eagle did not merge PR #{number}: checks failed at {}: {}",
                    short_sha(&sha),
                    one_line(&failed.join(", "), 200)
                ));
            }
            CiState::NeverRan => {
                return Outcome::Refused(format!(
                    "Eagle did not merge PR #{number}: no check ran at {}; Eagle merges only with checks green",
                    short_sha(&sha)
                ));
            }
        }
        let reviews = match client.reviews(&repo, number).await {
            Ok(reviews) => reviews,
            Err(error) => return classify(number, &error),
        };
        if let Err(why) = review_green(&reviews, &sha) {
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

/// CI at one commit, as the PR loop sums it up.
async fn ci_at(
    client: &crate::integrations::github::GitHub,
    repo: &crate::integrations::github::Repo,
    sha: &str,
    required: &[String],
) -> Result<CiState, GitHubError> {
    let checks = client.check_runs(repo, sha).await?;
    let status = client.combined_status(repo, sha).await?;
    let runs = client.workflow_runs(repo, sha).await?;
    Ok(summarize(&checks, &status, &runs, required))
}

/// The review of `sha` is green: someone's latest review approves that
/// commit, and nobody's latest review asks for changes.
pub(super) fn review_green(reviews: &[Review], sha: &str) -> Result<(), String> {
    let mut latest: Vec<(&str, &Review)> = Vec::new();
    for review in reviews {
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
        return Err(format!("no review approves {}", short_sha(sha)));
    }
    Ok(())
}

/// A GitHub error while merging: transient ones wait for a later sweep;
/// the rest are recorded.
fn classify(number: u64, error: &GitHubError) -> Outcome {
    match error {
        GitHubError::MergeRefused {
            reason: MergeRefusal::NotMergeable,
            ..
        } => Outcome::Refused(format!(
            "Eagle did not merge PR #{number}: GitHub says it is not mergeable (a conflict?)"
        )),
        GitHubError::MergeRefused { reason, .. } => {
            Outcome::Refused(format!("Eagle did not merge PR #{number}: {reason}"))
        }
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
        Review {
            id: 1,
            author: Some(who.into()),
            state: state.into(),
            body: String::new(),
            commit_id: Some(sha.into()),
            submitted_at: None,
        }
    }

    #[test]
    fn the_review_of_the_head_must_be_green() {
        assert!(review_green(&[review("a", "APPROVED", SHA)], SHA).is_ok());
        assert!(review_green(&[review("a", "APPROVED", OLD)], SHA).is_err());
        assert!(review_green(&[], SHA).is_err());
        let changes = [
            review("a", "APPROVED", SHA),
            review("b", "CHANGES_REQUESTED", OLD),
        ];
        assert!(review_green(&changes, SHA).unwrap_err().contains("b asked"));
        let changed_mind = [
            review("b", "CHANGES_REQUESTED", OLD),
            review("b", "APPROVED", SHA),
            review("b", "COMMENTED", SHA),
        ];
        assert!(review_green(&changed_mind, SHA).is_ok());
    }
}
