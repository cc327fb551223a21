//! The executor's side: the runner that claims runs and supervises one
//! confined worker each, the PR loop that follows their pull requests and CI,
//! and the carrier that carries out what was approved, with Eagle's own
//! credentials.

pub mod carrier;
pub mod child_env;
pub mod pr_loop;
pub mod repos;
pub mod runner;
