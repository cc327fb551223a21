//! Eagle's side, the orchestrator: the decider that answers workers'
//! requests through the policy plugins, the analyzer that triages tasks,
//! Asana intake, moving in from the old executor, and the daily pruner.

pub mod analyzer;
pub mod decider;
pub mod intake;
pub mod moving_in;
pub mod pruner;
