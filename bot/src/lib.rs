//! Eagle: a Zulip bot that runs AI coding agents as a supervised team.
//!
//! The binary (`src/main.rs`) only sets up logging and calls [`cli::run`].
//! Everything else lives in the wings below, listed from the top floor down:
//! a wing may use the wings listed after it and never one listed before it
//! (`tests/it/layers.rs` holds that). `ARCHITECTURE.md` at the repository
//! root has the map.

pub mod chat;
pub mod cli;
pub mod confine;
pub mod daemon;
pub mod eagle;
pub mod executor;
pub mod ground;
pub mod integrations;
pub mod ops;
pub mod policy;
pub mod profile;
pub mod runtime;
pub mod store;
pub mod transport;
pub mod worker;
