//! GraphQL: the review threads of a PR (REST has no resolved flag), paged
//! by cursor, and the errors GitHub reports with HTTP 200 in `errors[]`,
//! made typed errors. GraphQL has no ETags and every query costs points
//! (at least one), so callers ask only when something changed
//! ([`crate::integrations::github::view`]).

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::integrations::github::Error;
use crate::integrations::github::client::GitHub;
use crate::integrations::github::error::{parse, status_error};
use crate::integrations::github::threads::{ReviewThread, ThreadComment};
use crate::integrations::github::types::Repo;

/// Threads are read in pages of this many (GitHub's maximum).
const THREADS_PER_PAGE: u32 = 100;
/// At most this many pages of threads (10,000 threads).
const MAX_THREAD_PAGES: usize = 100;

/// The review threads query. The last 20 comments of each thread are read:
/// the newest one from someone with write access (or Eagle's own
/// acknowledgement) decides whether the thread is open.
const REVIEW_THREADS: &str = r#"
query ReviewThreads($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated path line
          comments(last: 20) {
            totalCount
            nodes { author { login } authorAssociation body createdAt }
          }
        }
      }
    }
  }
  rateLimit { cost remaining resetAt }
}"#;

/// The review threads of a PR and what reading them cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewThreads {
    /// Every thread, in GitHub's order.
    pub threads: Vec<ReviewThread>,
    /// The points spent and left.
    pub cost: GraphQlCost,
}

/// GraphQL's `rateLimit`, summed over the pages of one read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GraphQlCost {
    /// Points spent by every page.
    pub cost: u64,
    /// Points left after the last page.
    pub remaining: u64,
    /// When the points reset (ISO 8601, as GitHub sends it).
    pub reset_at: String,
    /// How many queries were sent.
    pub queries: u32,
}

impl GitHub {
    /// Every review thread of a PR, with its last comment.
    pub async fn review_threads(&self, repo: &Repo, number: u64) -> Result<ReviewThreads, Error> {
        let label = format!("review threads of {repo}#{number}");
        let mut threads = Vec::new();
        let mut cost = GraphQlCost::default();
        let mut after: Option<String> = None;
        for _ in 0..MAX_THREAD_PAGES {
            let variables = json!({
                "owner": repo.owner(),
                "name": repo.name(),
                "number": number,
                "after": after,
            });
            let data: wire::Data = self.graphql(&label, REVIEW_THREADS, variables).await?;
            cost.queries += 1;
            if let Some(r) = data.rate_limit {
                cost.cost += r.cost;
                cost.remaining = r.remaining;
                cost.reset_at = r.reset_at;
            }
            let not_found = || Error::NotFound {
                what: format!("POST /graphql ({label})"),
            };
            let connection = data
                .repository
                .ok_or_else(not_found)?
                .pull_request
                .ok_or_else(not_found)?
                .review_threads;
            threads.extend(
                connection
                    .nodes
                    .into_iter()
                    .flatten()
                    .map(ReviewThread::from),
            );
            if !connection.page_info.has_next_page {
                return Ok(ReviewThreads { threads, cost });
            }
            after = match connection.page_info.end_cursor {
                Some(cursor) => Some(cursor),
                None => {
                    return Err(Error::Malformed {
                        what: format!("POST /graphql ({label})"),
                        detail: "hasNextPage without an endCursor".into(),
                    });
                }
            };
        }
        Err(Error::Malformed {
            what: format!("POST /graphql ({label})"),
            detail: format!(
                "more than {} threads",
                MAX_THREAD_PAGES as u32 * THREADS_PER_PAGE
            ),
        })
    }

    /// Runs a GraphQL query (or mutation) and returns its `data` as `T`.
    /// `label` names it in errors. `errors[]` become typed errors:
    /// `NOT_FOUND` → [`Error::NotFound`], `FORBIDDEN` → [`Error::Forbidden`],
    /// rate limits → waits, then [`Error::RateLimited`]; others
    /// [`Error::GraphQl`].
    pub async fn graphql<T: DeserializeOwned>(
        &self,
        label: &str,
        query: &str,
        variables: Value,
    ) -> Result<T, Error> {
        const PERMISSION: &str = "Pull requests: read";
        let body = json!({"query": query, "variables": variables});
        let (what, answer) = self.graphql_post(label, &body).await?;
        let status = answer.status.as_u16();
        if status != 200 {
            return Err(status_error(&what, status, &answer.body, PERMISSION));
        }
        let response: wire::Response<T> = parse(&what, &answer.body)?;
        if !response.errors.is_empty() {
            let kinds: Vec<&str> = response
                .errors
                .iter()
                .filter_map(|e| e.kind.as_deref())
                .collect();
            let messages: Vec<String> = response.errors.iter().map(|e| e.message.clone()).collect();
            return Err(if kinds.contains(&"NOT_FOUND") {
                Error::NotFound { what }
            } else if kinds.contains(&"FORBIDDEN") {
                Error::Forbidden {
                    what,
                    permission: PERMISSION,
                    message: messages.join("; "),
                }
            } else {
                Error::GraphQl { what, messages }
            });
        }
        response.data.ok_or_else(|| Error::Malformed {
            what,
            detail: "neither data nor errors".into(),
        })
    }
}

/// The JSON of the answers.
mod wire {
    use super::*;

    #[derive(Deserialize)]
    pub struct Response<T> {
        pub data: Option<T>,
        #[serde(default)]
        pub errors: Vec<GqlError>,
    }

    #[derive(Deserialize)]
    pub struct GqlError {
        #[serde(rename = "type", default)]
        pub kind: Option<String>,
        #[serde(default)]
        pub message: String,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Data {
        pub repository: Option<RepoNode>,
        pub rate_limit: Option<RateLimit>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct RepoNode {
        pub pull_request: Option<PullNode>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct PullNode {
        pub review_threads: Threads,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Threads {
        pub page_info: PageInfo,
        #[serde(default)]
        pub nodes: Vec<Option<Thread>>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct PageInfo {
        pub has_next_page: bool,
        pub end_cursor: Option<String>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Thread {
        id: String,
        is_resolved: bool,
        is_outdated: bool,
        path: String,
        line: Option<u64>,
        comments: Comments,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Comments {
        total_count: u64,
        #[serde(default)]
        nodes: Vec<Option<Comment>>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Comment {
        author: Option<Actor>,
        #[serde(default)]
        author_association: Option<String>,
        body: String,
        created_at: String,
    }

    #[derive(Deserialize)]
    pub struct Actor {
        login: String,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct RateLimit {
        pub cost: u64,
        pub remaining: u64,
        pub reset_at: String,
    }

    impl From<Thread> for ReviewThread {
        fn from(t: Thread) -> Self {
            let comments: Vec<ThreadComment> = t
                .comments
                .nodes
                .into_iter()
                .flatten()
                .map(|c| ThreadComment {
                    author: c.author.map(|a| a.login),
                    association: c.author_association,
                    body: c.body,
                    created_at: c.created_at,
                })
                .collect();
            ReviewThread {
                id: t.id,
                resolved: t.is_resolved,
                outdated: t.is_outdated,
                path: t.path,
                line: t.line,
                comment_count: t.comments.total_count,
                last_comment: comments.last().cloned(),
                comments,
            }
        }
    }
}
