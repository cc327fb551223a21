//! Eagle's integration tests: one binary, a module per area.
//!
//! They use real parts: the real `eagle` binary, real SQLite files and a real
//! PostgreSQL server (`TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`; unreachable means the
//! PostgreSQL tests fail, never skip).

/// `on_both_backends!(case, …)`: each `async fn case(db: Db)` of the module
/// as two tests, `sqlite::case` and `postgres::case`.
macro_rules! on_both_backends {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(crate::support::Db::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(crate::support::Db::Postgres).await;
                }
            )*
        }
    };
}

mod analyzer;
mod asana;
mod care;
mod claude;
mod cli;
mod docs;
mod effects;
mod egress;
mod executor;
mod git_http;
mod github;
mod hardening;
mod inbox;
mod install;
mod layers;
mod limits;
mod local_repo;
mod merge;
mod moving_in;
mod ops;
mod policy;
mod prloop;
mod promises;
mod prstore;
mod repos;
mod requests;
mod runs;
mod sandbox;
mod step_aside;
mod store;
mod support;
mod talk;
mod trust;
mod zulip;
