//! What both fakes share: the state hub with its change notification, the
//! journal of requests and violations, the guard that fails an unchecked
//! test, injected faults, the clock, and the HTTP plumbing.

pub(crate) mod clock;
pub(crate) mod faults;
pub(crate) mod hash;
pub(crate) mod http;
pub(crate) mod hub;
pub(crate) mod journal;
pub(crate) mod query;
