//! Comments posted exactly once, even when an answer is lost.

use eagle::integrations::asana::{CommentOutcome, Error};
use fake_apis::{AsanaFault, AsanaRoute, TaskSpec};

use super::{World, expect, param, world};

/// Eagle's comments with this marker on a task.
fn marked(w: &World, task: &str, marker: &str) -> usize {
    w.fake
        .stories(task)
        .iter()
        .filter(|s| s.created_by.as_deref() == Some(w.eagle.as_str()) && s.text.contains(marker))
        .count()
}

#[tokio::test]
async fn a_comment_is_posted_once() {
    let w = world().await;
    let task = w.fake.add_task(TaskSpec::new(&w.ws, "Tab preview stuck"));
    // More than a page of stories, one quoting the marker by someone else.
    for i in 0..120 {
        w.fake.add_comment(&task, &w.alex, &format!("comment {i}"));
    }
    let marker = "[eagle:run-12-req-7]";
    w.fake
        .add_comment(&task, &w.alex, &format!("what is {marker}?"));

    let first = expect(w.asana.post_comment_once(&task, marker, "PR ready").await);
    assert!(matches!(first, CommentOutcome::Posted { .. }), "{first:?}");
    let stories = w.fake.stories(&task);
    let posted = stories.last().map(|s| s.text.clone());
    assert_eq!(posted.as_deref(), Some("[eagle:run-12-req-7] PR ready"));

    // Again (a retry, a restart): the comment is on the second page, found.
    let again = expect(w.asana.post_comment_once(&task, marker, "PR ready").await);
    let CommentOutcome::Found { story_gid } = again else {
        panic!("posted twice: {again:?}");
    };
    assert_eq!(Some(story_gid), stories.last().map(|s| s.gid.clone()));
    assert_eq!(marked(&w, &task, marker), 1);
    let path = format!("/tasks/{task}/stories");
    assert_eq!(w.requests_to("POST", &path).len(), 1);
    let reads = w.requests_to("GET", &path);
    // Two pages before the POST, two before finding it: all pages each time.
    assert_eq!(reads.len(), 4);
    for r in &reads {
        assert_eq!(param(r, "limit"), Some("100"));
        assert_eq!(
            param(r, "opt_fields"),
            Some("resource_subtype,created_by,text")
        );
    }

    // A marker already in the text is not added again.
    let other = expect(
        w.asana
            .post_comment_once(&task, "[eagle:run-12-req-8]", "done [eagle:run-12-req-8]")
            .await,
    );
    assert!(matches!(other, CommentOutcome::Posted { .. }));
    assert_eq!(
        w.fake
            .stories(&task)
            .last()
            .map(|s| s.text.clone())
            .as_deref(),
        Some("done [eagle:run-12-req-8]")
    );
    let bad = w.asana.post_comment_once(&task, "", "text").await;
    assert!(matches!(bad, Err(Error::InvalidMarker { .. })), "{bad:?}");
    w.fake.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn a_comment_whose_answer_is_lost_is_posted_once() {
    let w = world().await;
    let task = w.fake.add_task(TaskSpec::new(&w.ws, "Tab preview stuck"));
    let path = format!("/tasks/{task}/stories");

    // Accepted, then no answer: the look after the timeout finds it.
    w.fake
        .inject(AsanaRoute::CreateStory, AsanaFault::AcceptThenHang, 1);
    let marker = "[eagle:run-3-req-1]";
    let outcome = expect(w.asana.post_comment_once(&task, marker, "tests pass").await);
    assert!(
        matches!(outcome, CommentOutcome::Found { .. }),
        "{outcome:?}"
    );
    assert_eq!(marked(&w, &task, marker), 1);
    assert_eq!(w.requests_to("POST", &path).len(), 1);

    // Lost before it was carried out, or refused with a 5xx: posted once.
    for fault in [
        AsanaFault::Hang,
        AsanaFault::ServerError,
        AsanaFault::BadGateway,
    ] {
        w.fake.inject(AsanaRoute::CreateStory, fault, 1);
        let marker = format!("[eagle:{fault:?}]");
        let outcome = expect(w.asana.post_comment_once(&task, &marker, "retry").await);
        assert!(
            matches!(outcome, CommentOutcome::Posted { .. }),
            "{fault:?}: {outcome:?}"
        );
        assert_eq!(marked(&w, &task, &marker), 1, "{fault:?}");
    }
    assert_eq!(w.requests_to("POST", &path).len(), 1 + 2 * 3);
    // A 429 on the POST is a refusal: sent again after the wait, once.
    w.fake.inject(
        AsanaRoute::CreateStory,
        AsanaFault::RateLimit { retry_after: 1 },
        1,
    );
    let outcome = expect(w.asana.post_comment_once(&task, "[eagle:429]", "x").await);
    assert!(matches!(outcome, CommentOutcome::Posted { .. }));
    assert_eq!(marked(&w, &task, "[eagle:429]"), 1);
    w.fake.assert_clean();
}
