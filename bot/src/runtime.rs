//! The machinery every loop of either identity runs on: the loop skeleton
//! ([`background`]), the lease that elects one loop per deployment
//! ([`lease`]), and how the loops post about runs and name people
//! ([`posts`]).

pub mod background;
pub mod lease;
pub mod posts;
