//! The doorbell: how processes on one host that share a SQLite file wake
//! each other at once, instead of waiting for the data-version poll.
//!
//! Beside the database file is a private directory (`<file>.wake/`, 0700).
//! Each process that watches for changes binds a Unix datagram socket there
//! (`<pid>-<random>.sock`); a transaction that asked to notify rings every
//! other socket of the directory after it commits: one byte, sent without
//! blocking. A ring is a hint like every change notification (the woken
//! process re-reads what is pending), so a lost one costs only latency: the
//! poll of `PRAGMA data_version` stays, slower, as the fallback for writers
//! that do not ring (another version of Eagle, a person's `sqlite3`).
//!
//! A socket whose process is gone refuses a datagram (`ECONNREFUSED`); the
//! ringer removes its file. A full receive buffer (`EAGAIN`) means that
//! process has a ring pending already.

use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What a ring carries: nothing but the fact.
const RING: &[u8] = b"!";
/// The extension of a listening socket in the directory.
const EXTENSION: &str = "sock";

#[derive(Debug)]
pub(crate) struct Doorbell {
    dir: PathBuf,
    /// Unbound, non-blocking: it only sends.
    ringer: UnixDatagram,
    /// This process's own socket, once bound (it is not rung).
    own: OnceLock<PathBuf>,
}

impl Doorbell {
    /// The doorbell of the SQLite file `db_file`, or `None` when its
    /// directory cannot be made or used (then only the poll wakes).
    pub(crate) fn beside(db_file: &Path) -> Option<Doorbell> {
        let mut name = db_file.file_name()?.to_os_string();
        name.push(".wake");
        let dir = db_file.with_file_name(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(error) => {
                tracing::debug!(%error, dir = %dir.display(), "no doorbell: cannot create its directory");
                return None;
            }
        }
        // A directory someone else made (or a symlink to one) is not used:
        // its sockets could be anyone's.
        let meta = std::fs::symlink_metadata(&dir).ok()?;
        if !meta.is_dir() || meta.uid() != crate::ground::host::euid() {
            tracing::warn!(dir = %dir.display(), "no doorbell: its directory is not a directory of Eagle's user; other processes' changes are seen by polling");
            return None;
        }
        let ringer = UnixDatagram::unbound().ok()?;
        ringer.set_nonblocking(true).ok()?;
        Some(Doorbell {
            dir,
            ringer,
            own: OnceLock::new(),
        })
    }

    /// Rings every other process's socket.
    pub(crate) fn ring(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let own = self.own.get();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != EXTENSION) || Some(&path) == own {
                continue;
            }
            match self.ringer.send_to(RING, &path) {
                Ok(_) => {}
                // Nobody listens there any more: the process is gone.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    let _ = std::fs::remove_file(&path);
                }
                // Full (a ring is pending) or vanished meanwhile.
                Err(_) => {}
            }
        }
    }

    /// Binds this process's socket, to be rung by the others.
    pub(crate) fn listen(&self) -> Option<Bell> {
        let path = self.dir.join(format!(
            "{}-{:08x}.{EXTENSION}",
            std::process::id(),
            fastrand::u32(..)
        ));
        let socket = match tokio::net::UnixDatagram::bind(&path) {
            Ok(socket) => socket,
            Err(error) => {
                // A path too long for a socket address, most often.
                tracing::debug!(%error, path = %path.display(), "no doorbell: cannot bind its socket");
                return None;
            }
        };
        let _ = self.own.set(path.clone());
        Some(Bell { socket, path })
    }
}

/// This process's bound socket; its file goes with it.
#[derive(Debug)]
pub(crate) struct Bell {
    socket: tokio::net::UnixDatagram,
    path: PathBuf,
}

impl Bell {
    /// Waits for a ring, then takes every ring already queued: many rings
    /// make one wake-up.
    pub(crate) async fn rung(&self) -> std::io::Result<()> {
        let mut buf = [0u8; 8];
        self.socket.recv(&mut buf).await?;
        while self.socket.try_recv(&mut buf).is_ok() {}
        Ok(())
    }
}

impl Drop for Bell {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_ring_reaches_the_other_process_and_a_dead_ones_socket_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("eagle.db");
        std::fs::write(&file, b"").unwrap();
        let here = Doorbell::beside(&file).expect("a doorbell");
        let there = Doorbell::beside(&file).expect("the same doorbell");
        let bell = there.listen().expect("bound");
        // A process that died without removing its socket.
        let dead = dir.path().join("eagle.db.wake/1-deadbeef.sock");
        drop(std::os::unix::net::UnixDatagram::bind(&dead).unwrap());
        assert!(dead.exists());

        here.ring();
        tokio::time::timeout(Duration::from_secs(10), bell.rung())
            .await
            .expect("rung")
            .unwrap();
        assert!(!dead.exists(), "a socket nobody listens on is removed");
        // Many rings make one wake-up; the ringer never rings itself.
        let own = here.listen().expect("bound");
        for _ in 0..100 {
            here.ring();
        }
        tokio::time::timeout(Duration::from_secs(10), bell.rung())
            .await
            .expect("rung")
            .unwrap();
        let mut buf = [0u8; 8];
        assert!(bell.socket.try_recv(&mut buf).is_err(), "drained");
        assert!(own.socket.try_recv(&mut buf).is_err(), "not rung by itself");
        let path = bell.path.clone();
        drop(bell);
        assert!(!path.exists(), "its file goes with it");
    }

    #[test]
    fn a_directory_of_someone_else_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("eagle.db");
        let wake = dir.path().join("eagle.db.wake");
        std::os::unix::fs::symlink("/tmp", &wake).unwrap();
        assert!(Doorbell::beside(&file).is_none(), "a symlink is refused");
    }
}
