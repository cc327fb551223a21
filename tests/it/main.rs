//! Eagle's integration tests: one binary, a module per area.
//!
//! They use real parts: the real `eagle` binary, real SQLite files and a real
//! PostgreSQL server (`TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`; unreachable means the
//! PostgreSQL tests fail, never skip).

mod analyzer;
mod asana;
mod claude;
mod cli;
mod effects;
mod egress;
mod executor;
mod github;
mod hardening;
mod policy;
mod prloop;
mod promises;
mod prstore;
mod requests;
mod runs;
mod sandbox;
mod store;
mod support;
mod zulip;
