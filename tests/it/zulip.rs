//! Eagle on Zulip, through the real `eagle` binary against the fake server:
//! commands in channels and direct messages, queue expiry, restarts, crashes,
//! rate limits, several instances, and what must never reach a log.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fake_zulip::{FakeConfig, FakeZulip, Fault, Route, StoredMessage};

use crate::cli::encodings_of;
use crate::support::{CHILD_DEADLINE, Home, exit_within, finish};

/// Generous: the binary starts, registers and answers well within it.
pub(crate) use crate::support::WAIT;

/// How long a stopped `eagle run` may take to exit: it finishes what is
/// due and deletes its queue, in well under this.
const STOP_DEADLINE: Duration = Duration::from_secs(60);

/// A realm with Eagle's two bots, two people, another bot and two channels.
pub(crate) struct Realm {
    pub(crate) fake: FakeZulip,
    pub(crate) eagle: u64,
    pub(crate) executor: u64,
    pub(crate) alex: u64,
    pub(crate) bob: u64,
    pub(crate) other_bot: u64,
}

impl Realm {
    pub(crate) async fn start() -> Realm {
        Realm::with(FakeConfig::default()).await
    }

    pub(crate) async fn with(config: FakeConfig) -> Realm {
        let fake = FakeZulip::start(config).await;
        let eagle = fake.add_user("eagle-bot@example.com", "Eagle", true);
        let executor = fake.add_user("executor-bot@example.com", "Исполнитель", true);
        let alex = fake.add_user("alex@example.com", "Alex", false);
        let bob = fake.add_user("bob@example.com", "Bob", false);
        let other_bot = fake.add_user("notifier-bot@example.com", "Notifier", true);
        for channel in ["general", "executor"] {
            fake.add_channel(channel, true);
            for user in [eagle, executor, alex, bob, other_bot] {
                fake.subscribe(user, channel);
            }
        }
        Realm {
            fake,
            eagle,
            executor,
            alex,
            bob,
            other_bot,
        }
    }

    /// A home whose profiles talk to this realm.
    pub(crate) fn home(&self) -> Home {
        let mut home = Home::new();
        for (profile, user, email) in [
            ("eagle", self.eagle, "eagle-bot@example.com"),
            ("executor", self.executor, "executor-bot@example.com"),
        ] {
            std::fs::write(
                home.profiles().join(format!("{profile}.zuliprc")),
                format!(
                    "[api]\nemail={email}\nkey={}\nsite={}\n",
                    self.fake.api_key(user),
                    self.fake.url()
                ),
            )
            .unwrap();
        }
        home.set("EAGLE_APPROVERS", "alex@example.com");
        home.set("EAGLE_OWNER", "alex@example.com");
        home.set("RUST_LOG", "eagle=debug,warn");
        // The executor needs a worker command to start: the demo worker.
        home.set(
            "EAGLE_RUNNER__WORKER_COMMAND",
            &format!(
                "{} demo-worker {{prompt}}",
                crate::support::eagle_bin().display()
            ),
        );
        home
    }

    pub(crate) fn replies(&self, channel: &str, topic: &str) -> Vec<StoredMessage> {
        self.fake
            .messages_in(channel, topic)
            .into_iter()
            .filter(|m| m.sender_id == self.eagle)
            .collect()
    }

    /// Waits until Eagle's replies in a topic satisfy `check`.
    pub(crate) async fn wait_replies(
        &self,
        channel: &str,
        topic: &str,
        check: impl Fn(&[StoredMessage]) -> bool,
    ) -> Vec<StoredMessage> {
        let (wanted_channel, wanted_topic, eagle) =
            (channel.to_string(), topic.to_string(), self.eagle);
        let ok = self
            .fake
            .wait_until(WAIT, move |fake| {
                let replies: Vec<StoredMessage> = fake
                    .messages_in(&wanted_channel, &wanted_topic)
                    .into_iter()
                    .filter(|m| m.sender_id == eagle)
                    .collect();
                check(&replies)
            })
            .await;
        let replies = self.replies(channel, topic);
        assert!(
            ok,
            "timed out; replies so far: {:#?}",
            replies.iter().map(|m| &m.content).collect::<Vec<_>>()
        );
        replies
    }

