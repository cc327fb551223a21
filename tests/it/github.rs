//! The GitHub client against the strict fake GitHub: PR views and CI states
//! end to end, ETags that make an idle PR free, review threads, labels,
//! merges bound to a sha, rate limits (primary and secondary) and errors
//! that never show the token. Every test ends with `assert_clean`, so a
//! request GitHub would not take (a missing header, an unknown parameter, a
//! merge without `sha`) fails it.
//!
//! The tests whose client waits for a relative time (write spacing, a
//! `Retry-After`) run on paused time: the fake serves on the test's own
//! runtime and records each request on its clock, so the waits cost nothing
//! and are still measured. A spent primary budget waits in real time: the
//! fake resets its windows by the wall clock, as GitHub's epoch-second
//! `x-ratelimit-reset` says.

use std::time::Duration;

use eagle::integrations::github::{
    CiState, Error, GitHub, GitHubConfig, LimitKind, MergeMethod, MergeRefusal, MergeRequest,
    PollSettings, PrState, PullRequestView, Repo, RetryPolicy, open_threads,
};
use fake_apis::{
    CheckRunSpec, FakeGitHub, GitHubFault, GitHubRoute, PrSpec, RateLimit, RecordedRequest,
    RepoSpec, Resource, WorkflowRunSpec, WorkflowSpec,
};
use secrecy::SecretString;
use serde_json::{Map, json};

pub(crate) mod app;
mod limits;
mod views;
mod writes;

const REPO: &str = "acme/app";
const SHA: &str = "1111111111111111111111111111111111111111";
const SHA2: &str = "2222222222222222222222222222222222222222";
const CI_WORKFLOW: u64 = 7;

/// A fake with `acme/app` and its dispatchable `CI` workflow (input
/// `reason`), and a client acting as `eagle-bot`.
struct World {
    fake: FakeGitHub,
    gh: GitHub,
    token: String,
    repo: Repo,
}

async fn world() -> World {
    let fake = FakeGitHub::start().await;
    let token = fake.create_token("eagle-bot");
    fake.add_repo(REPO, RepoSpec::default());
    let mut ci = WorkflowSpec::new(CI_WORKFLOW, "CI", "ci.yml");
    ci.inputs = vec!["reason".to_owned()];
    fake.add_workflow(REPO, ci);
    let gh = client(&fake, &token, Duration::ZERO);
    World {
        fake,
        gh,
        token,
        repo: REPO.parse().expect("a repository name"),
    }
}

/// A client of the fake with this token and spacing between writes.
fn client(fake: &FakeGitHub, token: &str, write_spacing: Duration) -> GitHub {
    let mut config = GitHubConfig::new(SecretString::from(token.to_owned()));
    config.api_url = fake.url().parse().expect("the fake's URL");
    config.write_spacing = write_spacing;
    GitHub::new(config).expect("a client")
}

impl World {
    fn open(&self, head_ref: &str) -> u64 {
        self.fake
            .open_pr(REPO, PrSpec::new("eagle-bot", head_ref, SHA))
    }

    async fn poll(
        &self,
        number: u64,
        settings: &PollSettings,
        last: Option<&PullRequestView>,
    ) -> PullRequestView {
        self.gh
            .poll_pull_request(&self.repo, number, settings, last.map(|v| &v.mark))
            .await
            .unwrap_or_else(|e| panic!("poll of #{number}: {e}"))
    }

    /// The requests to `path` with `method`, in order.
    fn requests_to(&self, method: &str, path: &str) -> Vec<RecordedRequest> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.method == method && r.path == path)
            .collect()
    }
}

fn failed(names: &[&str]) -> CiState {
    CiState::Failed {
        failed: names.iter().map(|n| n.to_string()).collect(),
    }
}

fn required(names: &[&str]) -> PollSettings {
    PollSettings {
        required_checks: names.iter().map(|n| n.to_string()).collect(),
        ..PollSettings::default()
    }
}
