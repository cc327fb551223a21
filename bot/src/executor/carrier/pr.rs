//! `open_draft_pr`: the run's draft PR from its own branch into
//! `github.base`, with the approved title and body. A PR already opened
//! from that branch (before a crash, or by an earlier request) is found
//! first and reported instead of a second one.

use super::{Carrier, Outcome};
use crate::ground::text::one_line;
use crate::integrations::github::{
    Error as GitHubError, NewPull, PrState, PullRequest, head_is_in,
};
use crate::policy::effect::{Carried, Effect};
use crate::store::{Request, Run};

impl Carrier {
    pub(super) async fn open_pr(&self, request: &Request, run: &Run) -> Outcome {
        let Some((client, settings)) = &self.github else {
            return Outcome::Refused(
                "Eagle did not open the PR: it has no [github] configured".into(),
            );
        };
        let (title, body) = match Effect::parse(&request.action, &request.body) {
            Ok(Some(Effect::OpenDraftPr { title, body })) => (title, body),
            Ok(_) => {
                return Outcome::Refused(
                    "Eagle did not open the PR: the request names no title and body".into(),
                );
            }
            Err(why) => return Outcome::Refused(format!("Eagle did not open the PR: {why}")),
        };
        let branch = run
            .branch_name
            .clone()
            .unwrap_or_else(|| format!("eagle/run-{}", run.id));
        // The run's repository (its task's), else github.repo.
        let (repo, base) = match self.repo_of(settings, run).await {
            Ok(found) => found,
            Err(why) => return Outcome::Refused(format!("Eagle did not open the PR: {why}")),
        };
        let opened = |pull: &PullRequest, text: String| {
            Outcome::Carried(
                text,
                Carried {
                    branch: Some(pull.head_ref.clone()),
                    pr_number: Some(pull.number),
                    url: Some(pull.html_url.clone()),
                    draft: Some(pull.draft),
                    ..Carried::default()
                },
            )
        };
        match client.pulls_from(&repo, &branch).await {
            Ok(pulls) => {
                // Only a branch of the repository itself: a fork's PR from
                // a branch of the same name is never taken for the run's.
                if let Some(pull) = pulls.iter().find(|p| {
                    p.head_ref == branch && p.state == PrState::Open && head_is_in(p, &repo)
                }) {
                    return opened(
                        pull,
                        format!(
                            "The run's PR #{} is open already: {}",
                            pull.number, pull.html_url
                        ),
                    );
                }
            }
            Err(error) => return github_error("open the PR", &error),
        }
        let new = NewPull {
            head: &branch,
            base: &base,
            title: &title,
            body: &body,
        };
        match client.create_draft_pull(&repo, &new).await {
            Ok(pull) => opened(
                &pull,
                format!(
                    "Eagle opened draft PR #{} from {branch} into {}: {}",
                    pull.number, base, pull.html_url
                ),
            ),
            Err(error) => github_error("open the PR", &error),
        }
    }
}

/// A GitHub error: transient ones wait for a later sweep, the rest refuse.
pub(super) fn github_error(what: &str, error: &GitHubError) -> Outcome {
    if error.is_transient() || error.retry_after().is_some() {
        Outcome::Later(error.to_string())
    } else {
        Outcome::Refused(format!(
            "Eagle did not {what}: {}",
            one_line(&error.to_string(), 300)
        ))
    }
}
