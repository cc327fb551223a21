//! What stays private: a skipped private task says nothing of itself in
//! public, and whichever command runs first creates private files.

use crate::support::{Home, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skipped_private_task_says_nothing_of_itself_through_why_and_go() {
    use crate::zulip::{Realm, Running, WAIT};
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    // Skipped by the default filter, whose reason quotes the design link.
    realm.fake.post_dm(
        realm.bob,
        &[realm.eagle],
        "!queue the export\nsee https://figma.com/file/payroll-leaks-names",
    );
    let store = crate::executor::home_store(&home).await;
    let skipped = crate::executor::wait_for(&store, || async {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks()
            .task(1)
            .await
            .unwrap()
            .is_some_and(|t| t.status == eagle::store::TaskStatus::Skip)
    })
    .await;
    assert!(skipped, "{}", eagle.log());
    realm.fake.post(realm.bob, "general", "peek", "!why task 1");
    realm
        .wait_replies("general", "peek", |r| !r.is_empty())
        .await;
    // An approver takes it anyway, in a public channel.
    realm.fake.post(realm.alex, "general", "peek", "!go 1");
    realm
        .wait_replies("general", "peek", |r| r.len() >= 2)
        .await;
    realm.fake.post(realm.bob, "general", "peek", "!why run 1");
    let replies = realm
        .wait_replies("general", "peek", |r| r.len() >= 3)
        .await;
    let posted = realm
        .fake
        .wait_until(WAIT, |f| !f.messages_in("executor", "run 1").is_empty())
        .await;
    assert!(posted, "{}", eagle.log());
    let public: Vec<String> = replies
        .iter()
        .chain(realm.fake.messages_in("executor", "run 1").iter())
        .map(|m| m.content.clone())
        .collect();
    let shown = public.join("\n");
    assert!(!shown.contains("payroll"), "{shown}");
    assert!(shown.contains("Audit trail of task 1"), "{shown}");
    assert!(shown.contains("a private task"), "{shown}");
    assert!(shown.contains("overrides the skip"), "{shown}");
    // In its own conversation, the reason is there.
    realm.fake.post_dm(realm.bob, &[realm.eagle], "!why task 1");
    let own = realm
        .fake
        .wait_until(WAIT, |f| {
            f.messages_from(realm.eagle)
                .iter()
                .any(|m| m.channel.is_none() && m.content.contains("Audit trail of task 1"))
        })
        .await;
    assert!(own);
    let dm: String = realm
        .fake
        .messages_from(realm.eagle)
        .into_iter()
        .filter(|m| m.channel.is_none() && m.content.contains("Audit trail of task 1"))
        .map(|m| m.content)
        .collect();
    assert!(dm.contains("payroll-leaks-names"), "{dm}");
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn whichever_command_runs_first_creates_private_files() {
    use std::os::unix::fs::PermissionsExt;
    for args in [
        &["migrate", "--profile", "eagle"][..],
        &["check", "--profile", "eagle"][..],
    ] {
        let home = Home::without_compiled_plugins();
        let out = home.run(args, "");
        let (stdout, stderr) = text(&out);
        let data = home.dir.path().join("data");
        let db = data.join("eagle.db");
        assert!(
            db.is_file(),
            "{args:?} made no database:\n{stdout}\n{stderr}"
        );
        for path in [&data, &db] {
            let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(
                mode & 0o077,
                0,
                "{args:?} made {} with mode {mode:o}",
                path.display()
            );
        }
        assert!(
            !stdout
                .lines()
                .any(|l| l.contains("the database") && l.contains("readable by other users")),
            "{args:?} warns about what it made:\n{stdout}"
        );
    }
}
