//! GitHub over its REST and GraphQL APIs: the client the PR loop and the
//! merger use (no `gh` at run time).
//!
//! * [`client`]: [`GitHub`], one token's connection: the version and media
//!   type headers, conditional GETs through an [`EtagCache`] (a 304 costs no
//!   quota), `link`-header paging, and the rate limits (waits until a spent
//!   budget resets instead of sending; secondary limits honoured with
//!   `retry-after`, else at least a minute, doubling; a bounded number of
//!   tries, then a typed [`Error::RateLimited`]).
//! * [`rest`] and [`graphql`]: the calls, one method each, typed by
//!   [`types`] and [`threads`].
//! * [`ci`], [`threads`] and [`trust`]: pure rules over what was read: the
//!   CI summary ([`CiState`]), the review threads still open, and whom Eagle
//!   listens to (the repository's own PRs, its writers' reviews).
//! * [`view`]: one poll of a pull request ([`PullRequestView`]), which asks
//!   GraphQL (no ETags there, every query costs points) only when the REST
//!   view changed.
//!
//! * [`auth`]: who Eagle is ([`GitHubAuth`]): a token given to it, or a
//!   GitHub App whose installation tokens it mints and renews.
//!
//! Tokens live in a [`secrecy::SecretString`] and go only into the
//! `Authorization` header, marked sensitive: no `Debug`, error or log line
//! shows them. Nothing here touches the database; persistence is behind
//! [`EtagCache`], which the PR loop implements over the store.

pub mod auth;
pub mod cache;
pub mod ci;
pub mod client;
mod error;
pub mod graphql;
mod http;
pub mod ratelimit;
pub mod rest;
pub mod threads;
pub mod trust;
pub mod types;
pub mod view;
pub mod write;

pub use auth::GitHubAuth;
pub use cache::{CachedResponse, EtagCache, MemoryEtagCache};
pub use ci::{CiState, MergeGate, merge_gate, summarize};
pub use client::{ClientStats, GitHub, GitHubConfig};
pub use error::{Error, MergeRefusal, classify_merge_refusal};
pub use graphql::{GraphQlCost, ReviewThreads};
pub use ratelimit::{LimitKind, LimitWait, RetryPolicy};
pub use threads::{OpenThread, ReviewThread, ThreadComment, open_threads};
pub use trust::{Trusted, head_is_in, head_label};
pub use types::{
    CheckRun, CheckRuns, CombinedStatus, CommitStatus, Conclusion, IssueComment, MergeMethod,
    MergeRequest, Merged, PrState, PullRequest, Repo, Review, ReviewComment, RunStatus,
    StatusState, WorkflowRun, WorkflowRuns,
};
pub use view::{PollMark, PollSettings, PullRequestView};
pub use write::{NewPull, ThreadCommentText, ThreadReply};
