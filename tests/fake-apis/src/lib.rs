//! Strict fakes of the HTTP APIs Eagle talks to besides Zulip, for its
//! integration tests: [`FakeGitHub`] (REST `2022-11-28` and GraphQL) and
//! [`FakeAsana`] (REST 1.0), and [`FakeLlm`] (Anthropic's Messages API and
//! OpenAI's Chat Completions, scripted).
//!
//! Each serves on 127.0.0.1 in-process, records every request, and treats
//! every departure from what the real service documents as a *violation*:
//! the request is answered as the service would answer it, and the problem
//! is listed by `violations()`, checked by `assert_clean()`, and fails the
//! test when the last handle is dropped unchecked. Tests build the world
//! through each fake's control API (sync methods on the handle), wait for
//! effects with `wait_until` (woken by every change, never polling), and
//! break things on purpose with `inject`.
//!
//! The fakes follow the official descriptions named in each module's
//! documentation; the types and fixtures are written here, and nothing
//! outside the repository is read at run time.

mod asana;
mod common;
mod github;
mod llm;

#[cfg(test)]
mod tests;

pub use asana::FakeAsana;
pub use asana::model::{
    CustomField, Fault as AsanaFault, Route as AsanaRoute, StoredStory, TaskSpec,
};
pub use common::journal::RecordedRequest;
pub use github::FakeGitHub;
pub use github::model::{
    ACTIONS_APP_ID, AppSpec, CheckRunSpec, Dispatch, Fault as GitHubFault, IssueComment,
    PrSnapshot, PrSpec, Protection, RateLimit, RepoSpec, Rerun, Resource, Route as GitHubRoute,
    WorkflowRunSpec, WorkflowSpec,
};
pub use llm::{FakeLlm, LlmCall, LlmFault, Rule as LlmRule, Step as LlmStep};
