//! The REST calls Eagle makes, one method each (REST `2022-11-28`; see
//! `shared/github/NOTES.md` §2 for the endpoints and §5 for the token
//! permissions each needs, which a 403 names). Every GET is conditional and
//! lists are read to their last page.

use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::integrations::github::client::GitHub;
use crate::integrations::github::error::{parse, status_error};
use crate::integrations::github::types::{
    CheckRuns, CombinedStatus, IssueComment, MergeRequest, Merged, PullRequest, Repo, Review,
    ReviewComment, WorkflowRuns,
};
use crate::integrations::github::{Error, classify_merge_refusal};

/// Fine-grained token permissions, as 403 errors name them.
mod permission {
    pub const PULLS_READ: &str = "Pull requests: read";
    pub const CHECKS_READ: &str = "Checks: read";
    pub const STATUSES_READ: &str = "Commit statuses: read";
    pub const ACTIONS_READ: &str = "Actions: read";
    pub const ACTIONS_WRITE: &str = "Actions: write";
    pub const ISSUES_READ: &str = "Issues or Pull requests: read";
    pub const ISSUES_WRITE: &str = "Issues or Pull requests: write";
    pub const CONTENTS_WRITE: &str = "Contents: write";
}

/// The largest page GitHub serves.
const PER_PAGE: &str = "100";

/// At most this many `inputs` to a workflow dispatch.
const MAX_DISPATCH_INPUTS: usize = 25;

fn per_page() -> (&'static str, String) {
    ("per_page", PER_PAGE.to_owned())
}

/// A full page, and `since` when given (the comment lists).
fn paged_since(since: Option<DateTime<Utc>>) -> Vec<(&'static str, String)> {
    let mut query = vec![per_page()];
    query.extend(since.map(|t| ("since", iso(t))));
    query
}

fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

impl GitHub {
    /// A pull request: state, draft, merged, `mergeable` (maybe `None`),
    /// head and base, labels, ids.
    pub async fn pull_request(&self, repo: &Repo, number: u64) -> Result<PullRequest, Error> {
        let n = number.to_string();
        let url = self.rest_url(&["repos", repo.owner(), repo.name(), "pulls", &n], &[])?;
        self.get_json(url, permission::PULLS_READ).await
    }

    /// The check runs of a ref (a SHA, preferably: a branch moves), every
    /// page, the latest run of each name.
    pub async fn check_runs(&self, repo: &Repo, git_ref: &str) -> Result<CheckRuns, Error> {
        let url = self.rest_url(
            &[
                "repos",
                repo.owner(),
                repo.name(),
                "commits",
                git_ref,
                "check-runs",
            ],
            &[per_page()],
        )?;
        let pages: Vec<CheckRuns> = self.get_pages(url, permission::CHECKS_READ).await?;
        let mut all = CheckRuns::default();
        for page in pages {
            all.total_count = all.total_count.max(page.total_count);
            all.check_runs.extend(page.check_runs);
        }
        Ok(all)
    }

    /// The combined commit status of a ref, every page of `statuses`.
    pub async fn combined_status(
        &self,
        repo: &Repo,
        git_ref: &str,
    ) -> Result<CombinedStatus, Error> {
        let url = self.rest_url(
            &[
                "repos",
                repo.owner(),
                repo.name(),
                "commits",
                git_ref,
                "status",
            ],
            &[per_page()],
        )?;
        let pages: Vec<CombinedStatus> = self.get_pages(url, permission::STATUSES_READ).await?;
        let mut pages = pages.into_iter();
        let mut all = pages.next().unwrap_or_default();
        for page in pages {
            all.statuses.extend(page.statuses);
        }
        Ok(all)
    }

    /// The Actions workflow runs on a commit (`actions/runs?head_sha=`),
    /// every page, newest first.
    pub async fn workflow_runs(&self, repo: &Repo, head_sha: &str) -> Result<WorkflowRuns, Error> {
        let url = self.rest_url(
            &["repos", repo.owner(), repo.name(), "actions", "runs"],
            &[("head_sha", head_sha.to_owned()), per_page()],
        )?;
        let pages: Vec<WorkflowRuns> = self.get_pages(url, permission::ACTIONS_READ).await?;
        let mut all = WorkflowRuns::default();
        for page in pages {
            all.total_count = all.total_count.max(page.total_count);
            all.workflow_runs.extend(page.workflow_runs);
        }
        Ok(all)
    }

