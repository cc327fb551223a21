//! The store suite, run against SQLite and against PostgreSQL alike.

use std::sync::Arc;

use eagle::store::{
    Destination, NewAuditEntry, NewOutboxItem, NewRun, NewTask, Origin, OutboxKind, RunState,
    Store, TaskStatus,
};
use sqlx::Connection;

use crate::support::{Db, TestDb};

on_both_backends!(
    migrations_apply_once,
    tasks_round_trip,
    a_task_gid_is_captured_once,
    open_tasks_page_and_count,
    runs_and_their_topics,
    a_message_is_claimed_once,
    racing_claims_have_one_winner,
    outbox_delivers_in_order_and_retries,
    bookmarks_only_move_forward,
    uncommitted_work_is_rolled_back,
    audit_log_is_append_only,
    status_counts_group_by_status,
    local_message_ids_count_up,
);

fn task(gid: &str, title: &str) -> NewTask {
    NewTask {
        task_gid: gid.into(),
        source: "chat".into(),
        title: title.into(),
        description: "details\nover lines".into(),
        requested_by: Some("Alex".into()),
        requested_by_id: Some(5),
        requested_by_email: None,
        origin: Origin {
            transport: "zulip".into(),
            channel: Some("general".into()),
            topic: Some("Вкладки".into()),
            message_id: Some(1234),
            private: false,
        },
        repo: None,
    }
}

async fn insert(store: &Store, new: &NewTask) -> i64 {
    let mut tx = store.begin_write().await.unwrap();
    let id = tx
        .tasks()
        .insert_task(new)
        .await
        .unwrap()
        .expect("inserted");
    tx.commit().await.unwrap();
    id
}

async fn migrations_apply_once(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    // As many as there are files (counted, so that new migrations merge).
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations/sqlite"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "sql")
        })
        .count();
    assert_eq!(store.applied_migrations().await.unwrap(), files);
    assert_eq!(store.migrate().await.unwrap(), 0, "nothing new to apply");
    let again = test.open().await;
    assert_eq!(again.applied_migrations().await.unwrap(), files);
    assert_eq!(
        store.backend(),
        match db {
            Db::Sqlite => eagle::store::Backend::Sqlite,
            Db::Postgres => eagle::store::Backend::Postgres,
        }
    );
}

async fn tasks_round_trip(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let new = task("zulip:1234", "Fix the tab preview 🦅 ünïcödé");
    let id = insert(&store, &new).await;
    let mut tx = store.begin_read().await.unwrap();
    let got = tx.tasks().task(id).await.unwrap().expect("task by id");
    assert_eq!(got.task_gid, "zulip:1234");
    assert_eq!(got.title, new.title);
    assert_eq!(got.description, new.description);
    assert_eq!(got.status, TaskStatus::Pending);
    assert_eq!(got.requested_by.as_deref(), Some("Alex"));
    assert_eq!(got.requested_by_id, Some(5));
    assert_eq!(got.origin_topic.as_deref(), Some("Вкладки"));
    assert_eq!(got.origin_message_id, Some(1234));
    assert_eq!(got.added_at, got.updated_at);
    assert!((chrono::Utc::now() - got.added_at).num_seconds() < 60);
    let by_gid = tx
        .tasks()
        .task_by_gid("zulip:1234")
        .await
        .unwrap()
        .expect("task by gid");
    assert_eq!(by_gid.id, id);
    assert!(tx.tasks().task(id + 100).await.unwrap().is_none());
}

async fn a_task_gid_is_captured_once(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let first = insert(&store, &task("zulip:77", "once")).await;
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.tasks()
            .insert_task(&task("zulip:77", "twice"))
            .await
            .unwrap(),
        None
    );
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.tasks()
            .task_by_gid("zulip:77")
            .await
            .unwrap()
            .unwrap()
            .id,
        first
    );
    assert_eq!(tx.tasks().open_task_count().await.unwrap(), 1);
}

async fn open_tasks_page_and_count(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    for i in 1..=7 {
        insert(&store, &task(&format!("zulip:{i}"), &format!("task {i}"))).await;
    }
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.tasks().open_task_count().await.unwrap(), 7);
    let first: Vec<String> = tx
        .tasks()
        .open_tasks(0, 3)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.title)
        .collect();
    assert_eq!(first, ["task 1", "task 2", "task 3"]);
    let last: Vec<String> = tx
        .tasks()
        .open_tasks(6, 3)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.title)
        .collect();
    assert_eq!(last, ["task 7"]);
}

