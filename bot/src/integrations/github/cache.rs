//! The ETag cache behind conditional requests: every GET sends
//! `If-None-Match` with the ETag of the last answer for the same URL, and a
//! 304 (which costs no quota) reuses the body kept here. The PR loop keeps
//! it in the database so that a restart does not spend a poll's worth of
//! quota per PR; [`MemoryEtagCache`] serves everything else.
//!
//! The trait returns boxed futures so that the client can hold any cache as
//! `Arc<dyn EtagCache>`. A cache that fails (a database hiccup) answers
//! `None` and drops the write: a miss costs one request of quota, never a
//! wrong answer, so it should log and carry on rather than fail the poll.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

/// A future a cache returns.
pub type CacheFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The last full answer to a GET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedResponse {
    /// The `etag` header as sent (quoted, maybe `W/`), sent back verbatim.
    pub etag: String,
    /// The body.
    pub body: Vec<u8>,
    /// The `rel="next"` page of the answer's `link` header: a 304 carries
    /// no `link`, so paging through unchanged lists needs it kept.
    pub next_page: Option<String>,
}

/// Where ETags and bodies are kept, keyed by the full request URL (with its
/// query). The URLs hold no credentials; the bodies are what the token may
/// read, so a persistent cache deserves the same care as the database.
pub trait EtagCache: Send + Sync {
    /// The last answer for `url`, if kept.
    fn get<'a>(&'a self, url: &'a str) -> CacheFuture<'a, Option<CachedResponse>>;
    /// Keeps an answer for `url`, replacing any older one.
    fn put<'a>(&'a self, url: &'a str, response: CachedResponse) -> CacheFuture<'a, ()>;
}

/// An in-memory cache that keeps at most `capacity` URLs, forgetting the
/// oldest first (lists read with a moving `since` make new URLs forever).
#[derive(Debug)]
pub struct MemoryEtagCache {
    capacity: usize,
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<String, CachedResponse>,
    order: VecDeque<String>,
}

impl MemoryEtagCache {
    /// Room for 10,000 URLs (a few per PR).
    pub const DEFAULT_CAPACITY: usize = 10_000;

    /// An empty cache with room for `capacity` URLs (at least one).
    pub fn new(capacity: usize) -> MemoryEtagCache {
        MemoryEtagCache {
            capacity: capacity.max(1),
            entries: Mutex::new(Entries::default()),
        }
    }

    /// How many URLs are kept.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // Plain maps survive a panic elsewhere intact enough to keep using.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for MemoryEtagCache {
    fn default() -> Self {
        MemoryEtagCache::new(MemoryEtagCache::DEFAULT_CAPACITY)
    }
}

impl EtagCache for MemoryEtagCache {
    fn get<'a>(&'a self, url: &'a str) -> CacheFuture<'a, Option<CachedResponse>> {
        let found = self.lock().map.get(url).cloned();
        Box::pin(async move { found })
    }

    fn put<'a>(&'a self, url: &'a str, response: CachedResponse) -> CacheFuture<'a, ()> {
        let mut entries = self.lock();
        if entries.map.insert(url.to_owned(), response).is_none() {
            entries.order.push_back(url.to_owned());
        }
        while entries.map.len() > self.capacity {
            match entries.order.pop_front() {
                Some(oldest) => {
                    entries.map.remove(&oldest);
                }
                None => break,
            }
        }
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tag: &str) -> CachedResponse {
        CachedResponse {
            etag: tag.to_owned(),
            body: tag.as_bytes().to_vec(),
            next_page: None,
        }
    }

    #[tokio::test]
    async fn keeps_the_newest_and_forgets_the_oldest() {
        let cache = MemoryEtagCache::new(2);
        cache.put("a", entry("\"1\"")).await;
        cache.put("b", entry("\"2\"")).await;
        cache.put("a", entry("\"3\"")).await;
        assert_eq!(cache.get("a").await, Some(entry("\"3\"")));
        cache.put("c", entry("\"4\"")).await;
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get("a").await, None, "the oldest URL goes first");
        assert_eq!(cache.get("b").await, Some(entry("\"2\"")));
        assert_eq!(cache.get("c").await, Some(entry("\"4\"")));
    }
}
