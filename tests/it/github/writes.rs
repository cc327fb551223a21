//! What the client writes: labels (spaced), merges bound to the head sha,
//! workflows re-run and dispatched, and the comments and reviews it lists.

use super::*;

#[tokio::test(start_paused = true)]
async fn labels_are_added_and_writes_are_spaced() {
    let w = world().await;
    let n = w
        .fake
        .open_pr(REPO, PrSpec::new("eagle-bot", "fix/draft", SHA).draft());
    let gh = client(&w.fake, &w.token, Duration::from_secs(1));
    let labels = gh
        .add_labels(&w.repo, n, &["eagle".into(), "needs-review".into()])
        .await
        .unwrap();
    assert_eq!(labels, ["eagle", "needs-review"]);
    let labels = gh
        .add_labels(&w.repo, n, &["platform:ios".into()])
        .await
        .unwrap();
    assert_eq!(labels, ["eagle", "needs-review", "platform:ios"]);
    assert_eq!(w.fake.pr(REPO, n).labels, labels);
    let view = w.poll(n, &PollSettings::default(), None).await;
    assert!(view.pull.draft);
    assert_eq!(view.pull.labels, labels);

    let writes = w.requests_to("POST", &format!("/repos/acme/app/issues/{n}/labels"));
    assert_eq!(writes.len(), 2);
    assert!(
        writes[1].at.duration_since(writes[0].at) >= Duration::from_secs(1),
        "writes are a second apart"
    );
    assert!(matches!(
        gh.add_labels(&w.repo, n, &[]).await,
        Err(Error::InvalidInput(_))
    ));
    w.fake.assert_clean();
}

#[tokio::test]
async fn merges_are_bound_to_the_head_sha_and_refusals_are_typed() {
    let w = world().await;
    let n = w.open("fix/merge");
    w.fake.push(REPO, n, SHA2);
    w.fake.set_mergeable(REPO, n, Some(true));
    let refusal = |r: Result<_, Error>| match r {
        Err(Error::MergeRefused { reason, .. }) => reason,
        other => panic!("expected a refused merge, got {other:?}"),
    };

    // The sha approved is no longer the head: 409, nothing merged.
    let stale =
        w.gh.merge(&w.repo, n, &MergeRequest::new(SHA, MergeMethod::Squash))
            .await;
    assert_eq!(refusal(stale), MergeRefusal::HeadChanged);
    assert!(!w.fake.pr(REPO, n).merged);
    assert!(!w.gh.is_merged(&w.repo, n).await.unwrap());

    // A draft: 405, classified.
    let draft = w
        .fake
        .open_pr(REPO, PrSpec::new("eagle-bot", "fix/draft", SHA2).draft());
    w.fake.set_mergeable(REPO, draft, Some(true));
    let r =
        w.gh.merge(
            &w.repo,
            draft,
            &MergeRequest::new(SHA2, MergeMethod::Squash),
        )
        .await;
    assert_eq!(refusal(r), MergeRefusal::Draft);

    // Not mergeable (a conflict), and a method the repository disallows.
    w.fake.set_mergeable(REPO, n, Some(false));
    let r =
        w.gh.merge(&w.repo, n, &MergeRequest::new(SHA2, MergeMethod::Squash))
            .await;
    assert_eq!(refusal(r), MergeRefusal::NotMergeable);
    w.fake.set_mergeable(REPO, n, Some(true));
    w.fake.add_repo(
        "acme/linear",
        RepoSpec {
            allow_merge_commit: false,
            ..RepoSpec::default()
        },
    );
    let linear: Repo = "acme/linear".parse().unwrap();
    let m = w
        .fake
        .open_pr("acme/linear", PrSpec::new("eagle-bot", "fix/l", SHA));
    w.fake.set_mergeable("acme/linear", m, Some(true));
    let r =
        w.gh.merge(&linear, m, &MergeRequest::new(SHA, MergeMethod::Merge))
            .await;
    assert_eq!(refusal(r), MergeRefusal::MethodNotAllowed);

    // The right sha merges.
    let mut request = MergeRequest::new(SHA2, MergeMethod::Squash);
    request.commit_title = Some("Fix the thing (#1)".into());
    let merged = w.gh.merge(&w.repo, n, &request).await.unwrap();
    assert!(merged.merged && !merged.sha.is_empty());
    let pr = w.fake.pr(REPO, n);
    assert_eq!(
        (
            pr.merged,
            pr.merged_head_sha.as_deref(),
            pr.merge_method.as_deref()
        ),
        (true, Some(SHA2), Some("squash"))
    );
    assert_eq!(pr.merge_commit_title.as_deref(), Some("Fix the thing (#1)"));
    assert!(w.gh.is_merged(&w.repo, n).await.unwrap());
    w.fake.assert_clean();
}