async fn runs_and_their_topics(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    insert(&store, &task("zulip:1", "a task")).await;
    let mut tx = store.begin_write().await.unwrap();
    let run = tx
        .tasks()
        .insert_run(&NewRun {
            task_gid: "zulip:1".into(),
            thread_id: Some("Run 42 ÄÖ".into()),
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let got = tx.tasks().run(run).await.unwrap().expect("run");
    assert_eq!(got.state, RunState::Queued);
    assert!(!got.held);
    assert_eq!(got.attempt, 0);
    assert_eq!(tx.tasks().runs_of_task("zulip:1").await.unwrap().len(), 1);
    assert_eq!(tx.tasks().open_run_count().await.unwrap(), 1);
    // Topic names compare with Unicode case folding, done in Rust.
    let found = tx
        .tasks()
        .run_by_thread("run 42 äö")
        .await
        .unwrap()
        .expect("by topic");
    assert_eq!(found.id, run);
    assert!(
        tx.tasks()
            .run_by_thread("run 43 äö")
            .await
            .unwrap()
            .is_none()
    );
    // A run must belong to a task.
    let mut tx = store.begin_write().await.unwrap();
    let orphan = tx
        .tasks()
        .insert_run(&NewRun {
            task_gid: "zulip:none".into(),
            thread_id: None,
        })
        .await;
    assert!(orphan.is_err(), "a run of an unknown task was accepted");
}

async fn a_message_is_claimed_once(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let mut tx = store.begin_write().await.unwrap();
    assert!(
        tx.handled()
            .mark_processed("eagle", 10, "commands")
            .await
            .unwrap()
    );
    assert!(
        !tx.handled()
            .mark_processed("eagle", 10, "commands")
            .await
            .unwrap()
    );
    // Another identity has its own record of the same message.
    assert!(
        tx.handled()
            .mark_processed("executor", 10, "hint")
            .await
            .unwrap()
    );
    tx.commit().await.unwrap();
    assert!(store.handled().is_processed("eagle", 10).await.unwrap());
    assert!(!store.handled().is_processed("eagle", 11).await.unwrap());
}

async fn racing_claims_have_one_winner(db: Db) {
    let test = TestDb::new(db).await;
    let store = Arc::new(test.open().await);
    let mut handles = Vec::new();
    for _ in 0..8 {
        let store = Arc::clone(&store);
        handles.push(tokio::spawn(async move {
            let mut tx = store.begin_write().await.expect("begin");
            let won = tx
                .handled()
                .mark_processed("eagle", 99, "commands")
                .await
                .expect("claim");
            if won {
                tx.tasks()
                    .insert_task(&task("zulip:99", "raced"))
                    .await
                    .expect("insert");
            }
            tx.commit().await.expect("commit");
            won
        }));
    }
    let mut winners = 0;
    for handle in handles {
        winners += usize::from(handle.await.unwrap());
    }
    assert_eq!(winners, 1);
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.tasks().open_task_count().await.unwrap(), 1);
}

async fn outbox_delivers_in_order_and_retries(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let channel = Destination::Channel {
        channel: "general".into(),
        topic: "Topic".into(),
    };
    let items = [
        NewOutboxItem {
            identity: "eagle".into(),
            kind: OutboxKind::ReactionAdd {
                message_id: 5,
                emoji: "eyes".into(),
            },
            in_reply_to: None,
        },
        NewOutboxItem {
            identity: "eagle".into(),
            kind: OutboxKind::Message {
                to: channel.clone(),
                content: "first".into(),
            },
            in_reply_to: Some(5),
        },
        NewOutboxItem {
            identity: "eagle".into(),
            kind: OutboxKind::Message {
                to: Destination::Direct {
                    user_ids: vec![9, 3],
                },
                content: "dm".into(),
            },
            in_reply_to: Some(6),
        },
        NewOutboxItem {
            identity: "executor".into(),
            kind: OutboxKind::Edit {
                message_id: 8,
                content: "edited".into(),
            },
            in_reply_to: None,
        },
    ];
    let mut tx = store.begin_write().await.unwrap();
    for item in &items {
        tx.outbox().enqueue(item).await.unwrap();
    }
    tx.commit().await.unwrap();
    let due = store.outbox().due_outbox("eagle", 10).await.unwrap();
    let kinds: Vec<&OutboxKind> = due.iter().map(|i| &i.kind).collect();
    assert_eq!(kinds, vec![&items[0].kind, &items[1].kind, &items[2].kind]);
    assert_eq!(due[1].in_reply_to, Some(5));
    assert_eq!(due[1].ordering_key, channel.ordering_key());
    assert_eq!(
        Destination::Channel {
            channel: "GENERAL".into(),
            topic: "topic".into()
        }
        .ordering_key(),
        channel.ordering_key(),
        "one topic, one ordering key, whatever the case"
    );
    assert_eq!(store.outbox().undelivered_count("eagle").await.unwrap(), 3);

    store.outbox().outbox_attempting(due[0].id).await.unwrap();
    store
        .outbox()
        .outbox_delivered(due[0].id, None)
        .await
        .unwrap();
    store.outbox().outbox_attempting(due[1].id).await.unwrap();
    let later = chrono::Utc::now() + chrono::TimeDelta::seconds(60);
    store
        .outbox()
        .outbox_failed(due[1].id, "HTTP 502", later)
        .await
        .unwrap();
    let due = store.outbox().due_outbox("eagle", 10).await.unwrap();
    assert_eq!(due.len(), 1, "the failed entry waits for its retry time");
    assert!(matches!(due[0].kind, OutboxKind::Message { ref content, .. } if content == "dm"));
    assert_eq!(store.outbox().undelivered_count("eagle").await.unwrap(), 2);
    assert_eq!(
        store.outbox().due_outbox("executor", 10).await.unwrap()[0].attempts,
        0
    );

    // A later reply to the same topic waits behind the failed one: never overtakes it.
    let mut tx = store.begin_write().await.unwrap();
    let second = tx
        .outbox()
        .enqueue(&NewOutboxItem {
            identity: "eagle".into(),
            kind: OutboxKind::Message {
                to: channel.clone(),
                content: "second".into(),
            },
            in_reply_to: Some(9),
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let ids: Vec<i64> = store
        .outbox()
        .due_outbox("eagle", 10)
        .await
        .unwrap()
        .iter()
        .map(|i| i.id)
        .collect();
    assert!(
        !ids.contains(&second),
        "the later reply overtook the failed one: {ids:?}"
    );

    // Delivered ids are recorded, so a crash check never takes one reply for another.
    store
        .outbox()
        .outbox_delivered(second, Some(777))
        .await
        .unwrap();
    assert!(
        store
            .outbox()
            .is_delivered_message("eagle", 777)
            .await
            .unwrap()
    );
    assert!(
        !store
            .outbox()
            .is_delivered_message("eagle", 778)
            .await
            .unwrap()
    );
}

async fn bookmarks_only_move_forward(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    assert_eq!(store.handled().bookmark("eagle").await.unwrap(), None);
    store.handled().init_bookmark("eagle", 100).await.unwrap();
    store.handled().init_bookmark("eagle", 5).await.unwrap();
    assert_eq!(
        store
            .handled()
            .bookmark("eagle")
            .await
            .unwrap()
            .unwrap()
            .last_message_id,
        100
    );
    let mut tx = store.begin_write().await.unwrap();
    tx.handled().advance_bookmark("eagle", 150).await.unwrap();
    tx.handled().advance_bookmark("eagle", 120).await.unwrap();
    tx.commit().await.unwrap();
    store
        .handled()
        .record_queue("eagle", Some("q-1"), Some(7))
        .await
        .unwrap();
    let bookmark = store.handled().bookmark("eagle").await.unwrap().unwrap();
    assert_eq!(bookmark.last_message_id, 150);
    assert_eq!(bookmark.queue_id.as_deref(), Some("q-1"));
    assert_eq!(bookmark.last_event_id, Some(7));
    assert_eq!(store.handled().bookmark("executor").await.unwrap(), None);
    // A handled message counts without a write to the bookmark; another
    // identity's does not.
    let mut tx = store.begin_write().await.unwrap();
    assert!(
        tx.handled()
            .mark_processed("eagle", 170, "commands")
            .await
            .unwrap()
    );
    assert!(
        tx.handled()
            .mark_processed("executor", 900, "commands")
            .await
            .unwrap()
    );
    tx.commit().await.unwrap();
    let bookmark = store.handled().bookmark("eagle").await.unwrap().unwrap();
    assert_eq!(bookmark.last_message_id, 170);
    assert_eq!(bookmark.queue_id.as_deref(), Some("q-1"));
}

async fn uncommitted_work_is_rolled_back(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    {
        let mut tx = store.begin_write().await.unwrap();
        tx.handled()
            .mark_processed("eagle", 1, "commands")
            .await
            .unwrap();
        tx.tasks()
            .insert_task(&task("zulip:1", "lost"))
            .await
            .unwrap();
        // Dropped without commit.
    }
    assert!(!store.handled().is_processed("eagle", 1).await.unwrap());
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.tasks().open_task_count().await.unwrap(), 0);
}

async fn audit_log_is_append_only(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let entry = NewAuditEntry {
        actor: "policy".into(),
        action: "request.decided".into(),
        subject: "request:7".into(),
        decision: Some("approve".into()),
        reason: Some("routine".into()),
        plugin_name: Some("default-approval".into()),
        plugin_version: Some("0.1.0".into()),
        plugin_hash: Some("ab".repeat(32)),
        params_hash: Some("cd".repeat(32)),
        source_message_id: Some(44),
        detail: Some(r#"{"votes":[]}"#.into()),
    };
    let id = store.audit_log().audit(&entry).await.unwrap();
    let trail = store.audit_log().audit_trail("request:7").await.unwrap();
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].id, id);
    assert_eq!(trail[0].plugin_hash, entry.plugin_hash);
    assert_eq!(trail[0].detail, r#"{"votes":[]}"#);

    // The database itself refuses to change history, whoever asks.
    let refused = match db {
        Db::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&test.url).await.unwrap();
            let mut errors = Vec::new();
            for sql in [
                "UPDATE audit_log SET decision = 'deny'",
                "DELETE FROM audit_log WHERE id = 1",
                "DELETE FROM audit_log",
            ] {
                errors.push(
                    sqlx::query(sql)
                        .execute(&mut conn)
                        .await
                        .expect_err(sql)
                        .to_string(),
                );
            }
            errors
        }
        Db::Postgres => {
            // The tests connect as a superuser, who bypasses grants but not triggers.
            let mut conn = sqlx::PgConnection::connect(&test.url).await.unwrap();
            let superuser: bool =
                sqlx::query_scalar("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
            assert!(superuser, "the append-only check must run as a superuser");
            let mut errors = Vec::new();
            for sql in [
                "UPDATE audit_log SET decision = 'deny'",
                "DELETE FROM audit_log WHERE id = 1",
                "TRUNCATE audit_log",
                "UPDATE audit_log SET decision = 'deny' WHERE false",
            ] {
                errors.push(
                    sqlx::query(sql)
                        .execute(&mut conn)
                        .await
                        .expect_err(sql)
                        .to_string(),
                );
            }
            // Replication mode turns ordinary triggers off; these fire always.
            sqlx::query("SET session_replication_role = replica")
                .execute(&mut conn)
                .await
                .unwrap();
            for sql in ["DELETE FROM audit_log", "TRUNCATE audit_log"] {
                errors.push(
                    sqlx::query(sql)
                        .execute(&mut conn)
                        .await
                        .expect_err(sql)
                        .to_string(),
                );
            }
            errors
        }
    };
    for error in &refused {
        assert!(
            error.contains("audit_log is append-only"),
            "unexpected error: {error}"
        );
    }
    assert_eq!(
        store.audit_log().audit_trail("request:7").await.unwrap(),
        trail
    );
}

async fn status_counts_group_by_status(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    insert(&store, &task("zulip:1", "a")).await;
    insert(&store, &task("zulip:2", "b")).await;
    let mut tx = store.begin_write().await.unwrap();
    tx.tasks()
        .insert_run(&NewRun {
            task_gid: "zulip:1".into(),
            thread_id: None,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let counts = tx.tasks().status_counts().await.unwrap();
    assert_eq!(counts.tasks, vec![(TaskStatus::Pending, 2)]);
    assert_eq!(counts.runs, vec![(RunState::Queued, 1)]);
}

async fn local_message_ids_count_up(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.handled().next_local_message_id("shell").await.unwrap(),
        1
    );
    // Whether a number was used or not, it is never handed out again.
    assert_eq!(
        tx.handled().next_local_message_id("shell").await.unwrap(),
        2
    );
    assert_eq!(
        tx.handled().next_local_message_id("other").await.unwrap(),
        1
    );
    tx.commit().await.unwrap();
    drop(store);
    // The counter is the transport's, not a session's or a process's.
    let store = test.open().await;
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.handled().next_local_message_id("shell").await.unwrap(),
        3
    );
    tx.commit().await.unwrap();
}