    /// Re-runs a whole workflow run. It replays the run's own commit, not
    /// the PR's new head: to test a new head, dispatch instead.
    pub async fn rerun_workflow_run(&self, repo: &Repo, run_id: u64) -> Result<(), Error> {
        let id = run_id.to_string();
        let url = self.rest_url(
            &[
                "repos",
                repo.owner(),
                repo.name(),
                "actions",
                "runs",
                &id,
                "rerun",
            ],
            &[],
        )?;
        let (what, answer) = self.send(Method::POST, url, None).await?;
        if answer.status.is_success() {
            Ok(())
        } else {
            Err(status_error(
                &what,
                answer.status.as_u16(),
                &answer.body,
                permission::ACTIONS_WRITE,
            ))
        }
    }

    /// Starts a workflow that has a `workflow_dispatch` trigger (by id or
    /// file name, e.g. `ci.yml`) on `git_ref` (a branch), with `inputs`.
    pub async fn dispatch_workflow(
        &self,
        repo: &Repo,
        workflow: &str,
        git_ref: &str,
        inputs: &Map<String, Value>,
    ) -> Result<(), Error> {
        if inputs.len() > MAX_DISPATCH_INPUTS {
            return Err(Error::InvalidInput(format!(
                "a workflow dispatch takes at most {MAX_DISPATCH_INPUTS} inputs, not {}",
                inputs.len()
            )));
        }
        let url = self.rest_url(
            &[
                "repos",
                repo.owner(),
                repo.name(),
                "actions",
                "workflows",
                workflow,
                "dispatches",
            ],
            &[],
        )?;
        let body = json!({"ref": git_ref, "inputs": inputs});
        let (what, answer) = self.send(Method::POST, url, Some(&body)).await?;
        if answer.status.is_success() {
            Ok(())
        } else {
            Err(status_error(
                &what,
                answer.status.as_u16(),
                &answer.body,
                permission::ACTIONS_WRITE,
            ))
        }
    }

    /// Adds labels to an issue or PR (keeping the others); returns every
    /// label now on it.
    pub async fn add_labels(
        &self,
        repo: &Repo,
        number: u64,
        labels: &[String],
    ) -> Result<Vec<String>, Error> {
        if labels.is_empty() || labels.iter().any(|l| l.trim().is_empty()) {
            return Err(Error::InvalidInput(
                "adding labels takes at least one non-empty name".into(),
            ));
        }
        let n = number.to_string();
        let url = self.rest_url(
            &["repos", repo.owner(), repo.name(), "issues", &n, "labels"],
            &[],
        )?;
        let body = json!({ "labels": labels });
        let (what, answer) = self.send(Method::POST, url, Some(&body)).await?;
        if !answer.status.is_success() {
            return Err(status_error(
                &what,
                answer.status.as_u16(),
                &answer.body,
                permission::ISSUES_WRITE,
            ));
        }
        #[derive(Deserialize)]
        struct Label {
            name: String,
        }
        let now: Vec<Label> = parse(&what, &answer.body)?;
        Ok(now.into_iter().map(|l| l.name).collect())
    }

    /// The conversation comments of an issue or PR, oldest first, made at
    /// or after `since` when given.
    pub async fn issue_comments(
        &self,
        repo: &Repo,
        number: u64,
        since: Option<DateTime<Utc>>,
    ) -> Result<Vec<IssueComment>, Error> {
        let n = number.to_string();
        let query = paged_since(since);
        let url = self.rest_url(
            &["repos", repo.owner(), repo.name(), "issues", &n, "comments"],
            &query,
        )?;
        let pages: Vec<Vec<IssueComment>> = self.get_pages(url, permission::ISSUES_READ).await?;
        Ok(pages.into_iter().flatten().collect())
    }

