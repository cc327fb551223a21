//! What a question costs around the language backend: `cargo bench --bench talk`.
//!
//! Against the fake backend of the tests (in-process, answering at once),
//! for both APIs: the time one question takes through Eagle's conversation
//! loop (claim, the day's allowance, two backend turns with a tool lookup
//! between them, the conclusion with its audit entry and outbox post),
//! the same two turns called directly, and so what Eagle adds; and the
//! tokens and cost of one answered question as the fake counts them.

use std::time::{Duration, Instant};

use fake_apis::{FakeLlm, LlmStep};
use serde_json::json;

use eagle::chat::conversation::Conversations;
use eagle::chat::conversation::backend::{Backend, Turn};
use eagle::profile::{BackendKind, ConversationSettings, DatabaseUrl};
use eagle::store::{Destination, NewConversation, Store};

const QUESTIONS: usize = 300;

fn settings(kind: BackendKind, url: &str) -> ConversationSettings {
    ConversationSettings {
        backend: kind,
        url: url::Url::parse(url).unwrap(),
        model: "bench-model".into(),
        api_key: Some("bench-key".to_string().into()),
        timeout: Duration::from_secs(10),
        max_tokens: 512,
        max_answer_chars: 3000,
        max_tool_rounds: 6,
        user_tokens_per_day: u64::MAX / 2,
        tokens_per_day: u64::MAX / 2,
        cost_per_day_usd: f64::MAX,
        input_usd_per_mtok: 3.0,
        output_usd_per_mtok: 15.0,
        confirm_within: Duration::from_secs(3600),
        persona: Some("You are Eagle.".into()),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn bench(kind: BackendKind, dir: &std::path::Path) {
    let fake = FakeLlm::start(Some("bench-key")).await;
    fake.rule(
        "waiting",
        vec![
            LlmStep::Call {
                tool: "inbox".into(),
                input: json!({}),
            },
            LlmStep::Say("There are {/open_tasks} open tasks.".into()),
        ],
    );
    let db = dir.join(format!("{}.db", kind.as_str()));
    let store = Store::open(&DatabaseUrl::new(format!(
        "sqlite://{}?mode=rwc",
        db.display()
    )))
    .await
    .unwrap();
    let settings = settings(kind, &fake.url());
    let mut loop_ = Conversations::new(
        store.clone(),
        settings.clone(),
        "Eagle".into(),
        "executor".into(),
        "bench".into(),
        None,
    )
    .unwrap();
    let mut through_eagle = Vec::with_capacity(QUESTIONS);
    for i in 0..QUESTIONS {
        let mut tx = store.begin_write().await.unwrap();
        tx.conversations()
            .add_conversation(&NewConversation {
                identity: "eagle".into(),
                message_id: i as i64 + 1,
                transport: "zulip".into(),
                asker_id: 5,
                asker_email: "alex@example.com".into(),
                asker_name: "Alex".into(),
                asker_approver: true,
                to: Destination::Channel {
                    channel: "general".into(),
                    topic: "bench".into(),
                },
                private: false,
                text: "is anything waiting?".into(),
            })
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let started = Instant::now();
        let until = chrono::Utc::now() + chrono::TimeDelta::minutes(5);
        let conversation = store
            .conversations()
            .claim_conversation("bench", until)
            .await
            .unwrap()
            .unwrap();
        loop_.answer(&conversation).await.unwrap();
        through_eagle.push(started.elapsed());
    }
    // The same two turns, straight to the backend.
    let backend = Backend::new(&settings).unwrap();
    let specs = eagle::chat::conversation::tools::specs();
    let mut direct = Vec::with_capacity(QUESTIONS);
    for _ in 0..QUESTIONS {
        let started = Instant::now();
        let turns = vec![Turn::User("Alex asks: is anything waiting?".into())];
        let first = backend
            .turn("You are Eagle.", &turns, &specs)
            .await
            .unwrap();
        let mut turns = turns;
        turns.push(Turn::Assistant {
            text: first.text.clone(),
            calls: first.calls.clone(),
        });
        turns.push(Turn::Results(vec![
            eagle::chat::conversation::backend::ToolResult {
                id: first.calls[0].id.clone(),
                content: r#"{"open_tasks": 0, "tasks": []}"#.into(),
                is_error: false,
            },
        ]));
        backend
            .turn("You are Eagle.", &turns, &specs)
            .await
            .unwrap();
        direct.push(started.elapsed());
    }
    through_eagle.sort();
    direct.sort();
    let usage = store
        .conversations()
        .conversation_usage(chrono::Utc::now() - chrono::TimeDelta::days(1), None)
        .await
        .unwrap();
    println!(
        "{:9}  question through Eagle p50 {:.2} ms p99 {:.2} ms · backend turns alone p50 {:.2} ms p99 {:.2} ms · Eagle adds p50 {:.2} ms",
        kind.as_str(),
        ms(percentile(&through_eagle, 0.5)),
        ms(percentile(&through_eagle, 0.99)),
        ms(percentile(&direct, 0.5)),
        ms(percentile(&direct, 0.99)),
        ms(percentile(&through_eagle, 0.5)) - ms(percentile(&direct, 0.5)),
    );
    println!(
        "{:9}  per answered question: {:.0} tokens, ${:.5} (the fake counts 4 characters a token; prices $3/$15 per Mtok)",
        kind.as_str(),
        usage.tokens as f64 / usage.questions as f64,
        usage.cost_usd / usage.questions as f64,
    );
    store.close().await;
    fake.assert_clean();
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        bench(BackendKind::Anthropic, dir.path()).await;
        bench(BackendKind::OpenAi, dir.path()).await;
    });
}
