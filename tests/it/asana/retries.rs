//! Rate limits and server errors survived, within bounds (on paused time
//! where the client waits).

use std::time::Duration;

use eagle::integrations::asana::{Completion, Error};
use fake_apis::{AsanaFault, AsanaRoute};

use super::{assert_paged, expect, gids, sorted, world};
use crate::support::{WAIT, within};

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_is_waited_out_and_nothing_is_lost() {
    let w = world().await;
    let project = w.fake.add_project(&w.ws, "Browsers");
    let ids = w.tasks(150, "task", |t| {
        t.memberships = vec![(project.clone(), None)]
    });
    w.fake.inject(
        AsanaRoute::ProjectTasks,
        AsanaFault::RateLimit { retry_after: 1 },
        1,
    );
    let tasks = expect(w.asana.project_tasks(&project, "b", Completion::Open).await);
    assert_eq!(gids(&tasks), sorted(ids));
    let requests = w.requests_to("GET", &format!("/projects/{project}/tasks"));
    assert_eq!(requests.len(), 3, "{requests:#?}");
    assert_eq!(requests[0].status, 429);
    assert_paged(&requests[1..], 2);
    // Waited out (at least the Retry-After; how much more is the retry
    // policy's, pinned by its unit test), then asked once more: the 429
    // and the two pages, nothing else.
    let waited = requests[1].at.duration_since(requests[0].at);
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");

    // A Retry-After longer than the client waits is handed to the caller
    // at once. The client sleeps only before asking again, so one request
    // and no second means it did not wait; a client that slept through the
    // ten minutes fails on the deadline.
    w.fake.inject(
        AsanaRoute::ProjectTasks,
        AsanaFault::RateLimit { retry_after: 600 },
        1,
    );
    let limited = within(
        WAIT,
        "the client to hand back a 600 s Retry-After",
        w.asana.project_tasks(&project, "b", Completion::Open),
    )
    .await;
    assert!(
        matches!(&limited, Err(Error::RateLimited { retry_after: Some(d), .. }) if *d == Duration::from_secs(600)),
        "{limited:?}"
    );
    let after = w.requests_to("GET", &format!("/projects/{project}/tasks"));
    assert_eq!(after.len(), requests.len() + 1, "asked again: {after:#?}");
    assert_eq!(after[requests.len()].status, 429);
    w.fake.assert_clean();
}

#[tokio::test]
async fn server_errors_are_retried_a_bounded_number_of_times() {
    let w = world().await;
    let project = w.fake.add_project(&w.ws, "Browsers");
    let ids = w.tasks(120, "task", |t| {
        t.memberships = vec![(project.clone(), None)]
    });
    w.fake
        .inject(AsanaRoute::ProjectTasks, AsanaFault::ServerError, 1);
    w.fake
        .inject(AsanaRoute::ProjectTasks, AsanaFault::BadGateway, 1);
    let tasks = expect(w.asana.project_tasks(&project, "b", Completion::Open).await);
    assert_eq!(gids(&tasks), sorted(ids));
    let path = format!("/projects/{project}/tasks");
    let statuses: Vec<u16> = w
        .requests_to("GET", &path)
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [500, 502, 200, 200]);

    // A server that keeps failing ends the call after `attempts` tries.
    w.fake
        .inject(AsanaRoute::ProjectTasks, AsanaFault::BadGateway, 10);
    let failed = w.asana.project_tasks(&project, "b", Completion::Open).await;
    assert!(
        matches!(failed, Err(Error::Server { status: 502, .. })),
        "{failed:?}"
    );
    assert_eq!(w.requests_to("GET", &path).len(), 4 + 4);
    w.fake.assert_clean();
}