    /// Posts a conversation comment. Not idempotent: a caller that may
    /// repeat it (after a crash) should look for its own marker first.
    pub async fn create_issue_comment(
        &self,
        repo: &Repo,
        number: u64,
        body: &str,
    ) -> Result<IssueComment, Error> {
        if body.is_empty() {
            return Err(Error::InvalidInput("a comment needs a body".into()));
        }
        let n = number.to_string();
        let url = self.rest_url(
            &["repos", repo.owner(), repo.name(), "issues", &n, "comments"],
            &[],
        )?;
        let (what, answer) = self
            .send(Method::POST, url, Some(&json!({ "body": body })))
            .await?;
        if !answer.status.is_success() {
            return Err(status_error(
                &what,
                answer.status.as_u16(),
                &answer.body,
                permission::ISSUES_WRITE,
            ));
        }
        parse(&what, &answer.body)
    }

    /// The reviews of a PR, in the order they were made.
    pub async fn reviews(&self, repo: &Repo, number: u64) -> Result<Vec<Review>, Error> {
        let n = number.to_string();
        let url = self.rest_url(
            &["repos", repo.owner(), repo.name(), "pulls", &n, "reviews"],
            &[per_page()],
        )?;
        let pages: Vec<Vec<Review>> = self.get_pages(url, permission::PULLS_READ).await?;
        Ok(pages.into_iter().flatten().collect())
    }

    /// The review (diff) comments of a PR, oldest first, made at or after
    /// `since` when given. Whether their threads are resolved is GraphQL's
    /// ([`GitHub::review_threads`]).
    pub async fn review_comments(
        &self,
        repo: &Repo,
        number: u64,
        since: Option<DateTime<Utc>>,
    ) -> Result<Vec<ReviewComment>, Error> {
        let n = number.to_string();
        let query = paged_since(since);
        let url = self.rest_url(
            &["repos", repo.owner(), repo.name(), "pulls", &n, "comments"],
            &query,
        )?;
        let pages: Vec<Vec<ReviewComment>> = self.get_pages(url, permission::PULLS_READ).await?;
        Ok(pages.into_iter().flatten().collect())
    }

    /// Merges a PR, bound to `request.sha`: a head that moved gives
    /// [`crate::integrations::github::MergeRefusal::HeadChanged`], and every other refusal
    /// (405) is classified from its message.
    pub async fn merge(
        &self,
        repo: &Repo,
        number: u64,
        request: &MergeRequest,
    ) -> Result<Merged, Error> {
        if request.sha.trim().is_empty() {
            return Err(Error::InvalidInput("a merge must name the head sha".into()));
        }
        let n = number.to_string();
        let url = self.rest_url(
            &["repos", repo.owner(), repo.name(), "pulls", &n, "merge"],
            &[],
        )?;
        let body = serde_json::to_value(request).map_err(|e| Error::InvalidInput(e.to_string()))?;
        let (what, answer) = self.send(Method::PUT, url, Some(&body)).await?;
        match answer.status.as_u16() {
            200..=299 => parse(&what, &answer.body),
            status @ (405 | 409) => Err(Error::MergeRefused {
                what,
                reason: classify_merge_refusal(
                    status,
                    &crate::integrations::github::error::message_of(&answer.body),
                ),
            }),
            status => Err(status_error(
                &what,
                status,
                &answer.body,
                permission::CONTENTS_WRITE,
            )),
        }
    }

    /// Whether a PR was merged (204 yes, 404 no: GitHub answers 404 for a
    /// PR that does not exist too).
    pub async fn is_merged(&self, repo: &Repo, number: u64) -> Result<bool, Error> {
        let n = number.to_string();
        let url = self.rest_url(
            &["repos", repo.owner(), repo.name(), "pulls", &n, "merge"],
            &[],
        )?;
        let (what, answer) = self.send(Method::GET, url, None).await?;
        match answer.status.as_u16() {
            204 => Ok(true),
            404 => Ok(false),
            status => Err(status_error(
                &what,
                status,
                &answer.body,
                permission::PULLS_READ,
            )),
        }
    }
}
