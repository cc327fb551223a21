//! A strict fake of Asana's REST API 1.0, the part Eagle uses, served on
//! 127.0.0.1 for Eagle's tests; its base URL stands for
//! `https://app.asana.com/api/1.0`.
//!
//! It follows Asana's OpenAPI description (Asana/openapi
//! `defs/asana_oas.yaml` at commit `fc9f8dcf224efa8e06bfc955d91dd95aac7a398d`,
//! summarised in `shared/asana/NOTES.md`): the operations `getUser`,
//! `getUserTaskListForUser`, `getTasksForUserTaskList`, `getTasksForProject`,
//! `getSectionsForProject`, `getTasksForSection`, `getTasks`, `getTask`,
//! `getStoriesForTask`, `createStoryForTask` and `searchTasksForWorkspace`,
//! their parameters, and the `opt_fields` values each lists (written out in
//! [`spec_fields`]); nothing is read from the file at run time.
//!
//! It is strict: a request Eagle should not send (no token, a write not
//! wrapped in `{"data": …}`, `limit` out of 1..=100, an `offset` it never
//! issued, an unknown parameter or `opt_fields` value) is answered as Asana
//! would *and* recorded as a violation.
//!
//! Choices of the fake where Asana's behaviour is not documented: list
//! order is creation order; moving a task between sections (of a project or
//! of My Tasks) and adding followers leave `modified_at` alone, while a
//! comment, completion, renaming, new notes, (un)assignment and custom-field
//! changes move it; search is immediately consistent, its order stable
//! (sorted, then by gid), and an omitted `resource_subtype` matches every
//! subtype; a path naming an object in `opt_fields` gives its compact form;
//! rich text is checked for one `<body>` of balanced tags; unknown
//! `opt_fields` get 400; the per-minute limit is off until set.

mod control;
mod errors;
mod fields;
pub(crate) mod model;
mod params;
mod ratelimit;
mod render;
mod routes;
mod server;
mod spec_fields;
mod state;
mod stories;
mod tasks;
mod users;

use std::sync::Arc;
use std::time::Duration;

use crate::common::http::{bind, serve};
use crate::common::journal::CheckOnDrop;
use state::{Shared, State};

/// A running fake Asana. Cheap to clone; every clone is the same server.
///
/// When the last clone is dropped, a violation nobody looked at fails the
/// test (see [`FakeAsana::clear_violations`] and [`FakeAsana::assert_clean`]).
#[derive(Clone)]
pub struct FakeAsana {
    shared: Arc<Shared>,
    _check: Arc<CheckOnDrop<State>>,
}

impl FakeAsana {
    /// Binds 127.0.0.1 on a random port and serves on the current tokio
    /// runtime until that runtime shuts down.
    pub async fn start() -> FakeAsana {
        let listener = bind("Asana").await;
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the fake Asana has no local address: {e}"));
        let shared = Arc::new(Shared::new(State::new(), addr));
        serve(listener, Arc::clone(&shared), server::handle);
        FakeAsana {
            _check: Arc::new(CheckOnDrop {
                hub: Arc::clone(&shared),
                fake: "Asana",
            }),
            shared,
        }
    }

    /// The base URL, `http://127.0.0.1:PORT`, standing for
    /// `https://app.asana.com/api/1.0` (so `GET {url}/users/me`).
    pub fn url(&self) -> String {
        self.shared.url()
    }

    /// Waits until `check` holds, re-evaluating it after every change of the
    /// fake's state; false if `timeout` passes first.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&FakeAsana) -> bool,
    ) -> bool {
        self.shared.wait_until(timeout, || check(self)).await
    }
}
