//! Eagle in a chat with careless and hostile people, and with servers and
//! instances that misbehave, through the real binary and the fake Zulip:
//! bounded work per message, mentions that never ping, private tasks that
//! stay private, a per-sender rate, refused replies that block nothing, and
//! exactly-once delivery by two instances under a tight rate limit.

use std::time::Duration;

use fake_zulip::{Fault, Route};

use crate::support::{Db, TestDb};
use crate::zulip::{Realm, Running, WAIT};

/// Longer than a rate-limit window of the tests below.
const LONG_WAIT: Duration = Duration::from_secs(90);
/// Three 40 s windows and a margin.
const PAIR_WAIT: Duration = Duration::from_secs(150);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_message_does_bounded_work_and_echoed_mentions_never_ping() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    let mut lines = vec!["!queue @**all** look at this @*admins* @_**Alex**".to_string()];
    lines.extend((1..=200).map(|i| format!("!queue task {i}")));
    realm
        .fake
        .post(realm.alex, "general", "flood", &lines.join("\n"));
    let replies = realm
        .wait_replies("general", "flood", |r| {
            r.iter().any(|m| m.content.contains("were not run"))
        })
        .await;
    assert!(
        replies.len() <= 4,
        "one message took {} replies",
        replies.len()
    );
    let all: String = replies.iter().map(|m| m.content.as_str()).collect();
    assert!(
        all.contains(
            "191 more command(s) in this message were not run: one message runs at most 10"
        ),
        "{all}"
    );
    assert!(
        !all.contains("@**all**") && !all.contains("@*admins*"),
        "{all}"
    );
    // Nobody was pinged: not Alex, not the whole channel.
    for m in &replies {
        assert!(m.mentioned_user_ids.is_empty(), "{m:?}");
        assert!(!m.wildcard_mentioned, "{m:?}");
    }
    // Listing the tasks later pings nobody either.
    realm.fake.post(realm.bob, "general", "flood", "!queue");
    let replies = realm
        .wait_replies("general", "flood", |r| {
            r.iter().any(|m| m.content.contains("Open tasks"))
        })
        .await;
    let listing = replies
        .iter()
        .find(|m| m.content.contains("Open tasks"))
        .unwrap();
    assert!(
        listing.content.contains("look at this"),
        "{}",
        listing.content
    );
    assert!(
        !listing.wildcard_mentioned && listing.mentioned_user_ids.is_empty(),
        "{listing:?}"
    );
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_over_the_rate_gets_one_notice_and_approvers_are_exempt() {
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_CHAT__SENDER_RATE", "3");
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    for _ in 0..6 {
        realm.fake.post(realm.bob, "general", "bob", "!status");
    }
    for _ in 0..6 {
        realm.fake.post(realm.alex, "general", "alex", "!status");
    }
    // Messages are handled in order: once Alex's six are answered, Bob's
    // six have all been seen.
    realm
        .wait_replies("general", "alex", |r| r.len() >= 6)
        .await;
    let bob = realm.replies("general", "bob");
    let notices = bob
        .iter()
        .filter(|m| m.content.contains("more than 3 messages a minute"))
        .count();
    assert_eq!(bob.len(), 4, "3 answers and 1 notice: {bob:#?}");
    assert_eq!(notices, 1);
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_tasks_stay_where_they_were_asked() {
    let realm = Realm::start().await;
    realm.fake.add_channel("secret", false);
    for user in [realm.eagle, realm.alex] {
        realm.fake.subscribe(user, "secret");
    }
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    realm.fake.post_dm(
        realm.bob,
        &[realm.eagle],
        "!queue the payroll export leaks names",
    );
    realm.fake.post(
        realm.alex,
        "secret",
        "plans",
        "!queue acquire the competitor",
    );
    let ok = realm
        .fake
        .wait_until(WAIT, |f| {
            f.messages_from(realm.eagle)
                .iter()
                .filter(|m| m.content.starts_with("Queued task"))
                .count()
                >= 2
        })
        .await;
    assert!(ok);
    realm.fake.post(realm.bob, "general", "peek", "!status 1");
    realm.fake.post(realm.bob, "general", "peek", "!status 2");
    realm.fake.post(realm.bob, "general", "peek", "!queue");
    let replies = realm
        .wait_replies("general", "peek", |r| r.len() >= 3)
        .await;
    let shown: String = replies.iter().map(|m| m.content.as_str()).collect();
    assert!(
        !shown.contains("payroll") && !shown.contains("competitor"),
        "{shown}"
    );
    assert!(shown.contains("a private task"), "{shown}");
    // Where it was asked, it is shown.
    realm.fake.post(realm.alex, "secret", "plans", "!status 2");
    let here = realm
        .wait_replies("secret", "plans", |r| r.len() >= 2)
        .await;
    assert!(
        here[1].content.contains("acquire the competitor"),
        "{}",
        here[1].content
    );
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_the_server_refuses_blocks_nothing() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    // A proxy refuses the next reply with an HTML 413: for good.
    realm
        .fake
        .inject(Route::SendMessage, Fault::Status413Html, 1);
    realm.fake.post(realm.alex, "general", "a", "!help");
    realm.fake.post(realm.alex, "general", "b", "!status");
    realm.wait_replies("general", "b", |r| !r.is_empty()).await;
    realm.fake.post(realm.alex, "general", "a", "!status");
    let a = realm.wait_replies("general", "a", |r| !r.is_empty()).await;
    assert_eq!(a.len(), 1, "the refused reply came back: {a:#?}");
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("a delivery is given up"), "{log}");
    let out = home.run(&["check", "--profile", "eagle"], "");
    let (stdout, _) = crate::support::text(&out);
    assert!(
        stdout.contains("WARN  outbox: 1 message(s) could not be delivered"),
        "{stdout}"
    );
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_postgres_under_a_tight_rate_limit_answer_each_command_once() {
    let db = TestDb::new(Db::Postgres).await;
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &db.url)
        .set("EAGLE_CHAT__SENDER_RATE", "0");
    let a = Running::start(&home, "eagle");
    let b = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 2).await;
    // A window well past the outbox lease (30 s): the sending instance
    // waits in its pacer past the lease, and the other must not take over
    // the reply it is about to send.
    realm.fake.set_rate_limit(&[(Duration::from_secs(40), 12)]);
    const COMMANDS: usize = 15;
    for i in 1..=COMMANDS {
        realm
            .fake
            .post(realm.alex, "general", "pair", &format!("!queue pair {i}"));
    }
    let answered = |f: &fake_zulip::FakeZulip, n: usize| {
        f.messages_in("general", "pair")
            .iter()
            .filter(|m| m.sender_id == realm.eagle)
            .count()
            >= n
    };
    // Fifteen replies and the instances' own calls share twelve calls per
    // 40 s: two windows at least, three on a loaded machine.
    let slow = |what: &str| {
        format!(
            "{what}: {} of the replies after {}s; 429s served: {}\n{}\n{}",
            realm.replies("general", "pair").len(),
            PAIR_WAIT.as_secs(),
            realm.fake.count_status(429),
            a.log(),
            b.log()
        )
    };
    assert!(
        realm
            .fake
            .wait_until(PAIR_WAIT, |f| answered(f, COMMANDS))
            .await,
        "{}",
        slow("the commands")
    );
    // A marker after them: once it is answered, a duplicate would be there too.
    realm.fake.post(realm.alex, "general", "pair", "!status");
    assert!(
        realm
            .fake
            .wait_until(PAIR_WAIT, |f| answered(f, COMMANDS + 1))
            .await,
        "{}",
        slow("the marker")
    );
    for running in [a, b] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    let replies = realm.replies("general", "pair");
    assert_eq!(
        replies.len(),
        COMMANDS + 1,
        "a reply went out twice: {replies:#?}"
    );
    let mut distinct: Vec<&str> = replies.iter().map(|m| m.content.as_str()).collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), COMMANDS + 1, "{replies:#?}");
    // The rate limit was kept for replies: the pacer of the instance that
    // sends reads the server's count, whoever else spends from it.
    let refused: Vec<_> = realm
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.status == 429 && r.path == "/api/v1/messages")
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_the_server_will_not_describe_is_never_taken_for_a_person() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    // The lookups of the bot fail twice before the server answers.
    realm.fake.inject(Route::GetUser, Fault::Status503, 2);
    realm
        .fake
        .post(realm.other_bot, "general", "bots", "!queue from a bot");
    realm.fake.post(realm.alex, "general", "people", "!status");
    // Messages are handled in order: Alex's answer comes after the bot's
    // message was decided.
    realm
        .wait_replies("general", "people", |r| !r.is_empty())
        .await;
    assert!(realm.replies("general", "bots").is_empty());
    let lookups = realm
        .fake
        .requests()
        .iter()
        .filter(|r| r.path == format!("/api/v1/users/{}", realm.other_bot))
        .count();
    assert_eq!(lookups, 3, "asked until answered");
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_queues_are_registered_again_with_growing_pauses_and_a_lying_longpoll_is_harmless()
{
    let realm = Realm::with(fake_zulip::FakeConfig {
        // Far past any sane poll: arithmetic on it must not overflow.
        longpoll_timeout_secs: i64::MAX as u64,
        ..fake_zulip::FakeConfig::default()
    })
    .await;
    let home = realm.home();
    // Every new queue is refused at its first poll, three times over.
    realm.fake.inject(Route::Events, Fault::BadEventQueue, 3);
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    realm.fake.post(realm.alex, "general", "after", "!status");
    realm
        .wait_replies("general", "after", |r| !r.is_empty())
        .await;
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    let registers = realm
        .fake
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v1/register")
        .count();
    assert_eq!(registers, 4, "{log}");
    let refused: Vec<u32> = log
        .lines()
        .filter(|l| l.contains("registering again after a pause"))
        .filter_map(|l| {
            l.split("refused=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(
        refused,
        [1, 2, 3],
        "the pause grows with each refusal:\n{log}"
    );
    // A log written to a file is plain text.
    assert!(!log.contains('\u{1b}'), "{log}");
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_that_asking_again_cannot_change_stops_eagle_with_a_clear_message() {
    let realm = Realm::start().await;
    let home = realm.home();
    realm.fake.inject(Route::Register, Fault::BadRequest, 100);
    let mut eagle = Running::start(&home, "eagle");
    let (code, log) = eagle
        .exited_within(LONG_WAIT)
        .await
        .expect("eagle kept asking a server that refuses it");
    assert_ne!(code, Some(0), "{log}");
    assert!(log.contains("injected refusal"), "{log}");
    let registers = realm
        .fake
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v1/register")
        .count();
    assert_eq!(registers, 5, "{log}");
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_in_one_topic_keep_their_order_through_a_failed_delivery() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    // The first reply's request hangs until it times out; the second is
    // stored meanwhile, and must wait for the first one's retry.
    realm.fake.inject(Route::SendMessage, Fault::Hang, 1);
    realm
        .fake
        .post(realm.alex, "general", "order", "!queue first");
    realm
        .fake
        .post(realm.alex, "general", "order", "!queue second");
    let replies = realm
        .fake
        .wait_until(LONG_WAIT, |f| {
            f.messages_in("general", "order")
                .iter()
                .filter(|m| m.sender_id == realm.eagle)
                .count()
                >= 2
        })
        .await;
    assert!(replies);
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    let replies: Vec<String> = realm
        .replies("general", "order")
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(
        replies,
        ["Queued task #1: first", "Queued task #2: second"],
        "{log}"
    );
    realm.fake.assert_clean();
}
