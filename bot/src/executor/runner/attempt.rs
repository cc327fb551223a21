//! What one attempt of a worker is to the runner while it runs: the
//! context its socket answers in and the effects are carried out with.
//! Both [`super::socket`] and [`super::effects`] take it from here, so
//! neither reaches back into the other.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use tokio::sync::watch;

use super::Shared;
use crate::store::Fence;

/// What the socket of one attempt knows.
#[derive(Debug)]
pub(super) struct SocketCtx {
    pub shared: Arc<Shared>,
    pub fence: Fence,
    pub token_sha256: String,
    pub workdir: PathBuf,
    /// The task is private: posts carry ids and states only.
    pub private: bool,
    /// Set with the reason when the worker must stop (held, cancelled).
    pub stop: watch::Receiver<Option<String>>,
    /// Requests recorded this attempt (all channels), for the flood cap.
    pub requests: Arc<AtomicUsize>,
    /// Asks the supervisor to record what the worker wrote so far (and
    /// answers when it has): what the worker printed before it asked is
    /// posted before its request.
    pub flush: tokio::sync::mpsc::Sender<tokio::sync::oneshot::Sender<()>>,
}