#[tokio::test]
async fn workflows_are_re_run_and_dispatched() {
    let w = world().await;
    let run = w.fake.add_workflow_run(
        REPO,
        WorkflowRunSpec {
            workflow_id: CI_WORKFLOW,
            head_sha: SHA.into(),
            head_branch: "main".into(),
            event: "push".into(),
            status: "completed".into(),
            conclusion: Some("failure".into()),
            pull_requests: Vec::new(),
        },
    );
    let runs = w.gh.workflow_runs(&w.repo, SHA).await.unwrap();
    assert_eq!(runs.total_count, 1);
    assert_eq!(
        (
            runs.workflow_runs[0].id,
            runs.workflow_runs[0].name.as_deref()
        ),
        (run, Some("CI"))
    );
    assert!(
        w.gh.workflow_runs(&w.repo, SHA2)
            .await
            .unwrap()
            .workflow_runs
            .is_empty()
    );

    w.gh.rerun_workflow_run(&w.repo, run).await.unwrap();
    let reruns = w.fake.reruns();
    assert_eq!(
        (reruns.len(), reruns[0].run_id, reruns[0].head_sha.as_str()),
        (1, run, SHA)
    );

    let mut inputs = Map::new();
    inputs.insert("reason".into(), json!("CI never ran on the head"));
    w.gh.dispatch_workflow(&w.repo, "ci.yml", "main", &inputs)
        .await
        .unwrap();
    let dispatches = w.fake.dispatches();
    assert_eq!(dispatches.len(), 1);
    assert_eq!(
        (dispatches[0].workflow_id, dispatches[0].git_ref.as_str()),
        (CI_WORKFLOW, "main")
    );
    assert_eq!(
        dispatches[0].inputs.get("reason"),
        Some(&json!("CI never ran on the head"))
    );
    w.fake.assert_clean();
}

#[tokio::test]
async fn comments_reviews_and_review_comments_are_listed() {
    let w = world().await;
    let n = w.open("fix/talk");
    w.fake
        .add_issue_comment(REPO, n, Some("alex"), "looks good");
    w.fake
        .add_issue_comment(REPO, n, None, "from a deleted user");
    let mine =
        w.gh.create_issue_comment(&w.repo, n, "thanks")
            .await
            .unwrap();
    let all = w.gh.issue_comments(&w.repo, n, None).await.unwrap();
    let seen: Vec<(Option<&str>, &str)> = all
        .iter()
        .map(|c| (c.author.as_deref(), c.body.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (Some("alex"), "looks good"),
            (None, "from a deleted user"),
            (Some("eagle-bot"), "thanks")
        ]
    );
    assert_eq!(all[2].id, mine.id);
    let later = chrono::Utc::now() + chrono::Duration::days(1);
    assert!(
        w.gh.issue_comments(&w.repo, n, Some(later))
            .await
            .unwrap()
            .is_empty()
    );
    let earlier = chrono::Utc::now() - chrono::Duration::days(1);
    assert_eq!(
        w.gh.issue_comments(&w.repo, n, Some(earlier))
            .await
            .unwrap()
            .len(),
        3
    );

    w.fake
        .add_review(REPO, n, Some("alex"), "CHANGES_REQUESTED", "please rename");
    w.fake.add_review(REPO, n, None, "APPROVED", "");
    let reviews = w.gh.reviews(&w.repo, n).await.unwrap();
    let seen: Vec<(Option<&str>, &str)> = reviews
        .iter()
        .map(|r| (r.author.as_deref(), r.state.as_str()))
        .collect();
    assert_eq!(
        seen,
        [(Some("alex"), "CHANGES_REQUESTED"), (None, "APPROVED")]
    );
    assert_eq!(reviews[0].commit_id.as_deref(), Some(SHA));

    let thread = w
        .fake
        .add_review_thread(REPO, n, Some("alex"), "src/a.rs", Some(4), "why?");
    w.fake
        .reply_to_thread(REPO, &thread, Some("eagle-bot"), "because");
    let comments = w.gh.review_comments(&w.repo, n, None).await.unwrap();
    assert_eq!(comments.len(), 2);
    assert_eq!(
        (comments[0].path.as_str(), comments[0].line),
        ("src/a.rs", Some(4))
    );
    assert_eq!(comments[1].in_reply_to_id, Some(comments[0].id));
    assert_eq!(comments[1].author.as_deref(), Some("eagle-bot"));
    w.fake.assert_clean();
}
