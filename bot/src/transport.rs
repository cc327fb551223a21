//! The transports: how people reach Eagle. Zulip (one identity per
//! process, over the real events API) and the local shell (both identities in
//! a terminal). Each builds a [`crate::chat::message::InboundMessage`], hands
//! it to [`crate::chat`], and runs a [`crate::daemon::Daemon`].

pub mod offline;
pub mod shell;
pub mod zulip;
