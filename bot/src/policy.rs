//! Policy plugins: sandboxed WebAssembly components decide what is approved
//! and which tasks are taken. Wasmtime types never leave this module.
//!
//! * [`PolicyHost`] owns one wasmtime engine and the current [`set`] of
//!   plugins, swapped atomically on hot reload; in-flight decisions finish on
//!   the set they started with.
//! * [`plugin`] loads one component (compiled once, cached in the profile's
//!   data directory by content hash and engine), checks its interface
//!   version and imports, and calls it in a fresh store per call with fuel,
//!   an epoch deadline and a memory cap.
//! * [`compose`] turns the votes into one decision: any deny wins, then
//!   escalate, then approve; all abstaining means a human decides. A plugin
//!   that fails in any way votes escalate (or keep, for a filter): it can
//!   never make Eagle approve by failing.

pub mod effect;

mod bindings;
mod compose;
mod dropin;
mod engine;
mod error;
mod plugin;
mod set;

use std::fmt;

use serde::Deserialize;

pub use compose::{Decision, FilterDecision, Outcome};
pub use engine::{compile_in_child_processes, compile_into_cache};
pub use plugin::{MAX_PLUGIN_BYTES, PluginError};
pub use set::{PluginStatus, PolicyHost, SlotState};

/// Hex of digests, kept under its old name for the plugin host and the runner.
use crate::ground::text::hex;

/// The interface version this host implements, and the range it accepts.
pub const WIT_VERSION: &str = "0.1.0";
/// Accepted plugin interface versions, as people read them.
pub const SUPPORTED_VERSIONS: &str = ">=0.1.0, <0.2.0";

/// Which protocol tag a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// `[REQUEST: action]`
    Request,
    /// `[ESCALATE: topic]`
    Escalate,
}

/// A task as plugins see it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyTask {
    pub gid: String,
    pub source: String,
    pub title: String,
    pub description: String,
    pub notes: String,
    pub links: Vec<String>,
    pub tags: Vec<String>,
    pub platform: Option<String>,
    pub assignee: Option<String>,
    /// Closed in the system it came from.
    pub closed: bool,
}

/// A worker's request as plugins see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRequest {
    pub kind: RequestKind,
    pub action: String,
    pub run_id: u64,
    pub request_id: u64,
    pub body: String,
    pub task: Option<PolicyTask>,
    pub requested_by: String,
}

impl PolicyRequest {
    /// The request a protocol line asks for, if it is a `[REQUEST: …]` or
    /// `[ESCALATE: …]` line.
    pub fn from_line(
        line: &crate::ground::protocol::Line,
        requested_by: &str,
    ) -> Option<PolicyRequest> {
        let kind = match line.tag {
            crate::ground::protocol::Tag::Request => RequestKind::Request,
            crate::ground::protocol::Tag::Escalate => RequestKind::Escalate,
            _ => return None,
        };
        Some(PolicyRequest {
            kind,
            action: line.action.clone(),
            run_id: line.run.unwrap_or(0),
            request_id: line.request.unwrap_or(0),
            body: line.body.clone(),
            task: None,
            requested_by: requested_by.to_string(),
        })
    }

    /// A hash of what the decision binds to: approving one request never
    /// approves another with different parameters.
    pub fn params_hash(&self) -> String {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        for part in [
            match self.kind {
                RequestKind::Request => "request",
                RequestKind::Escalate => "escalate",
            },
            &self.action,
            &self.run_id.to_string(),
            &self.request_id.to_string(),
            &self.body,
        ] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        hex(&hasher.finalize())
    }
}

/// A plugin's vote on a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    Deny(String),
    Escalate(String),
    Abstain,
}

/// A plugin's vote on a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterVerdict {
    Keep,
    Skip(String),
    Abstain,
}

/// Which plugin voted: what it says it is, and the hash of what it really is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginIdentity {
    /// The name from its metadata (the source's name if it never loaded).
    pub name: String,
    /// Its own version (`?` if it never loaded).
    pub version: String,
    /// SHA-256 of the component file: the identity a plugin cannot fake.
    pub sha256: String,
    /// Where it came from: `builtin:default-approval` or a file path.
    pub source: String,
}

impl fmt::Display for PluginIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} (sha256:{})",
            self.name,
            self.version,
            &self.sha256[..self.sha256.len().min(12)]
        )
    }
}

/// One plugin's vote, and the failure that made it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vote<V> {
    pub plugin: PluginIdentity,
    pub verdict: V,
    pub notify_owner: bool,
    /// Set when the plugin failed and the vote is the fail-closed one.
    pub failure: Option<PluginError>,
}

/// SHA-256 of a plugin file, in hex.
pub fn content_hash(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(bytes))
}
