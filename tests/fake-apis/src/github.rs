//! A strict fake of GitHub's REST API (version `2022-11-28`) and of the part
//! of its GraphQL API Eagle uses, served on 127.0.0.1 for Eagle's tests.
//!
//! It follows the REST description in github/rest-api-description
//! (`descriptions/api.github.com/api.github.com.2022-11-28.yaml`, as
//! summarised in `shared/github/NOTES.md` from commit
//! `0000036e42b5e7121c2b1ac244cb7bba1d2f3914`; per-operation parameters were
//! checked against github/rest-api-docs-md at commit
//! `ece3b6c7d21577ff2db42a6d8ac3399af916697e`) and the public GraphQL schema
//! (github/docs `src/graphql/data/fpt/schema.docs.graphql`): the types and
//! fields served are written out in [`graphql::schema`]; nothing is read from
//! those files at run time.
//!
//! It is strict: a request Eagle should not send (no `User-Agent`, no
//! version header or media type, an unknown route or parameter, a merge not
//! bound to a sha, a GraphQL field the schema lacks) is answered as GitHub
//! would *and* recorded as a violation, so that [`FakeGitHub::assert_clean`]
//! (or dropping the last handle) fails the test.
//!
//! ```ignore
//! let github = FakeGitHub::start().await;
//! let token = github.create_token("eagle-bot");
//! github.add_repo("acme/app", RepoSpec::default());
//! let pr = github.open_pr("acme/app", PrSpec::new("eagle-bot", "fix/x", &sha));
//! // … run Eagle against github.url() with the token …
//! github.assert_clean();
//! ```
//!
//! It authenticates as GitHub does: personal tokens
//! ([`FakeGitHub::create_token`]), and GitHub Apps ([`FakeGitHub::add_app`],
//! [`FakeGitHub::install_app`]) whose RS256 JWTs are traded for expiring
//! installation tokens (see `apps.rs`).
//!
//! It models trust as GitHub does: a repository's forks
//! ([`FakeGitHub::add_fork`]), whose PRs name the fork as `head.repo`
//! (GraphQL `headRepository`) whatever their branch is called;
//! `author_association` on reviews and comments
//! ([`FakeGitHub::set_association`]); and branch protection
//! ([`FakeGitHub::protect_branch`]): required checks and approving reviews
//! by people with write access, a merge short of them answered 405 with
//! GitHub's message, and the same merge asked again with nothing changed
//! recorded as a violation.
//!
//! Choices of the fake where GitHub's behaviour is not documented: one
//! primary budget per resource for all tokens; `mergeable` is null for
//! [`FakeGitHub::set_mergeable_null_reads`] reads after a PR is opened or
//! pushed to (1 by default), and a merge while it is unknown is refused with
//! 405; check runs are listed newest first; a re-run of a run that has not
//! completed gets 403 `This workflow is already running`; a `ref` that names
//! no commit gets 422 (check runs) or 404 (combined status).

mod actions;
mod apps;
mod checks;
mod control;
mod errors;
mod graphql;
mod issues;
pub(crate) mod model;
mod opening;
mod paging;
mod pulls;
mod quota;
mod render;
mod routes;
mod server;
mod state;

use std::sync::Arc;
use std::time::Duration;

use crate::common::http::{bind, serve};
use crate::common::journal::CheckOnDrop;
use state::{Shared, State};

/// A running fake GitHub. Cheap to clone; every clone is the same server.
///
/// When the last clone is dropped, a violation nobody looked at fails the
/// test: a test that provokes violations on purpose clears them
/// ([`FakeGitHub::clear_violations`]) or checks them ([`FakeGitHub::assert_clean`]).
#[derive(Clone)]
pub struct FakeGitHub {
    shared: Arc<Shared>,
    _check: Arc<CheckOnDrop<State>>,
}

impl FakeGitHub {
    /// Binds 127.0.0.1 on a random port and serves on the current tokio
    /// runtime until that runtime shuts down.
    pub async fn start() -> FakeGitHub {
        let listener = bind("GitHub").await;
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the fake GitHub has no local address: {e}"));
        let shared = Arc::new(Shared::new(State::new(), addr));
        serve(listener, Arc::clone(&shared), server::handle);
        FakeGitHub {
            _check: Arc::new(CheckOnDrop {
                hub: Arc::clone(&shared),
                fake: "GitHub",
            }),
            shared,
        }
    }

    /// The base URL, `http://127.0.0.1:PORT`, standing for
    /// `https://api.github.com` (GraphQL is at `/graphql`).
    pub fn url(&self) -> String {
        self.shared.url()
    }

    /// Waits until `check` holds, re-evaluating it after every change of the
    /// fake's state (a request, a response, a control call); false if
    /// `timeout` passes first.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&FakeGitHub) -> bool,
    ) -> bool {
        self.shared.wait_until(timeout, || check(self)).await
    }
}