    /// Waits until `count` processes of a bot are long-polling their queues
    /// (up, caught up, and listening).
    pub(crate) async fn wait_listening(&self, user: u64, count: usize) {
        let ok = self
            .fake
            .wait_until(WAIT, move |fake| {
                fake.queues()
                    .iter()
                    .filter(|q| q.user_id == user && q.parked)
                    .count()
                    >= count
            })
            .await;
        assert!(
            ok,
            "no event queue for user {user}: {:?}",
            self.fake.queues().len()
        );
    }

    /// Posts `!help` in a topic and waits for its answer: Eagle answers a
    /// topic in order, so everything due there before has been settled.
    /// Returns the replies before the marker's.
    pub(crate) async fn settle(&self, channel: &str, topic: &str) -> Vec<StoredMessage> {
        let before = self.replies(channel, topic).len();
        self.fake.post(self.alex, channel, topic, "!help");
        let replies = self
            .wait_replies(channel, topic, |r| {
                r.iter()
                    .skip(before)
                    .any(|m| m.content.contains("`!queue [title]`"))
            })
            .await;
        let marker = replies
            .iter()
            .rposition(|m| m.content.contains("`!queue [title]`"))
            .unwrap();
        replies[..marker].to_vec()
    }
}

/// A running `eagle run`.
pub(crate) struct Running {
    child: Child,
    log: PathBuf,
}

impl Running {
    pub(crate) fn start(home: &Home, profile: &str) -> Running {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = home.dir.path().join(format!("{profile}-{n}.log"));
        let child = home
            .command(&["run", "--profile", profile])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn eagle run");
        Running { child, log }
    }

