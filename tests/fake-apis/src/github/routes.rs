//! Which endpoint a request is for. GitHub answers a path it does not know,
//! and a method a path does not take, with 404 `Not Found` (not 405), so the
//! only failure here is "no route".

use crate::common::query::decode_segment;
use crate::github::model::Route;

/// `owner` and `repo` from the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RepoPath {
    pub owner: String,
    pub name: String,
}

/// One endpoint of the fake, with its path parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    GetPull(RepoPath, u64),
    Merge(RepoPath, u64),
    CheckMerged(RepoPath, u64),
    Reviews(RepoPath, u64),
    ReviewComments(RepoPath, u64),
    CheckRuns(RepoPath, String),
    CombinedStatus(RepoPath, String),
    WorkflowRuns(RepoPath),
    Rerun(RepoPath, u64),
    Dispatch(RepoPath, String),
    AddLabels(RepoPath, u64),
    ListIssueComments(RepoPath, u64),
    CreateIssueComment(RepoPath, u64),
    CreatePull(RepoPath),
    ListPulls(RepoPath),
    GetUser,
    GraphQl,
    InstallationToken(u64),
    RepoInstallation(RepoPath),
    AppInstallations,
    GetApp,
}

impl Endpoint {
    /// The route faults are injected on.
    pub fn route(&self) -> Route {
        match self {
            Endpoint::GetPull(..) => Route::GetPull,
            Endpoint::Merge(..) => Route::Merge,
            Endpoint::CheckMerged(..) => Route::CheckMerged,
            Endpoint::Reviews(..) => Route::Reviews,
            Endpoint::ReviewComments(..) => Route::ReviewComments,
            Endpoint::CheckRuns(..) => Route::CheckRuns,
            Endpoint::CombinedStatus(..) => Route::CombinedStatus,
            Endpoint::WorkflowRuns(..) => Route::WorkflowRuns,
            Endpoint::Rerun(..) => Route::Rerun,
            Endpoint::Dispatch(..) => Route::Dispatch,
            Endpoint::AddLabels(..) => Route::AddLabels,
            Endpoint::ListIssueComments(..) => Route::ListIssueComments,
            Endpoint::CreateIssueComment(..) => Route::CreateIssueComment,
            Endpoint::CreatePull(..) => Route::CreatePull,
            Endpoint::ListPulls(..) => Route::ListPulls,
            Endpoint::GetUser => Route::GetUser,
            Endpoint::GraphQl => Route::GraphQl,
            Endpoint::InstallationToken(..) => Route::InstallationToken,
            Endpoint::RepoInstallation(..) => Route::RepoInstallation,
            Endpoint::AppInstallations => Route::AppInstallations,
            Endpoint::GetApp => Route::GetApp,
        }
    }

    /// Whether the endpoint authenticates an App by its JWT (and takes
    /// nothing else).
    pub fn takes_jwt(&self) -> bool {
        matches!(
            self,
            Endpoint::InstallationToken(..)
                | Endpoint::RepoInstallation(..)
                | Endpoint::AppInstallations
                | Endpoint::GetApp
        )
    }

    /// The repository the endpoint acts on, if any.
    pub fn repo(&self) -> Option<&RepoPath> {
        match self {
            Endpoint::GetPull(repo, _)
            | Endpoint::Merge(repo, _)
            | Endpoint::CheckMerged(repo, _)
            | Endpoint::Reviews(repo, _)
            | Endpoint::ReviewComments(repo, _)
            | Endpoint::CheckRuns(repo, _)
            | Endpoint::CombinedStatus(repo, _)
            | Endpoint::WorkflowRuns(repo)
            | Endpoint::Rerun(repo, _)
            | Endpoint::Dispatch(repo, _)
            | Endpoint::AddLabels(repo, _)
            | Endpoint::ListIssueComments(repo, _)
            | Endpoint::CreateIssueComment(repo, _)
            | Endpoint::CreatePull(repo)
            | Endpoint::ListPulls(repo)
            | Endpoint::RepoInstallation(repo) => Some(repo),
            Endpoint::GetUser
            | Endpoint::GraphQl
            | Endpoint::InstallationToken(_)
            | Endpoint::AppInstallations
            | Endpoint::GetApp => None,
        }
    }

    /// The query parameters the endpoint takes (per the 2022-11-28
    /// description); any other is ignored by GitHub and a violation here.
    pub fn known_params(&self) -> &'static [&'static str] {
        const PAGING: &[&str] = &["per_page", "page"];
        match self {
            Endpoint::CheckRuns(..) => &[
                "check_name",
                "status",
                "filter",
                "app_id",
                "per_page",
                "page",
            ],
            Endpoint::CombinedStatus(..) | Endpoint::Reviews(..) => PAGING,
            Endpoint::WorkflowRuns(..) => &[
                "actor",
                "branch",
                "event",
                "status",
                "per_page",
                "page",
                "created",
                "exclude_pull_requests",
                "check_suite_id",
                "head_sha",
            ],
            Endpoint::ListIssueComments(..) => &["since", "per_page", "page"],
            Endpoint::ListPulls(..) => &[
                "state",
                "head",
                "base",
                "sort",
                "direction",
                "per_page",
                "page",
            ],
            Endpoint::ReviewComments(..) => &["sort", "direction", "since", "per_page", "page"],
            Endpoint::AppInstallations => PAGING,
            _ => &[],
        }
    }
}

