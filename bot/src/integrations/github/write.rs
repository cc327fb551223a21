//! The writes Eagle makes for a worker's approved requests (and the reads
//! that make them happen once): opening the draft PR, finding a PR already
//! opened from a branch, replying in a review thread and reading a thread's
//! comments back, and the token's own login (`GET /user`).

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use crate::integrations::github::Error;
use crate::integrations::github::client::GitHub;
use crate::integrations::github::error::{parse, status_error};
use crate::integrations::github::types::{PullRequest, Repo};

const PULLS_READ: &str = "Pull requests: read";
const PULLS_WRITE: &str = "Pull requests: write";

/// What opening a PR needs.
#[derive(Debug, Clone)]
pub struct NewPull<'a> {
    /// The head branch (in the same repository).
    pub head: &'a str,
    /// The base branch.
    pub base: &'a str,
    pub title: &'a str,
    pub body: &'a str,
}

/// A comment made in a review thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadReply {
    /// Its web address.
    pub url: String,
}

/// One comment of a review thread, as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadCommentText {
    pub body: String,
    pub url: String,
}

const ADD_REPLY: &str = r#"
mutation AddReply($thread: ID!, $body: String!) {
  addPullRequestReviewThreadReply(input: {pullRequestReviewThreadId: $thread, body: $body}) {
    comment { url }
  }
}"#;

const MARK_READY: &str = r#"
mutation MarkReady($pull: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $pull}) {
    pullRequest { isDraft }
  }
}"#;

const THREAD_COMMENTS: &str = r#"
query ThreadComments($thread: ID!) {
  node(id: $thread) {
    ... on PullRequestReviewThread {
      comments(last: 100) { nodes { body url } }
    }
  }
}"#;

impl GitHub {
    /// Opens a draft PR from `pull.head` to `pull.base`. Not idempotent: a
    /// caller that may repeat it looks first ([`GitHub::pulls_from`]).
    pub async fn create_draft_pull(
        &self,
        repo: &Repo,
        pull: &NewPull<'_>,
    ) -> Result<PullRequest, Error> {
        let url = self.rest_url(&["repos", repo.owner(), repo.name(), "pulls"], &[])?;
        let body = json!({
            "title": pull.title,
            "head": pull.head,
            "base": pull.base,
            "body": pull.body,
            "draft": true,
        });
        let (what, answer) = self.send(Method::POST, url, Some(&body)).await?;
        if !answer.status.is_success() {
            return Err(status_error(
                &what,
                answer.status.as_u16(),
                &answer.body,
                PULLS_WRITE,
            ));
        }
        parse(&what, &answer.body)
    }

    /// The PRs (open or closed) whose head is `branch` of the repository.
    pub async fn pulls_from(&self, repo: &Repo, branch: &str) -> Result<Vec<PullRequest>, Error> {
        let url = self.rest_url(
            &["repos", repo.owner(), repo.name(), "pulls"],
            &[
                ("head", format!("{}:{branch}", repo.owner())),
                ("state", "all".to_string()),
                ("per_page", "100".to_string()),
            ],
        )?;
        let pages: Vec<Vec<PullRequest>> = self.get_pages(url, PULLS_READ).await?;
        Ok(pages.into_iter().flatten().collect())
    }

    /// `GET /user`: the token's login; a GitHub App, which has no user,
    /// acts as `{slug}[bot]` (its slug from `GET /app`).
    pub(crate) async fn fetch_own_login(&self) -> Result<String, Error> {
        #[derive(Deserialize)]
        struct User {
            login: String,
        }
        if let Some(slug) = self.auth().app_slug().await? {
            return Ok(format!("{slug}[bot]"));
        }
        let url = self.rest_url(&["user"], &[])?;
        let user: User = self.get_json(url, "(any token)").await?;
        Ok(user.login)
    }

    /// Replies in a review thread (by its GraphQL id). Not idempotent: look
    /// for a marker first ([`GitHub::thread_comments`]).
    pub async fn reply_to_thread(&self, thread: &str, body: &str) -> Result<ThreadReply, Error> {
        #[derive(Deserialize)]
        struct Data {
            #[serde(rename = "addPullRequestReviewThreadReply")]
            add: Option<Payload>,
        }
        #[derive(Deserialize)]
        struct Payload {
            comment: Option<Url>,
        }
        #[derive(Deserialize)]
        struct Url {
            url: String,
        }
        let data: Data = self
            .graphql(
                "a reply in a review thread",
                ADD_REPLY,
                json!({ "thread": thread, "body": body }),
            )
            .await?;
        let url = data
            .add
            .and_then(|p| p.comment)
            .map(|c| c.url)
            .ok_or_else(|| Error::Malformed {
                what: "POST /graphql (addPullRequestReviewThreadReply)".into(),
                detail: "no comment in the answer".into(),
            })?;
        Ok(ThreadReply { url })
    }

    /// Marks a draft PR ready for review (GraphQL
    /// `markPullRequestReadyForReview`, by the PR's `node_id`); a PR that
    /// is ready already stays so. Returns whether it is still a draft.
    pub async fn mark_ready_for_review(&self, node_id: &str) -> Result<bool, Error> {
        #[derive(Deserialize)]
        struct Data {
            #[serde(rename = "markPullRequestReadyForReview")]
            mark: Option<Payload>,
        }
        #[derive(Deserialize)]
        struct Payload {
            #[serde(rename = "pullRequest")]
            pull: Option<Pull>,
        }
        #[derive(Deserialize)]
        struct Pull {
            #[serde(rename = "isDraft")]
            is_draft: bool,
        }
        let data: Data = self
            .graphql(
                "marking a PR ready for review",
                MARK_READY,
                json!({ "pull": node_id }),
            )
            .await?;
        data.mark
            .and_then(|p| p.pull)
            .map(|p| p.is_draft)
            .ok_or_else(|| Error::Malformed {
                what: "POST /graphql (markPullRequestReadyForReview)".into(),
                detail: "no pull request in the answer".into(),
            })
    }

    /// The last 100 comments of a review thread.
    pub async fn thread_comments(&self, thread: &str) -> Result<Vec<ThreadCommentText>, Error> {
        #[derive(Deserialize)]
        struct Data {
            node: Option<Node>,
        }
        #[derive(Deserialize)]
        struct Node {
            comments: Option<Connection>,
        }
        #[derive(Deserialize)]
        struct Connection {
            nodes: Vec<Option<Comment>>,
        }
        #[derive(Deserialize)]
        struct Comment {
            body: String,
            url: String,
        }
        let data: Data = self
            .graphql(
                "the comments of a review thread",
                THREAD_COMMENTS,
                json!({ "thread": thread }),
            )
            .await?;
        let Some(comments) = data.node.and_then(|n| n.comments) else {
            return Err(Error::NotFound {
                what: format!("review thread {thread}"),
            });
        };
        Ok(comments
            .nodes
            .into_iter()
            .flatten()
            .map(|c| ThreadCommentText {
                body: c.body,
                url: c.url,
            })
            .collect())
    }
}