    /// The process's id (for signals a test sends it).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then the exit status (a process that does not exit within
    /// [`STOP_DEADLINE`] is killed and fails the test).
    pub(crate) fn stop(mut self) -> (Option<i32>, String) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        match exit_within(&mut self.child, STOP_DEADLINE) {
            Some(status) => (status.code(), self.log()),
            None => panic!(
                "eagle run did not exit within {STOP_DEADLINE:?} of SIGTERM; killed it:\n{}",
                self.log()
            ),
        }
    }

    /// SIGKILL: no chance to clean up.
    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit on its own (at most
    /// [`CHILD_DEADLINE`], then it is killed and fails the test).
    pub(crate) fn wait(mut self) -> (Option<i32>, String) {
        match exit_within(&mut self.child, CHILD_DEADLINE) {
            Some(status) => (status.code(), self.log()),
            None => panic!(
                "eagle run did not exit on its own within {CHILD_DEADLINE:?}; killed it:\n{}",
                self.log()
            ),
        }
    }

    /// Waits at most `timeout` for the process to exit on its own (checked
    /// every 50 ms); `None` if it is still running then.
    pub(crate) async fn exited_within(
        &mut self,
        timeout: Duration,
    ) -> Option<(Option<i32>, String)> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some((status.code(), self.log()));
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_in_channels_and_direct_messages() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;

    let help = realm.fake.post(realm.alex, "general", "Tabs", "!help");
    let replies = realm
        .wait_replies("general", "Tabs", |r| !r.is_empty())
        .await;
    assert!(
        replies[0].content.contains("`!queue [title]`"),
        "{}",
        replies[0].content
    );

    // The topic name is matched without regard to case: one conversation.
    let queue = realm.fake.post(
        realm.alex,
        "General",
        "tabs",
        "!queue Fix the tab preview\nIt sticks after closing.",
    );
    realm
        .wait_replies("general", "Tabs", |r| r.len() >= 2)
        .await;
    realm
        .fake
        .post(realm.bob, "general", "Tabs", "@**Eagle** !status");
    let replies = realm
        .wait_replies("general", "Tabs", |r| r.len() >= 3)
        .await;
    assert_eq!(replies[1].content, "Queued task #1: Fix the tab preview");
    assert!(
        replies[2].content.contains("#1 Fix the tab preview (")
            && replies[2].content.contains(", from Alex)"),
        "{}",
        replies[2].content
    );

    // A direct message gets its answer in the same conversation.
    let dm = realm.fake.post_dm(realm.bob, &[realm.eagle], "!status 1");
    let ok = realm
        .fake
        .wait_until(WAIT, |f| {
            f.messages_from(realm.eagle)
                .iter()
                .any(|m| m.channel.is_none() && m.dm_recipients.contains(&realm.bob))
        })
        .await;
    assert!(ok, "no DM reply");
    let answer = realm
        .fake
        .messages_from(realm.eagle)
        .into_iter()
        .find(|m| m.channel.is_none())
        .unwrap();
    assert!(
        answer.content.contains("**Task #1**: Fix the tab preview"),
        "{}",
        answer.content
    );

    // An @-mention that is not a command is captured into the inbox.
    realm.fake.post(
        realm.alex,
        "general",
        "Ideas",
        "@**Eagle** the sidebar flickers on resize\nseen on 14.2",
    );
    let replies = realm
        .wait_replies("general", "Ideas", |r| !r.is_empty())
        .await;
    assert!(
        replies[0]
            .content
            .starts_with("Queued task #2: the sidebar flickers on resize"),
        "{}",
        replies[0].content
    );

    // Bad input gets the usage.
    let bad = realm
        .fake
        .post(realm.alex, "general", "Ideas", "!status banana");
    let replies = realm
        .wait_replies("general", "Ideas", |r| r.len() >= 2)
        .await;
    assert!(
        replies[1].content.contains("Usage: `!status"),
        "{}",
        replies[1].content
    );

    // Approver-only commands are refused for others, with the reason.
    realm.fake.post(realm.bob, "general", "Ideas", "!approve 3");
    let replies = realm
        .wait_replies("general", "Ideas", |r| r.len() >= 3)
        .await;
    assert!(
        replies[2].content.contains("You may not use `!approve`"),
        "{}",
        replies[2].content
    );

    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    // Every command got a reply, so none got a reaction (read after the
    // stop, which flushes what was due).
    for message in [help, queue, dm, bad] {
        assert_eq!(realm.fake.reactions_on(message), [], "{message}");
    }
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_replies_are_split_not_truncated() {
    let realm = Realm::with(FakeConfig {
        max_message_length: 400,
        ..FakeConfig::default()
    })
    .await;
    let mut home = realm.home();
    // Every part of the whole list, however many commands there are.
    home.set("EAGLE_CHAT__MAX_REPLY_PARTS", "20");
    let _eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    realm.fake.post(realm.alex, "general", "help", "!help");
    let want = eagle::chat::commands::help_text(None);
    let replies = realm
        .wait_replies("general", "help", |r| {
            r.iter().map(|m| m.content.len()).sum::<usize>() + r.len() >= want.len()
        })
        .await;
    assert!(replies.len() >= 3, "{} parts", replies.len());
    for part in &replies {
        assert!(part.content.chars().count() <= 400, "a part is too long");
        assert!(!part.content.contains("[message truncated]"));
    }
    let joined: Vec<&str> = replies.iter().flat_map(|m| m.content.lines()).collect();
    assert_eq!(joined, want.lines().collect::<Vec<_>>());
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_posted_during_a_queue_gap_is_answered_once() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    realm
        .fake
        .post(realm.alex, "general", "gap", "!queue before the gap");
    realm.wait_replies("general", "gap", |r| r.len() == 1).await;

    realm.fake.expire_queues_of(realm.eagle);
    realm
        .fake
        .post(realm.alex, "general", "gap", "!queue during the gap");
    let replies = realm.wait_replies("general", "gap", |r| r.len() >= 2).await;
    assert_eq!(replies[1].content, "Queued task #2: during the gap");

    // A server restart that loses every queue: same.
    realm.fake.restart(false);
    realm
        .fake
        .post(realm.alex, "general", "gap", "!queue after the restart");
    let replies = realm.wait_replies("general", "gap", |r| r.len() >= 3).await;
    assert_eq!(replies[2].content, "Queued task #3: after the restart");

    // And nothing more: each command exactly once.
    realm.fake.post(realm.alex, "general", "gap", "!status");
    let replies = realm.wait_replies("general", "gap", |r| r.len() >= 4).await;
    assert_eq!(replies.len(), 4, "{replies:#?}");
    assert!(
        replies[3].content.contains("**Open tasks** (3)"),
        "{}",
        replies[3].content
    );
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("the event queue expired; registering a new one"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_posted_while_stopped_are_answered_after_start() {
    let realm = Realm::start().await;
    let mut home = realm.home();
    // History from before the very first start is not replayed.
    realm.fake.post(
        realm.alex,
        "general",
        "old",
        "!queue from before Eagle existed",
    );
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    // A command after the start is answered; the old one never is.
    realm.fake.post(realm.alex, "general", "new", "!status");
    realm
        .wait_replies("general", "new", |r| !r.is_empty())
        .await;
    assert!(realm.replies("general", "old").is_empty());
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        realm.fake.queues().is_empty(),
        "the queue was not deleted on shutdown: {log}"
    );

    realm.fake.post(
        realm.alex,
        "general",
        "offline",
        "!queue while you were out",
    );
    let eagle = Running::start(&home, "eagle");
    let replies = realm
        .wait_replies("general", "offline", |r| !r.is_empty())
        .await;
    assert_eq!(replies[0].content, "Queued task #1: while you were out");
    let (code, _) = eagle.stop();
    assert_eq!(code, Some(0));

    // Commands older than late_command_age are reported, not carried out.
    home.set("EAGLE_ZULIP__LATE_COMMAND_AGE", "0s");
    realm
        .fake
        .post(realm.alex, "general", "offline", "!queue stale");
    let eagle = Running::start(&home, "eagle");
    let replies = realm
        .wait_replies("general", "offline", |r| r.len() >= 2)
        .await;
    assert!(
        replies[1].content.starts_with("I saw this message late"),
        "{}",
        replies[1].content
    );
    let (code, _) = eagle.stop();
    assert_eq!(code, Some(0));
    // Read after the stop: nothing else was said (the stale command did not run).
    let replies = realm.replies("general", "offline");
    assert_eq!(replies.len(), 2, "{replies:#?}");
    assert!(realm.replies("general", "old").is_empty());
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_reply_is_confirmed_loses_and_doubles_nothing() {
    let realm = Realm::start().await;
    let home = realm.home();

    // 1. The reply reached the server, but its answer never came back.
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    realm
        .fake
        .inject(Route::SendMessage, Fault::AcceptThenHang, 1);
    realm
        .fake
        .post(realm.alex, "general", "crash", "!queue survive a crash");
    realm
        .wait_replies("general", "crash", |r| r.len() == 1)
        .await;
    eagle.kill();
    let eagle = Running::start(&home, "eagle");
    let replies = realm.settle("general", "crash").await;
    assert_eq!(replies.len(), 1, "the reply was posted twice: {replies:#?}");

    // 2. The reply never reached the server.
    realm.fake.inject(Route::SendMessage, Fault::Hang, 1);
    realm
        .fake
        .post(realm.alex, "general", "crash", "!queue and another");
    // The attempt is made, and hangs (status 0: no answer yet).
    let saw_attempt = realm
        .fake
        .wait_until(WAIT, |f| {
            f.requests().iter().any(|r| {
                r.method == "POST"
                    && r.path == "/api/v1/messages"
                    && r.status == 0
                    && r.params
                        .get("content")
                        .is_some_and(|c| c.contains("and another"))
            })
        })
        .await;
    assert!(saw_attempt);
    eagle.kill();
    let eagle = Running::start(&home, "eagle");
    let replies: Vec<_> = realm
        .settle("general", "crash")
        .await
        .into_iter()
        .filter(|m| !m.content.contains("`!queue [title]`"))
        .collect();
    assert_eq!(
        replies
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>(),
        [
            "Queued task #1: survive a crash",
            "Queued task #2: and another"
        ],
        "{:#?}\n{}",
        realm.replies("general", "crash"),
        eagle.log()
    );
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    // The killed sender's lease was taken over at once, not waited out.
    assert!(
        log.contains("the previous sender died; taking over its lease"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_server_errors_lose_nothing() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;

    realm
        .fake
        .inject(Route::SendMessage, Fault::RateLimit(1.5), 1);
    realm
        .fake
        .post(realm.alex, "general", "limits", "!queue despite a 429");
    let replies = realm
        .wait_replies("general", "limits", |r| !r.is_empty())
        .await;
    assert_eq!(replies[0].content, "Queued task #1: despite a 429");
    let sends: Vec<_> = realm
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/api/v1/messages")
        .collect();
    assert_eq!(sends[0].status, 429);
    assert!(
        sends[1].at.duration_since(sends[0].at) >= Duration::from_millis(1500),
        "Retry-After 1.5 was not honoured: {:?}",
        sends[1].at.duration_since(sends[0].at)
    );

    realm.fake.inject(Route::Events, Fault::Status502Html, 3);
    // The poll in flight answers this one; the next three polls get a 502
    // page each, and only then is the command after them read.
    realm.fake.post(realm.alex, "general", "limits", "!status");
    realm
        .wait_replies("general", "limits", |r| r.len() >= 2)
        .await;
    let served = realm
        .fake
        .wait_until(WAIT, |f| f.count_status(502) >= 3)
        .await;
    assert!(served, "the 502 pages were not served");
    realm
        .fake
        .post(realm.alex, "general", "limits", "!queue after three 502s");
    let replies = realm
        .wait_replies("general", "limits", |r| r.len() >= 3)
        .await;
    assert_eq!(replies[2].content, "Queued task #2: after three 502s");

    realm.fake.inject(Route::Events, Fault::NotJson, 1);
    realm.fake.post(
        realm.alex,
        "general",
        "limits",
        "!queue after a non-JSON answer",
    );
    let replies = realm
        .wait_replies("general", "limits", |r| r.len() >= 4)
        .await;
    assert_eq!(
        replies[3].content,
        "Queued task #3: after a non-JSON answer"
    );
    assert!(realm.fake.count_status(502) >= 3);
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
}

async fn burst(limit: &[(Duration, u32)]) {
    let realm = Realm::start().await;
    realm.fake.set_rate_limit(limit);
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    for i in 1..=30 {
        realm.fake.post(
            realm.alex,
            "general",
            "burst",
            &format!("!queue burst item {i}"),
        );
    }
    let replies = realm
        .wait_replies("general", "burst", |r| r.len() >= 30)
        .await;
    let got: Vec<String> = replies.iter().map(|m| m.content.clone()).collect();
    let want: Vec<String> = (1..=30)
        .map(|i| format!("Queued task #{i}: burst item {i}"))
        .collect();
    assert_eq!(got, want, "answered out of order or more than once");
    assert_eq!(realm.fake.count_status(429), 0, "the pacing hit the limit");
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("pacing to the server's rate limit"),
        "the limit never bound"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_answered_in_full_under_a_20_per_4s_limit() {
    burst(&[(Duration::from_secs(4), 20)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_answered_in_full_under_a_10_per_2s_limit() {
    burst(&[(Duration::from_secs(2), 10)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_profiles_run_at_once_and_two_instances_never_both_answer() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle_a = Running::start(&home, "eagle");
    let eagle_b = Running::start(&home, "eagle");
    let executor = Running::start(&home, "executor");
    realm.wait_listening(realm.eagle, 2).await;
    realm.wait_listening(realm.executor, 1).await;

    for i in 1..=5 {
        realm
            .fake
            .post(realm.alex, "general", "pair", &format!("!queue pair {i}"));
    }
    let replies = realm
        .wait_replies("general", "pair", |r| r.len() >= 5)
        .await;
    realm.fake.post(realm.alex, "general", "pair", "!status");
    let replies_after = realm
        .wait_replies("general", "pair", |r| r.len() >= 6)
        .await;
    assert_eq!(replies.len(), 5);
    assert_eq!(
        replies_after.len(),
        6,
        "a command was answered twice: {replies_after:#?}"
    );
    // The executor ignores commands, and answers a direct message by pointing to Eagle.
    assert!(realm.fake.messages_from(realm.executor).is_empty());
    realm.fake.post_dm(realm.bob, &[realm.executor], "!status");
    let ok = realm
        .fake
        .wait_until(WAIT, |f| !f.messages_from(realm.executor).is_empty())
        .await;
    assert!(ok);
    let pointer = &realm.fake.messages_from(realm.executor)[0];
    assert!(
        pointer.content.contains("go to Eagle"),
        "{}",
        pointer.content
    );
    assert_eq!(
        pointer
            .dm_recipients
            .iter()
            .filter(|id| **id == realm.bob)
            .count(),
        1
    );

    for running in [eagle_a, eagle_b, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bots_edits_and_own_messages_change_nothing() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    let original = realm
        .fake
        .post(realm.alex, "general", "quiet", "!queue the original");
    realm
        .wait_replies("general", "quiet", |r| r.len() == 1)
        .await;
    realm.fake.edit(original, "!queue the edited one");
    realm
        .fake
        .post(realm.other_bot, "general", "quiet", "!queue from a bot");
    realm.fake.post(
        realm.executor,
        "general",
        "quiet",
        "[STATUS: investigation] run:1 looking",
    );
    realm
        .fake
        .post(realm.eagle, "general", "quiet", "!queue from myself");
    realm.fake.post(realm.alex, "general", "quiet", "!status");
    let answered = |r: &[StoredMessage]| {
        r.iter()
            .filter(|m| !m.content.starts_with("!queue"))
            .count()
    };
    let replies = realm
        .wait_replies("general", "quiet", move |r| answered(r) >= 2)
        .await;
    // Only the original and the sentinel were answered (the post as Eagle itself is not a reply).
    let answers: Vec<&str> = replies
        .iter()
        .map(|m| m.content.as_str())
        .filter(|c| !c.starts_with("!queue"))
        .collect();
    assert_eq!(answers.len(), 2, "{answers:#?}");
    assert!(answers[1].contains("**Open tasks** (1)"), "{}", answers[1]);
    let (code, _) = eagle.stop();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_without_flags_are_read_from_the_text() {
    let realm = Realm::start().await;
    realm.fake.add_channel("random", true);
    realm.fake.subscribe(realm.alex, "random");
    let mut home = realm.home();
    home.set("EAGLE_ZULIP__ALL_PUBLIC_STREAMS", "true");
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    realm.fake.post(
        realm.alex,
        "random",
        "drive-by",
        "hey @**Eagle** the dock icon bounces forever",
    );
    let replies = realm
        .wait_replies("random", "drive-by", |r| !r.is_empty())
        .await;
    assert!(
        replies[0]
            .content
            .starts_with("Queued task #1: hey the dock icon bounces forever"),
        "{}",
        replies[0].content
    );
    // Thanks, a decision in prose and a bare question are answered, never
    // queued (and the decision decides nothing); work still is captured.
    let said = [
        ("@**Eagle** thanks!", "You're welcome."),
        (
            "@**Eagle** yes merge run 1",
            "I take decisions only as commands, so nothing was approved or queued: `!approve 1 <request>`",
        ),
        (
            "@**Eagle** what is run 1 waiting on?",
            "I answer questions about the work with commands",
        ),
        (
            "@**Eagle** please fix the login crash on Safari",
            "Queued task #2: please fix the login crash on Safari",
        ),
    ];
    for (i, (text, answer)) in said.iter().enumerate() {
        realm.fake.post(realm.alex, "random", "drive-by", text);
        let replies = realm
            .wait_replies("random", "drive-by", |r| r.len() > i + 1)
            .await;
        assert!(
            replies[i + 1].content.starts_with(answer),
            "{text}: {}",
            replies[i + 1].content
        );
    }
    let (code, _) = eagle.stop();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_stops_with_a_message_naming_the_profile() {
    let realm = Realm::start().await;
    let home = realm.home();
    let rc = home.profiles().join("eagle.zuliprc");
    let text = std::fs::read_to_string(&rc).unwrap();
    let key = realm.fake.api_key(realm.eagle);
    std::fs::write(&rc, text.replace(&key, "0000000000WRONGKEY000000000000AB")).unwrap();
    let (code, log) = Running::start(&home, "eagle").wait();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("profile eagle: the server refused the bot's credentials (UNAUTHORIZED: Invalid API key)"),
        "{log}"
    );
    let out = home.run(&["check"], "");
    let (stdout, _) = crate::support::text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains("FAIL  profile eagle: the server refused"),
        "{stdout}"
    );
}

/// Runs `eagle check` off the runtime's threads (the fake serves on them).
async fn check(home: &Home, profile: &str) -> (Option<i32>, String) {
    let child = home
        .command(&["check", "--profile", profile])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn eagle check");
    let out = tokio::task::spawn_blocking(move || finish(child, b"", "eagle check"))
        .await
        .unwrap();
    let (stdout, stderr) = crate::support::text(&out);
    (out.status.code(), format!("{stdout}{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_verifies_credentials_subscriptions_and_plugins() {
    let realm = Realm::start().await;
    let mut home = realm.home();
    let (code, out) = check(&home, "executor").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("signed in to"), "{out}");
    assert!(out.contains("subscribed to #executor"), "{out}");

    realm.fake.unsubscribe(realm.executor, "executor");
    let (code, out) = check(&home, "executor").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("FAIL  not subscribed to #executor: subscribe Исполнитель to it"),
        "{out}"
    );

    // Eagle's plugins must load.
    let (code, out) = check(&home, "eagle").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("ok    policy plugin default-approval 0.1.0"),
        "{out}"
    );
    let plugins = home.dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::write(plugins.join("broken.wasm"), b"not a component").unwrap();
    home.set("EAGLE_POLICY__LOAD_ALL", "true");
    let (code, out) = check(&home, "eagle").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("FAIL  policy plugin") && out.contains("broken.wasm"),
        "{out}"
    );
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_api_key_reaches_a_trace_log() {
    let realm = Realm::start().await;
    let mut home = realm.home();
    // The plugins compiled before trace logging is on (the home's copy of
    // the shared cache has them unless the binary's engine changed):
    // Cranelift logging every instruction would make a compile take minutes.
    let warm = home.run(&["policy", "list"], "");
    assert!(warm.status.success());
    home.set("RUST_LOG", "trace");
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    realm.fake.post(realm.alex, "general", "secret", "!status");
    realm
        .wait_replies("general", "secret", |r| !r.is_empty())
        .await;
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0));
    assert!(log.contains("TRACE"), "trace logging was not on");
    let key = realm.fake.api_key(realm.eagle);
    for form in encodings_of("eagle-bot@example.com", &key) {
        assert!(!log.contains(&form), "the log leaks the key as {form:?}");
    }
}
