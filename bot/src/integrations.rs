//! The services Eagle works with besides chat: GitHub (REST and GraphQL,
//! with its rate budget and cache) and Asana. Clients only: what to do with
//! their answers is decided in the wings above.

pub mod asana;
pub mod github;