/// Finds the endpoint for a method and a raw path.
pub(crate) fn resolve(method: &str, path: &str) -> Option<Endpoint> {
    if path == "/graphql" {
        return (method == "POST").then_some(Endpoint::GraphQl);
    }
    if path == "/user" {
        return (method == "GET").then_some(Endpoint::GetUser);
    }
    if path == "/app" {
        return (method == "GET").then_some(Endpoint::GetApp);
    }
    if path == "/app/installations" {
        return (method == "GET").then_some(Endpoint::AppInstallations);
    }
    if let Some(rest) = path.strip_prefix("/app/installations/") {
        let id = rest.strip_suffix("/access_tokens")?.parse::<u64>().ok()?;
        return (method == "POST" && id > 0).then_some(Endpoint::InstallationToken(id));
    }
    let segments: Vec<String> = path
        .strip_prefix("/repos/")?
        .split('/')
        .map(decode_segment)
        .collect();
    let [owner, name, rest @ ..] = segments.as_slice() else {
        return None;
    };
    if owner.is_empty() || name.is_empty() {
        return None;
    }
    let repo = RepoPath {
        owner: owner.clone(),
        name: name.clone(),
    };
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    let number = |s: &str| s.parse::<u64>().ok().filter(|n| *n > 0);
    match (method, rest.as_slice()) {
        ("GET", ["installation"]) => Some(Endpoint::RepoInstallation(repo)),
        ("GET", ["pulls"]) => Some(Endpoint::ListPulls(repo)),
        ("POST", ["pulls"]) => Some(Endpoint::CreatePull(repo)),
        ("GET", ["pulls", n]) => Some(Endpoint::GetPull(repo, number(n)?)),
        ("PUT", ["pulls", n, "merge"]) => Some(Endpoint::Merge(repo, number(n)?)),
        ("GET", ["pulls", n, "merge"]) => Some(Endpoint::CheckMerged(repo, number(n)?)),
        ("GET", ["pulls", n, "reviews"]) => Some(Endpoint::Reviews(repo, number(n)?)),
        ("GET", ["pulls", n, "comments"]) => Some(Endpoint::ReviewComments(repo, number(n)?)),
        ("GET", ["actions", "runs"]) => Some(Endpoint::WorkflowRuns(repo)),
        ("POST", ["actions", "runs", id, "rerun"]) => Some(Endpoint::Rerun(repo, number(id)?)),
        ("POST", ["actions", "workflows", id, "dispatches"]) if !id.is_empty() => {
            Some(Endpoint::Dispatch(repo, (*id).to_owned()))
        }
        ("POST", ["issues", n, "labels"]) => Some(Endpoint::AddLabels(repo, number(n)?)),
        ("GET", ["issues", n, "comments"]) => Some(Endpoint::ListIssueComments(repo, number(n)?)),
        ("POST", ["issues", n, "comments"]) => Some(Endpoint::CreateIssueComment(repo, number(n)?)),
        ("GET", ["commits", git_ref @ .., "check-runs"]) if !git_ref.is_empty() => {
            Some(Endpoint::CheckRuns(repo, git_ref.join("/")))
        }
        ("GET", ["commits", git_ref @ .., "status"]) if !git_ref.is_empty() => {
            Some(Endpoint::CombinedStatus(repo, git_ref.join("/")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_paths_and_methods() {
        let repo = RepoPath {
            owner: "o".into(),
            name: "r".into(),
        };
        let cases: &[(&str, &str, Option<Endpoint>)] = &[
            (
                "GET",
                "/repos/o/r/pulls/7",
                Some(Endpoint::GetPull(repo.clone(), 7)),
            ),
            (
                "PUT",
                "/repos/o/r/pulls/7/merge",
                Some(Endpoint::Merge(repo.clone(), 7)),
            ),
            (
                "GET",
                "/repos/o/r/pulls/7/merge",
                Some(Endpoint::CheckMerged(repo.clone(), 7)),
            ),
            ("POST", "/repos/o/r/pulls/7/merge", None),
            ("GET", "/repos/o/r/pulls/x", None),
            ("GET", "/repos/o/r/pulls/0", None),
            (
                "GET",
                "/repos/o/r/commits/heads/fix%2Fa/check-runs",
                Some(Endpoint::CheckRuns(repo.clone(), "heads/fix/a".into())),
            ),
            (
                "GET",
                "/repos/o/r/commits/abc/status",
                Some(Endpoint::CombinedStatus(repo.clone(), "abc".into())),
            ),
            ("GET", "/repos/o/r/commits/abc/statuses", None),
            (
                "POST",
                "/repos/o/r/actions/workflows/ci.yml/dispatches",
                Some(Endpoint::Dispatch(repo.clone(), "ci.yml".into())),
            ),
            ("POST", "/graphql", Some(Endpoint::GraphQl)),
            ("GET", "/graphql", None),
            ("GET", "/repos/o/r/pulls/7/", None),
            ("GET", "/user", Some(Endpoint::GetUser)),
            (
                "POST",
                "/app/installations/42/access_tokens",
                Some(Endpoint::InstallationToken(42)),
            ),
            ("GET", "/app/installations/42/access_tokens", None),
            ("POST", "/app/installations/x/access_tokens", None),
            (
                "GET",
                "/app/installations",
                Some(Endpoint::AppInstallations),
            ),
            ("GET", "/app", Some(Endpoint::GetApp)),
            ("POST", "/app", None),
            (
                "GET",
                "/repos/o/r/installation",
                Some(Endpoint::RepoInstallation(repo.clone())),
            ),
            ("POST", "/user", None),
            (
                "POST",
                "/repos/o/r/pulls",
                Some(Endpoint::CreatePull(repo.clone())),
            ),
        ];
        for (method, path, expected) in cases {
            assert_eq!(&resolve(method, path), expected, "{method} {path}");
        }
    }
}
