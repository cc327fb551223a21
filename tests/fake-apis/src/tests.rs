//! Self-tests of the fakes: a real HTTP client (reqwest) against started
//! servers, one module per area.

mod asana;
mod github;
