//! The token kept out of every error, `Debug` output and log line.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use eagle::integrations::asana::{Asana, Completion, Error};
use fake_apis::{AsanaFault, AsanaRoute, TaskSpec};

use super::{config, expect, world};

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn the_token_never_appears_in_errors_debug_or_logs() {
    let w = world().await;
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let project = w.fake.add_project(&w.ws, "Browsers");
    let task = w.fake.add_task(TaskSpec::new(&w.ws, "t"));
    let mut texts: Vec<String> = vec![
        format!("{:?}", config(&w.fake.url(), &w.token)),
        format!("{:?}", w.asana),
    ];
    let mut record = |e: Error| {
        texts.push(e.to_string());
        texts.push(format!("{e:?}"));
    };
    // Server errors, lost answers, rate limits, unknown objects.
    w.fake
        .inject(AsanaRoute::ProjectTasks, AsanaFault::ServerError, 4);
    record(
        w.asana
            .project_tasks(&project, "b", Completion::Open)
            .await
            .err()
            .unwrap_or_else(|| panic!("no error")),
    );
    let mut quick = config(&w.fake.url(), &w.token);
    quick.request_timeout = Duration::from_millis(300);
    quick.retry.attempts = 2;
    let quick = expect(Asana::new(quick));
    w.fake.inject(AsanaRoute::Task, AsanaFault::Hang, 2);
    let hung = quick.task(&task, "b").await;
    assert!(
        matches!(
            &hung,
            Err(Error::Transport {
                timed_out: true,
                ..
            })
        ),
        "{hung:?}"
    );
    record(hung.err().unwrap_or_else(|| panic!("no error")));
    w.fake.inject(
        AsanaRoute::Stories,
        AsanaFault::RateLimit { retry_after: 60 },
        1,
    );
    record(
        w.asana
            .find_comment(&task, "m", chrono::Utc::now())
            .await
            .err()
            .unwrap_or_else(|| panic!("no error")),
    );
    record(
        w.asana
            .task("123456789", "b")
            .await
            .err()
            .unwrap_or_else(|| panic!("no error")),
    );
    // A wrong token: that token must not show either.
    let wrong = format!("{}x", w.token);
    let impostor = expect(Asana::new(config(&w.fake.url(), &wrong)));
    let refused = impostor.me().await;
    assert!(
        matches!(refused, Err(Error::Unauthorized { .. })),
        "{refused:?}"
    );
    record(refused.err().unwrap_or_else(|| panic!("no error")));
    // Nobody listening.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
    };
    let nowhere = expect(Asana::new(config(&format!("http://{closed}"), &w.token)));
    let unreachable = nowhere.me().await;
    assert!(
        matches!(
            unreachable,
            Err(Error::Transport {
                timed_out: false,
                ..
            })
        ),
        "{unreachable:?}"
    );
    record(unreachable.err().unwrap_or_else(|| panic!("no error")));

    let logged = logs
        .0
        .lock()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    assert!(logged.contains("asana"), "nothing was logged: {logged}");
    texts.push(logged);
    for token in [&w.token, &wrong] {
        let encoded: String = url::form_urlencoded::byte_serialize(token.as_bytes()).collect();
        let secret = token.rsplit('/').next().unwrap_or(token);
        let forms = [
            token.clone(),
            encoded,
            secret.to_owned(),
            base64::engine::general_purpose::STANDARD.encode(token),
        ];
        for text in &texts {
            for form in &forms {
                assert!(!text.contains(form.as_str()), "the token shows in: {text}");
            }
        }
    }
    w.fake.assert_clean();
}
