//! Commands in channels and direct messages: answers, long replies split,
//! what is ignored (bots, edits, Eagle's own posts), and mentions read from
//! the text.

use fake_zulip::{FakeConfig, StoredMessage};

use super::{Realm, Running, WAIT};

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
        replies[0]
            .content
            .contains("`!queue [--repo NAME] [title]`"),
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
