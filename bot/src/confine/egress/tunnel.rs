//! Relaying bytes both ways between the worker and the host it reached,
//! until both sides are done or neither has sent anything for the idle
//! timeout. Each direction is its own loop, so a side that does not read
//! never stops the other direction.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

/// How much one read moves at most.
const CHUNK: usize = 64 * 1024;

/// How a tunnel ended: bytes relayed each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Relayed {
    pub up: u64,
    pub down: u64,
}

/// When either direction last moved a byte.
pub(super) struct Activity {
    start: Instant,
    /// Milliseconds since `start`.
    last: AtomicU64,
}

impl Activity {
    pub(super) fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    pub(super) fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last.fetch_max(ms, Ordering::Relaxed);
    }

    /// Ends when nothing moved for `idle`.
    pub(super) async fn idle(&self, idle: Duration) {
        loop {
            let due = self.start + Duration::from_millis(self.last.load(Ordering::Relaxed)) + idle;
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due).await;
        }
    }
}

/// Relays between `client` and `upstream` (halves of each), `first` sent
/// upstream before anything else. Returns the bytes moved, or why it was
/// cut (an error of either side, the idle timeout).
pub async fn relay<CR, CW, UR, UW>(
    (client_read, client_write): (CR, CW),
    (upstream_read, mut upstream_write): (UR, UW),
    first: &[u8],
    idle: Duration,
) -> std::io::Result<Relayed>
where
    CR: AsyncRead + Unpin,
    CW: AsyncWrite + Unpin,
    UR: AsyncRead + Unpin,
    UW: AsyncWrite + Unpin,
{
    let activity = Activity::new();
    if !first.is_empty() {
        upstream_write.write_all(first).await?;
    }
    let both = async {
        tokio::try_join!(
            pump(client_read, upstream_write, &activity),
            pump(upstream_read, client_write, &activity)
        )
    };
    tokio::select! {
        moved = both => moved.map(|(up, down)| Relayed { up: up + first.len() as u64, down }),
        _ = activity.idle(idle) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("nothing moved for {idle:?}"),
        )),
    }
}

/// One direction: reads until the end, writes it all, then passes the end on.
async fn pump<R, W>(mut from: R, mut to: W, activity: &Activity) -> std::io::Result<u64>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            // The other side may still answer: only this direction ends.
            let _ = to.shutdown().await;
            return Ok(total);
        }
        activity.touch();
        to.write_all(&buf[..n]).await?;
        activity.touch();
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_go_both_ways_and_ends_pass_on() {
        let (client, mut worker) = tokio::io::duplex(1024);
        let (upstream, mut server) = tokio::io::duplex(1024);
        let relay = tokio::spawn(async move {
            relay(
                tokio::io::split(client),
                tokio::io::split(upstream),
                b"early ",
                Duration::from_secs(60),
            )
            .await
        });
        worker.write_all(b"hello").await.unwrap();
        worker.shutdown().await.unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"early hello");
        server.write_all(b"answer").await.unwrap();
        drop(server);
        let mut answer = Vec::new();
        worker.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"answer");
        let moved = relay.await.unwrap().unwrap();
        assert_eq!(moved, Relayed { up: 11, down: 6 });
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_tunnel_is_cut_after_the_idle_timeout() {
        let (client, mut worker) = tokio::io::duplex(1024);
        let (upstream, _server) = tokio::io::duplex(1024);
        let relay = tokio::spawn(async move {
            relay(
                tokio::io::split(client),
                tokio::io::split(upstream),
                b"",
                Duration::from_secs(30),
            )
            .await
        });
        tokio::time::sleep(Duration::from_secs(20)).await;
        worker.write_all(b"x").await.unwrap();
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(!relay.is_finished(), "activity resets the idle timer");
        let error = relay.await.unwrap().unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
    }
}
