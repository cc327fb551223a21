//! Comments posted exactly once and exactly as given, even when an answer
//! is lost: no marker, the text is the mark.

use chrono::{DateTime, Utc};
use eagle::integrations::asana::{CommentOutcome, Error};
use fake_apis::{AsanaFault, AsanaRoute, TaskSpec};

use super::{World, expect, param, world};

/// Eagle's comments saying exactly this on a task.
fn said(w: &World, task: &str, text: &str) -> usize {
    w.fake
        .stories(task)
        .iter()
        .filter(|s| s.created_by.as_deref() == Some(w.eagle.as_str()) && s.text == text)
        .count()
}

fn now() -> DateTime<Utc> {
    Utc::now()
}

#[tokio::test]
async fn a_comment_is_posted_once() {
    let w = world().await;
    let task = w.fake.add_task(TaskSpec::new(&w.ws, "Tab preview stuck"));
    // More than a page of stories, one saying the same words by someone else.
    for i in 0..120 {
        w.fake.add_comment(&task, &w.alex, &format!("comment {i}"));
    }
    w.fake.add_comment(&task, &w.alex, "PR ready");
    let approved = now();

    let first = expect(w.asana.post_comment_once(&task, "PR ready", approved).await);
    assert!(matches!(first, CommentOutcome::Posted { .. }), "{first:?}");
    let stories = w.fake.stories(&task);
    let posted = stories.last().map(|s| s.text.clone());
    assert_eq!(posted.as_deref(), Some("PR ready"), "exactly the text");

    // Again (a retry, a restart): the comment is on the second page, found.
    let again = expect(w.asana.post_comment_once(&task, "PR ready", approved).await);
    let CommentOutcome::Found { story_gid } = again else {
        panic!("posted twice: {again:?}");
    };
    assert_eq!(Some(story_gid), stories.last().map(|s| s.gid.clone()));
    assert_eq!(said(&w, &task, "PR ready"), 1);
    let path = format!("/tasks/{task}/stories");
    assert_eq!(w.requests_to("POST", &path).len(), 1);
    let reads = w.requests_to("GET", &path);
    // Two pages before the POST, two before finding it: all pages each time.
    assert_eq!(reads.len(), 4);
    for r in &reads {
        assert_eq!(param(r, "limit"), Some("100"));
        assert_eq!(
            param(r, "opt_fields"),
            Some("resource_subtype,created_by,created_at,text")
        );
    }

    // Other words are another comment.
    let other = expect(
        w.asana
            .post_comment_once(&task, "PR merged", approved)
            .await,
    );
    assert!(matches!(other, CommentOutcome::Posted { .. }));
    assert_eq!(said(&w, &task, "PR merged"), 1);
    let bad = w.asana.post_comment_once(&task, "  ", approved).await;
    assert!(matches!(bad, Err(Error::EmptyComment)), "{bad:?}");
    w.fake.assert_clean();
}

#[tokio::test]
async fn the_same_words_approved_later_are_posted_again() {
    let w = world().await;
    let task = w.fake.add_task(TaskSpec::new(&w.ws, "Tab preview stuck"));
    let first = expect(w.asana.post_comment_once(&task, "tests pass", now()).await);
    assert!(matches!(first, CommentOutcome::Posted { .. }));
    // Approved well after the first was posted: a new comment.
    let later = now() + chrono::Duration::hours(1);
    let second = expect(w.asana.post_comment_once(&task, "tests pass", later).await);
    assert!(
        matches!(second, CommentOutcome::Posted { .. }),
        "{second:?}"
    );
    assert_eq!(said(&w, &task, "tests pass"), 2);
    w.fake.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn a_comment_whose_answer_is_lost_is_posted_once() {
    let w = world().await;
    let task = w.fake.add_task(TaskSpec::new(&w.ws, "Tab preview stuck"));
    let path = format!("/tasks/{task}/stories");
    // Paused time does not move the wall clock the fake stamps stories
    // with: the approval is now.
    let approved = now();

    // Accepted, then no answer: the look after the timeout finds it.
    w.fake
        .inject(AsanaRoute::CreateStory, AsanaFault::AcceptThenHang, 1);
    let outcome = expect(
        w.asana
            .post_comment_once(&task, "tests pass", approved)
            .await,
    );
    assert!(
        matches!(outcome, CommentOutcome::Found { .. }),
        "{outcome:?}"
    );
    assert_eq!(said(&w, &task, "tests pass"), 1);
    assert_eq!(w.requests_to("POST", &path).len(), 1);

    // Lost before it was carried out, or refused with a 5xx: posted once.
    for fault in [
        AsanaFault::Hang,
        AsanaFault::ServerError,
        AsanaFault::BadGateway,
    ] {
        w.fake.inject(AsanaRoute::CreateStory, fault, 1);
        let text = format!("retry after {fault:?}");
        let outcome = expect(w.asana.post_comment_once(&task, &text, approved).await);
        assert!(
            matches!(outcome, CommentOutcome::Posted { .. }),
            "{fault:?}: {outcome:?}"
        );
        assert_eq!(said(&w, &task, &text), 1, "{fault:?}");
    }
    assert_eq!(w.requests_to("POST", &path).len(), 1 + 2 * 3);
    // A 429 on the POST is a refusal: sent again after the wait, once.
    w.fake.inject(
        AsanaRoute::CreateStory,
        AsanaFault::RateLimit { retry_after: 1 },
        1,
    );
    let outcome = expect(w.asana.post_comment_once(&task, "x", approved).await);
    assert!(matches!(outcome, CommentOutcome::Posted { .. }));
    assert_eq!(said(&w, &task, "x"), 1);
    w.fake.assert_clean();
}
