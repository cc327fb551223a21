//! The Asana client against the strict fake Asana: listings of every kind of
//! place read to the last page, the fields a task is made of, completions
//! seen on re-import, rate limits and server errors survived, comments
//! posted exactly once even when an answer is lost, and the token kept out
//! of every error and log line.
//!
//! The tests whose client waits (a `Retry-After`, a lost answer's timeout)
//! run on paused time: the fake serves on the test's own runtime and records
//! each request on its clock, so the waits cost nothing and are still
//! measured.

mod comments;
mod listings;
mod owner;
mod retries;
mod token;

use std::time::Duration;

use chrono::Utc;
use eagle::integrations::asana::{Asana, AsanaConfig, Error, PlatformRule, RetryPolicy};
use fake_apis::{FakeAsana, RecordedRequest, TaskSpec};
use secrecy::SecretString;
use url::Url;

/// The `opt_fields` every task read must send: exactly what a task is made of.
const TASK_FIELDS: &str = "name,notes,completed,completed_at,assignee.name,assignee_section.name,\
memberships.project.name,memberships.section.name,tags.name,custom_fields.name,\
custom_fields.display_value,permalink_url,created_at,modified_at,followers,parent";

/// A fake Asana with a premium workspace, Eagle's user (whose token the
/// client holds) and Alex.
struct World {
    fake: FakeAsana,
    ws: String,
    eagle: String,
    alex: String,
    token: String,
    asana: Asana,
}

fn config(url: &str, token: &str) -> AsanaConfig {
    let url = Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    let mut config = AsanaConfig::new(url, SecretString::from(token.to_owned()));
    // Short enough that a lost answer costs the test two seconds.
    config.request_timeout = Duration::from_secs(2);
    config.retry = RetryPolicy {
        attempts: 4,
        first_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
        rate_limit_waits: 3,
        max_retry_after: Duration::from_secs(5),
    };
    config.platform = PlatformRule {
        field: Some("Platform".to_owned()),
        tags: vec!["macOS".to_owned(), "Windows".to_owned()],
    };
    config
}

async fn world() -> World {
    let fake = FakeAsana::start().await;
    let ws = fake.add_workspace("Acme", true);
    let eagle = fake.add_user("Eagle", "eagle@example.com", &[&ws]);
    let alex = fake.add_user("Alex", "alex@example.com", &[&ws]);
    let token = fake.create_pat(&eagle);
    let asana = Asana::new(config(&fake.url(), &token)).unwrap_or_else(|e| panic!("{e}"));
    World {
        fake,
        ws,
        eagle,
        alex,
        token,
        asana,
    }
}

impl World {
    /// Adds `n` open tasks named `{prefix} {i}`, changed by `f`.
    fn tasks(&self, n: usize, prefix: &str, f: impl Fn(&mut TaskSpec)) -> Vec<String> {
        (0..n)
            .map(|i| {
                let mut spec = TaskSpec::new(&self.ws, &format!("{prefix} {i}"));
                f(&mut spec);
                self.fake.add_task(spec)
            })
            .collect()
    }

    fn requests_to(&self, method: &str, path: &str) -> Vec<RecordedRequest> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.method == method && r.path == path)
            .collect()
    }
}

fn param<'r>(r: &'r RecordedRequest, name: &str) -> Option<&'r str> {
    r.query
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn sorted(mut gids: Vec<String>) -> Vec<String> {
    gids.sort();
    gids
}

fn gids(tasks: &[eagle::integrations::asana::AsanaTask]) -> Vec<String> {
    sorted(tasks.iter().map(|t| t.gid.clone()).collect())
}

/// Every request of a listing asked for a full page and the task fields,
/// the first without an offset and each later one with the offset the
/// previous answer gave.
fn assert_paged(requests: &[RecordedRequest], pages: usize) {
    assert_eq!(requests.len(), pages, "{requests:#?}");
    for (i, r) in requests.iter().enumerate() {
        assert_eq!(param(r, "limit"), Some("100"), "{r:?}");
        assert_eq!(param(r, "opt_fields"), Some(TASK_FIELDS), "{r:?}");
        assert_eq!(param(r, "offset").is_some(), i > 0, "{r:?}");
        assert_eq!(r.status, 200, "{r:?}");
    }
}

fn millis_now() -> chrono::DateTime<Utc> {
    chrono::DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap_or_default()
}

fn expect<T>(result: Result<T, Error>) -> T {
    result.unwrap_or_else(|e| panic!("{e}"))
}
