//! Eagle on Zulip, through the real `eagle` binary against the fake server:
//! commands in channels and direct messages, queue expiry, restarts, crashes,
//! rate limits, several instances, and what must never reach a log.

mod commands;
mod credentials;
mod delivery;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fake_zulip::{FakeConfig, FakeZulip, StoredMessage};

use crate::support::{CHILD_DEADLINE, Home, exit_within};

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
                    .any(|m| m.content.contains("`!queue [--repo NAME] [title]`"))
            })
            .await;
        let marker = replies
            .iter()
            .rposition(|m| m.content.contains("`!queue [--repo NAME] [title]`"))
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
