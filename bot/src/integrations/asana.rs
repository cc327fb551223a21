//! Asana over its REST API: importing tasks into the inbox and posting
//! approved comments exactly once. The only code that knows Asana's HTTP
//! and JSON; no database code (the importer, built on this, stores tasks).
//!
//! * [`config`]: [`AsanaConfig`] (base URL, token, timeouts, [`RetryPolicy`],
//!   [`PlatformRule`]).
//! * [`client`]: [`Asana`], the HTTP side: the token only in a sensitive
//!   `Authorization: Bearer` header, typed [`Error`]s, `Retry-After` and
//!   backoff, every list read page by page (`limit=100`, `next_page`).
//! * [`import`]: what to import, as [`AsanaTask`]s from a [`Source`]: a
//!   project, a section, My Tasks sections, followed tasks (premium only).
//! * [`comments`]: [`Asana::post_comment_once`], the approved text exactly,
//!   with a look for it (by the token's user, since the approval) before
//!   every POST.
//! * [`links`] and [`platform`]: the pure parts of making a task
//!   ([`extract_links`], [`PlatformRule::platform`]).
//!
//! Facts about Asana's API and their sources: `../shared/asana/NOTES.md`.

pub mod client;
pub mod comments;
pub mod config;
pub mod error;
pub mod import;
pub mod links;
pub mod platform;
pub mod task;
mod types;

pub use client::Asana;
pub use comments::CommentOutcome;
pub use config::{AsanaConfig, DEFAULT_API_URL, RetryPolicy};
pub use error::Error;
pub use import::{Completion, MyTasksSection, Place, Source};
pub use links::extract_links;
pub use platform::{CustomFieldValue, PlatformRule};
pub use task::{AsanaTask, Membership, Named, User};
