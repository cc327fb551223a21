//! The default plugins' tables: what `default-approval` decides for each
//! request and what `default-filter` keeps of each task, and what their
//! configuration may change.

use eagle::policy::{Outcome, PolicyTask, RequestKind, content_hash};

use super::{builtin, host, host_with, request, task};
use crate::support::builtin_file;

#[tokio::test]
async fn default_approval_implements_the_table() {
    use RequestKind::{Escalate, Request};
    let host = host(vec![builtin("default-approval", "{}")]).await;
    let table: &[(RequestKind, &str, Outcome, bool, &str)] = &[
        (Request, "create_worktree", Outcome::Approve, false, ""),
        (Request, "run_build", Outcome::Approve, false, ""),
        (Request, "run_tests", Outcome::Approve, false, ""),
        (Request, "open_draft_pr", Outcome::Approve, false, ""),
        (Request, "push_branch", Outcome::Approve, false, ""),
        (Request, "comment_on_pr", Outcome::Approve, false, ""),
        (Request, "reply_thread", Outcome::Approve, false, ""),
        (
            Request,
            "run_command",
            Outcome::Escalate,
            true,
            "the operator's rules",
        ),
        (
            Request,
            "post_asana_comment",
            Outcome::Escalate,
            true,
            "Asana comment",
        ),
        (
            Request,
            "merge_pr",
            Outcome::Escalate,
            true,
            "always needs a human",
        ),
        (
            Request,
            "modify_unrelated_file",
            Outcome::Deny,
            true,
            "unrelated to the task",
        ),
        (
            Escalate,
            "scope_expansion",
            Outcome::Deny,
            true,
            "scope expansion is denied",
        ),
        (
            Escalate,
            "need_credentials",
            Outcome::Escalate,
            true,
            "escalated need_credentials",
        ),
        (
            Escalate,
            "run_tests",
            Outcome::Escalate,
            true,
            "escalated run_tests",
        ),
        (
            Request,
            "delete_repository",
            Outcome::Escalate,
            true,
            "unknown request delete_repository",
        ),
    ];
    for (kind, action, outcome, notify, reason) in table {
        let decision = host.decide(&request(*kind, action)).await;
        assert_eq!(
            decision.outcome, *outcome,
            "{kind:?} {action}: {decision:?}"
        );
        assert_eq!(decision.notify_owner, *notify, "{kind:?} {action}");
        assert!(
            decision.reason.contains(reason),
            "{kind:?} {action}: {}",
            decision.reason
        );
        let by = decision.decided_by.expect("a plugin decided");
        assert_eq!(by.name, "default-approval");
        assert_eq!(
            by.sha256,
            content_hash(&std::fs::read(builtin_file("default-approval")).unwrap())
        );
        assert!(decision.votes[0].failure.is_none());
    }
    // Configuration may approve more routine actions, never the fixed ones.
    let host = host_with(
        "default-approval",
        r#"{"also_approve": ["run_lint", "merge_pr", "post_asana_comment", "run_command"]}"#,
    )
    .await;
    assert_eq!(
        host.decide(&request(Request, "run_lint")).await.outcome,
        Outcome::Approve
    );
    for fixed in ["merge_pr", "post_asana_comment", "run_command"] {
        assert_eq!(
            host.decide(&request(Request, fixed)).await.outcome,
            Outcome::Escalate,
            "{fixed}"
        );
    }
}

