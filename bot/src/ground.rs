//! The ground floor: plain helpers every wing may use and that use no other
//! wing. Text, the host's processes and users, the structured chat
//! protocol, backoff, and the metrics registry every floor records into.

pub mod backoff;
pub mod database_url;
pub mod host;
pub mod host_pattern;
pub mod metrics;
pub mod protocol;
pub mod repo;
pub mod text;
pub mod wire;
