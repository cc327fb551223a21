//! A GitHub client for the self-tests and a small world: one repository
//! with a CI workflow and one open PR.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::{Answer, http, send};
use crate::{FakeGitHub, PrSpec, RepoSpec, WorkflowSpec};

/// The repository of the world.
pub(crate) const REPO: &str = "acme/app";
/// The head commit of PR #1.
pub(crate) const SHA: &str = "1111111111111111111111111111111111111111";
/// A later head commit.
pub(crate) const SHA2: &str = "2222222222222222222222222222222222222222";

/// A client that sends what Eagle must send.
pub(crate) struct Gh {
    http: reqwest::Client,
    base: String,
    pub headers: Vec<(&'static str, String)>,
}

impl Gh {
    /// A well-behaved client with this token.
    pub fn new(fake: &FakeGitHub, token: &str) -> Gh {
        Gh {
            http: http(),
            base: fake.url(),
            headers: vec![
                ("user-agent", "eagle-test/0.1".to_owned()),
                ("authorization", format!("Bearer {token}")),
                ("x-github-api-version", "2022-11-28".to_owned()),
                ("accept", "application/vnd.github+json".to_owned()),
            ],
        }
    }

    /// The same client without one header.
    pub fn without(&self, name: &str) -> Gh {
        let mut headers = self.headers.clone();
        headers.retain(|(n, _)| *n != name);
        Gh {
            http: self.http.clone(),
            base: self.base.clone(),
            headers,
        }
    }

    /// The same client with a header set.
    pub fn with(&self, name: &'static str, value: &str) -> Gh {
        let mut gh = self.without(name);
        gh.headers.push((name, value.to_owned()));
        gh
    }

    /// Sends a request, with an optional timeout.
    pub async fn try_call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        timeout: Option<Duration>,
    ) -> Result<Answer, reqwest::Error> {
        let url = format!("{}{path}", self.base);
        send(
            &self.http,
            method,
            &url,
            &self.headers,
            body.as_ref(),
            timeout,
        )
        .await
    }

    /// Sends a request.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.try_call(method, path, body, None)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// `GET`.
    pub async fn get(&self, path: &str) -> Answer {
        self.call(Method::GET, path, None).await
    }

    /// `POST` with a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.call(Method::POST, path, Some(body)).await
    }

    /// `PUT` with a JSON body.
    pub async fn put(&self, path: &str, body: Value) -> Answer {
        self.call(Method::PUT, path, Some(body)).await
    }

    /// `POST /graphql`.
    pub async fn graphql(&self, query: &str, variables: Value) -> Answer {
        self.post("/graphql", json!({"query": query, "variables": variables}))
            .await
    }
}

/// A fake with `acme/app` (a dispatchable CI workflow, id 11, file ci.yml,
/// input `reason`), PR #1 by `eagle-bot` at [`SHA`] whose `mergeable` is
/// known at once, and a client acting as `eagle-bot`.
pub(crate) async fn world() -> (FakeGitHub, Gh) {
    let fake = FakeGitHub::start().await;
    let token = fake.create_token("eagle-bot");
    fake.add_repo(REPO, RepoSpec::default());
    let mut ci = WorkflowSpec::new(11, "CI", "ci.yml");
    ci.inputs = vec!["reason".to_owned()];
    fake.add_workflow(REPO, ci);
    fake.set_mergeable_null_reads(0);
    let number = fake.open_pr(REPO, PrSpec::new("eagle-bot", "fix/a", SHA));
    assert_eq!(number, 1);
    let gh = Gh::new(&fake, &token);
    (fake, gh)
}