#[tokio::test]
async fn default_filter_implements_each_filter_and_source() {
    let host = host_with("default-filter", r#"{"owner": "alex@example.com"}"#).await;
    let check = |want: Option<&'static str>, task: PolicyTask| {
        let host = host.clone();
        async move {
            let decision = host.filter(&task).await;
            match want {
                None => assert!(decision.keep, "{task:?} was skipped: {}", decision.reason()),
                Some(reason) => {
                    assert!(!decision.keep, "{task:?} was kept");
                    assert!(
                        decision.reason().contains(reason),
                        "{task:?}: {}",
                        decision.reason()
                    );
                }
            }
        }
    };
    check(None, task()).await;
    for source in [
        "O-L Backlog (Desktop Browsers)",
        "user_reports",
        "watched",
        "hack_days",
        "my_tasks_inbox",
        "my_tasks_backlog",
        "chat",
    ] {
        check(
            None,
            PolicyTask {
                source: source.into(),
                ..task()
            },
        )
        .await;
    }
    check(
        Some("source user_feedback_raw is never taken"),
        PolicyTask {
            source: "user_feedback_raw".into(),
            ..task()
        },
    )
    .await;
    check(
        Some("source random_inbox is not a qualifying source"),
        PolicyTask {
            source: "random_inbox".into(),
            ..task()
        },
    )
    .await;
    check(
        Some("for iOS, not a macos task"),
        PolicyTask {
            platform: Some("iOS".into()),
            ..task()
        },
    )
    .await;
    check(
        None,
        PolicyTask {
            platform: None,
            tags: vec!["MacOS".into()],
            ..task()
        },
    )
    .await;
    check(
        None,
        PolicyTask {
            platform: Some("windows".into()),
            tags: vec!["macos".into()],
            ..task()
        },
    )
    .await;
    // The platform comes from the fields, never from the text.
    check(
        Some("neither its platform nor its tags"),
        PolicyTask {
            platform: None,
            description: "Only on macOS".into(),
            ..task()
        },
    )
    .await;
    check(
        None,
        PolicyTask {
            platform: None,
            source: "chat".into(),
            ..task()
        },
    )
    .await;
    check(
        Some("project template"),
        PolicyTask {
            description: "Timeline: Q3\nProject Advisor: Kim".into(),
            ..task()
        },
    )
    .await;
    check(
        None,
        PolicyTask {
            description: "Timeline slips".into(),
            ..task()
        },
    )
    .await;
    check(
        Some("design file (https://www.figma.com/file/abc)"),
        PolicyTask {
            links: vec!["https://www.figma.com/file/abc".into()],
            ..task()
        },
    )
    .await;
    check(
        Some("design file"),
        PolicyTask {
            description: "See (https://figma.com/design/x).".into(),
            ..task()
        },
    )
    .await;
    // Anywhere in the task: its title, its notes, with or without a scheme.
    for (title, notes, link) in [
        (
            "Redo the toolbar per https://www.figma.com/file/abc/Toolbar",
            "",
            "https://www.figma.com/file/abc/Toolbar",
        ),
        (
            "Redo the toolbar",
            "spec: www.figma.com/file/q",
            "www.figma.com/file/q",
        ),
        ("Toolbar per figma.com/file/z", "", "figma.com/file/z"),
        (
            "Toolbar per <HTTPS://Figma.com/file/Y>",
            "",
            "HTTPS://Figma.com/file/Y",
        ),
    ] {
        check(
            Some(Box::leak(format!("design file ({link})").into_boxed_str())),
            PolicyTask {
                title: title.into(),
                notes: notes.into(),
                ..task()
            },
        )
        .await;
    }
    // A word that only names the site is no link.
    check(
        None,
        PolicyTask {
            title: "Sign-in to figma.com fails in the toolbar".into(),
            ..task()
        },
    )
    .await;
    check(
        Some("the task is closed"),
        PolicyTask {
            closed: true,
            ..task()
        },
    )
    .await;
    check(
        Some("assigned to bob@example.com, not to the owner"),
        PolicyTask {
            assignee: Some("bob@example.com".into()),
            ..task()
        },
    )
    .await;
    check(
        None,
        PolicyTask {
            assignee: Some("Alex@Example.com".into()),
            ..task()
        },
    )
    .await;
    // An assignee with an address is the owner by its address only, never
    // by its name.
    for assignee in ["alex@example.com <asana:1201>", "Alex <asana:me>"] {
        check(
            Some("not to the owner"),
            PolicyTask {
                assignee: Some(assignee.into()),
                ..task()
            },
        )
        .await;
    }
    let by_gid = host_with("default-filter", r#"{"owner": "asana:me"}"#).await;
    let listed = host_with("default-filter", r#"{"owner": ["asana:me", "asana:1202"]}"#).await;
    let assigned = |who: &str| PolicyTask {
        assignee: Some(who.into()),
        ..task()
    };
    assert!(by_gid.filter(&assigned("Alex Owner <asana:me>")).await.keep);
    let bobs = by_gid.filter(&assigned("Bob <asana:1202>")).await;
    assert!(!bobs.keep);
    assert!(
        bobs.reason().contains("assigned to Bob, not to the owner"),
        "{}",
        bobs.reason()
    );
    assert!(listed.filter(&assigned("Bob <asana:1202>")).await.keep);
    assert!(!listed.filter(&assigned("Carol <asana:1203>")).await.keep);

    // Platform, sources and patterns come from the configuration.
    let ios = host_with(
        "default-filter",
        r#"{"platform": "ios", "sources": ["triage"], "link_patterns": ["sketch.com"]}"#,
    )
    .await;
    let ios_task = PolicyTask {
        platform: Some("iOS".into()),
        source: "triage".into(),
        ..task()
    };
    assert!(ios.filter(&ios_task).await.keep);
    assert!(!ios.filter(&task()).await.keep);
    let sketch = PolicyTask {
        links: vec!["https://sketch.com/s/1".into()],
        ..ios_task.clone()
    };
    assert!(!ios.filter(&sketch).await.keep);
    let figma = PolicyTask {
        links: vec!["https://figma.com/x".into()],
        ..ios_task
    };
    assert!(ios.filter(&figma).await.keep);
}
