//! Eagle: a Zulip bot that runs AI coding agents as a supervised team.
//!
//! The binary (`src/main.rs`) only sets up logging and calls [`cli::run`];
//! everything else lives here, one module per concern. `ARCHITECTURE.md` at
//! the repository root has the map.

pub mod analyzer;
pub mod asana;
pub mod background;
pub mod backoff;
pub mod carry;
pub mod chat;
pub mod cli;
pub mod commands;
pub mod conversation;
pub mod daemon;
pub mod decisions;
pub mod digest;
pub mod effect;
pub mod egress;
pub mod github;
pub mod host;
pub mod import;
pub mod intake;
pub mod logging;
pub mod message;
pub mod metrics;
pub mod milestones;
pub mod mirror;
pub mod ops;
pub mod policy;
pub mod prloop;
pub mod profile;
pub mod protocol;
pub mod prune;
pub mod runner;
pub mod sandbox;
pub mod shell;
pub mod singleton;
pub mod store;
pub mod text;
pub mod worker;
pub mod zulip;
