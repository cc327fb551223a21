//! Sending, fetching, mentions, edits and reactions.

use reqwest::Method;
use serde_json::{Value, json};

use super::Realm;
use crate::FakeConfig;

fn contents(answer: &Value) -> Vec<String> {
    answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn send_in_every_form_and_fetch_with_anchors() {
    let realm = Realm::start(FakeConfig {
        max_message_length: 40,
        ..FakeConfig::default()
    })
    .await;
    let eagle = realm.client(realm.eagle);
    let channel_id = realm
        .zulip
        .shared
        .read()
        .channel_by_name("executor")
        .unwrap()
        .id
        .to_string();
    let ids_to = format!("[{}]", realm.alex);
    let forms: [(&str, &str, &str); 5] = [
        ("stream", "executor", "topic"),
        ("channel", "\"Executor\"", "topic"),
        ("stream", "[\"executor\"]", "topic"),
        ("channel", channel_id.as_str(), "subject"),
        ("direct", ids_to.as_str(), ""),
    ];
    let mut sent = Vec::new();
    for (i, (kind, to, topic_key)) in forms.iter().enumerate() {
        let content = format!("form {i}");
        let mut params = vec![("type", *kind), ("to", *to), ("content", content.as_str())];
        if !topic_key.is_empty() {
            params.push((topic_key, "Run-42"));
        }
        let answer = eagle.post("/messages", &params).await;
        assert_eq!(answer.status, 200, "{kind} {to}: {}", answer.body);
        sent.push(answer.body["id"].as_u64().unwrap());
    }
    let stored = realm.zulip.messages_in("EXECUTOR", "run-42");
    assert_eq!(stored.len(), 4);
    assert!(
        stored
            .iter()
            .all(|m| m.topic == "Run-42" && m.sender_id == realm.eagle)
    );
    let dm = realm.zulip.messages_from(realm.eagle).pop().unwrap();
    assert_eq!((dm.channel, dm.dm_recipients), (None, vec![realm.alex]));

    // Normalisation and truncation to max_message_length code points.
    let long = format!("\n\n{}   ", "é".repeat(60));
    let answer = eagle
        .post(
            "/messages",
            &[
                ("type", "stream"),
                ("to", "executor"),
                ("topic", "Run-42"),
                ("content", &long),
            ],
        )
        .await;
    let stored = realm.zulip.messages().pop().unwrap();
    assert_eq!(stored.id, answer.body["id"].as_u64().unwrap());
    assert_eq!(stored.content.chars().count(), 40);
    assert!(stored.content.ends_with("\n[message truncated]"));

    let missing = eagle
        .post(
            "/messages",
            &[
                ("type", "stream"),
                ("to", "nowhere"),
                ("topic", "t"),
                ("content", "x"),
            ],
        )
        .await;
    assert_eq!(
        (missing.status, missing.code()),
        (400, "STREAM_DOES_NOT_EXIST")
    );
    assert_eq!(missing.msg(), "Channel 'nowhere' does not exist");
    let empty = eagle
        .post(
            "/messages",
            &[
                ("type", "stream"),
                ("to", "executor"),
                ("topic", "t"),
                ("content", " \n"),
            ],
        )
        .await;
    assert_eq!(empty.msg(), "Message must not be empty");

    // The 20-message window Eagle uses, in both narrow encodings.
    let object =
        r#"[{"operator":"channel","operand":"executor"},{"operator":"topic","operand":"run-42"}]"#;
    let legacy = r#"[["stream","Executor"],["topic","RUN-42"]]"#;
    for narrow in [object, legacy] {
        let window = eagle
            .get(
                "/messages",
                &[
                    ("anchor", "newest"),
                    ("num_before", "3"),
                    ("num_after", "0"),
                    ("apply_markdown", "false"),
                    ("narrow", narrow),
                ],
            )
            .await;
        assert_eq!(window.status, 200, "{}", window.body);
        assert_eq!(window.body["anchor"], json!(10_000_000_000_000_000_u64));
        assert_eq!(window.body["found_newest"], true);
        assert_eq!(window.body["found_oldest"], false);
        let got = contents(&window.body);
        assert_eq!(&got[..2], ["form 2", "form 3"]);
        assert!(got[2].ends_with("[message truncated]"));
    }

    // Catching up after a known id, the anchor excluded.
    let after = sent[1].to_string();
    let catch_up = eagle
        .get(
            "/messages",
            &[
                ("anchor", &after),
                ("include_anchor", "false"),
                ("num_before", "0"),
                ("num_after", "100"),
                ("apply_markdown", "false"),
                ("narrow", object),
            ],
        )
        .await;
    assert_eq!(contents(&catch_up.body)[0], "form 2");
    assert_eq!(catch_up.body["found_newest"], true);
    assert_eq!(catch_up.body["found_anchor"], false);

    // Rendered by default; a human who never received them sees shared history.
    let runner = realm.client(realm.runner);
    let html = runner
        .get(
            "/messages",
            &[
                ("anchor", "oldest"),
                ("num_before", "0"),
                ("num_after", "1"),
                ("narrow", object),
            ],
        )
        .await;
    assert_eq!(html.body["messages"][0]["content"], "<p>form 0</p>");
    assert_eq!(
        html.body["messages"][0]["flags"],
        json!(["read", "historical"])
    );
    assert_eq!(html.body["found_oldest"], true);

    let too_many = eagle
        .get(
            "/messages",
            &[
                ("anchor", "newest"),
                ("num_before", "5000"),
                ("num_after", "1"),
            ],
        )
        .await;
    assert_eq!(
        too_many.msg(),
        "Too many messages requested (maximum 5000)."
    );
    realm.zulip.assert_clean();
}

#[tokio::test]
async fn mention_flags_per_recipient() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    let queue = eagle.register(&[]).await;
    let me = realm.eagle;
    let cases: [(String, Vec<&str>); 8] = [
        ("@**Eagle** !status".into(), vec!["mentioned"]),
        ("hey @**eagle**".into(), vec!["mentioned"]),
        (format!("(@**Eagle|{me}**)"), vec!["mentioned"]),
        (format!("@**|{me}** go"), vec!["mentioned"]),
        ("@_**Eagle** silently".into(), vec![]),
        ("`@**Eagle**` in code".into(), vec![]),
        (format!("@**Alex Doe|{me}** wrong name"), vec![]),
        (
            "@**all** everyone".into(),
            vec!["stream_wildcard_mentioned", "wildcard_mentioned"],
        ),
    ];
    for (content, _) in &cases {
        realm.zulip.post(realm.alex, "executor", "t", content);
    }
    let got = eagle.events(&queue, -1, true).await;
    let events = got.body["events"].as_array().unwrap();
    assert_eq!(events.len(), cases.len());
    for (event, (content, flags)) in events.iter().zip(&cases) {
        assert_eq!(event["flags"], json!(flags), "{content}");
    }

    // The sender's own copy is read; rendering shows the mention span.
    let alex = realm.client(realm.alex);
    let fetched = alex
        .get(
            "/messages",
            &[
                ("anchor", "oldest"),
                ("num_before", "0"),
                ("num_after", "1"),
            ],
        )
        .await;
    assert_eq!(fetched.body["messages"][0]["flags"], json!(["read"]));
    assert_eq!(
        fetched.body["messages"][0]["content"],
        format!("<p><span class=\"user-mention\" data-user-id=\"{me}\">@Eagle</span> !status</p>")
    );
    // Eagle's unread mention is its first unread message.
    let first_unread = eagle
        .get(
            "/messages",
            &[
                ("anchor", "first_unread"),
                ("num_before", "0"),
                ("num_after", "0"),
            ],
        )
        .await;
    assert_eq!(first_unread.body["found_anchor"], true);
    let mentioned = eagle
        .get(
            "/messages",
            &[
                ("anchor", "newest"),
                ("num_before", "100"),
                ("num_after", "0"),
                ("narrow", r#"[{"operator":"is","operand":"mentioned"}]"#),
            ],
        )
        .await;
    assert_eq!(mentioned.body["messages"].as_array().unwrap().len(), 5);
    realm.zulip.assert_clean();
}

#[tokio::test]
async fn edits_by_the_sender_only() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    let alex = realm.client(realm.alex);
    let queue = alex
        .register(&[("event_types", r#"["message","update_message"]"#)])
        .await;
    let sent = eagle
        .post(
            "/messages",
            &[
                ("type", "stream"),
                ("to", "executor"),
                ("topic", "t"),
                ("content", "[STATUS: 1/3]"),
            ],
        )
        .await;
    let id = sent.body["id"].as_u64().unwrap();
    let path = format!("/messages/{id}");
    let edited = eagle
        .call(
            Method::PATCH,
            &path,
            &[("content", "[STATUS: 2/3] @**Alex Doe**")],
        )
        .await;
    assert_eq!(edited.status, 200, "{}", edited.body);
    assert_eq!(
        realm.zulip.messages()[0].content,
        "[STATUS: 2/3] @**Alex Doe**"
    );
    let nothing = eagle.call(Method::PATCH, &path, &[]).await;
    assert_eq!(nothing.msg(), "Nothing to change");
    let other = alex
        .call(Method::PATCH, &path, &[("content", "mine now")])
        .await;
    assert_eq!(
        other.msg(),
        "You don't have permission to edit this message"
    );

    let events = alex.events(&queue, -1, true).await;
    let update = &events.body["events"][1];
    assert_eq!(update["type"], "update_message");
    assert_eq!(update["flags"], json!(["mentioned"]));
    assert_eq!(update["orig_content"], "[STATUS: 1/3]");
    realm.zulip.edit(id, "[STATUS: 3/3]");
    assert_eq!(realm.zulip.messages()[0].content, "[STATUS: 3/3]");
    realm.zulip.assert_clean();
}

#[tokio::test]
async fn reactions_add_and_remove() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    let alex = realm.client(realm.alex);
    let queue = alex.register(&[("event_types", r#"["reaction"]"#)]).await;
    let id = realm
        .zulip
        .post(realm.alex, "executor", "t", "!queue fix the build");
    let path = format!("/messages/{id}/reactions");
    let added = eagle.post(&path, &[("emoji_name", "eyes")]).await;
    assert_eq!(added.status, 200, "{}", added.body);
    let again = eagle
        .post(
            &path,
            &[
                ("emoji_name", "eyes"),
                ("emoji_code", "1f440"),
                ("reaction_type", "unicode_emoji"),
            ],
        )
        .await;
    assert_eq!(
        (again.status, again.code()),
        (400, "REACTION_ALREADY_EXISTS")
    );
    let unknown = eagle.post(&path, &[("emoji_name", "no_such_emoji")]).await;
    assert_eq!(unknown.msg(), "Emoji 'no_such_emoji' does not exist");
    let mismatch = eagle
        .post(
            &path,
            &[
                ("emoji_name", "tada"),
                ("emoji_code", "2705"),
                ("reaction_type", "unicode_emoji"),
            ],
        )
        .await;
    assert_eq!(mismatch.msg(), "Invalid emoji name.");
    assert_eq!(
        eagle.post(&path, &[("emoji_name", "check")]).await.status,
        200
    );
    assert_eq!(
        realm.zulip.reactions_on(id),
        vec![
            (realm.eagle, "eyes".to_owned()),
            (realm.eagle, "check".to_owned())
        ]
    );

    let removed = eagle
        .call(Method::DELETE, &path, &[("emoji_name", "eyes")])
        .await;
    assert_eq!(removed.status, 200, "{}", removed.body);
    let twice = eagle
        .call(Method::DELETE, &path, &[("emoji_name", "eyes")])
        .await;
    assert_eq!(
        (twice.status, twice.code()),
        (400, "REACTION_DOES_NOT_EXIST")
    );
    let nowhere = eagle
        .post("/messages/999999/reactions", &[("emoji_name", "eyes")])
        .await;
    assert_eq!(nowhere.msg(), "Invalid message(s)");
    assert_eq!(
        realm.zulip.reactions_on(id),
        vec![(realm.eagle, "check".to_owned())]
    );

    let events = alex.events(&queue, -1, true).await;
    let ops: Vec<(&str, &str)> = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["op"].as_str().unwrap(), e["emoji_name"].as_str().unwrap()))
        .collect();
    assert_eq!(ops, [("add", "eyes"), ("add", "check"), ("remove", "eyes")]);
    realm.zulip.assert_clean();
}
