//! The shim's bridges: the listeners the init made inside the sandbox
//! (the run's request socket at [`super::INSIDE_SOCKET`], the proxy's
//! `127.0.0.1:3128`) accepted on here, outside it, each connection copied
//! both ways to the run's own socket on the host. The worker can name no
//! other socket, and a socket nobody listens on (the egress proxy not
//! running) means no connection at all: it fails closed.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Connections one bridge carries at once; more are closed at once.
const MAX_CONNECTIONS: usize = 64;

/// A listener inside and the host socket its connections go to.
pub(super) struct Bridge {
    listener: OwnedFd,
    target: PathBuf,
}

impl Bridge {
    pub fn new(listener: OwnedFd, target: PathBuf) -> Bridge {
        Bridge { listener, target }
    }

    /// Accepts on a thread of its own for as long as the shim lives.
    pub fn serve(self) {
        let open = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || {
            loop {
                // SAFETY: accept4 on a listening descriptor we own.
                let fd = unsafe {
                    libc::accept4(
                        self.listener.as_raw_fd(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        libc::SOCK_CLOEXEC,
                    )
                };
                if fd < 0 {
                    let error = std::io::Error::last_os_error();
                    if error.raw_os_error() == Some(libc::EINTR)
                        || error.raw_os_error() == Some(libc::ECONNABORTED)
                    {
                        continue;
                    }
                    return;
                }
                // SAFETY: the kernel just gave us this descriptor.
                let inside = unsafe { OwnedFd::from_raw_fd(fd) };
                if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::SeqCst);
                    continue;
                }
                let target = self.target.clone();
                let open = Arc::clone(&open);
                std::thread::spawn(move || {
                    if let Ok(outside) = UnixStream::connect(&target) {
                        splice(inside, outside);
                    }
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
    }
}

/// Copies both ways until both sides are done, passing on each half-close.
fn splice(inside: OwnedFd, outside: UnixStream) {
    let (Ok(inside_reader), Ok(outside_writer)) = (inside.try_clone(), outside.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || copy(std::fs::File::from(inside_reader), outside_writer));
    copy_into(outside, inside);
    let _ = up.join();
}

fn copy(mut from: std::fs::File, mut to: UnixStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(std::net::Shutdown::Write);
}

fn copy_into(mut from: UnixStream, to: OwnedFd) {
    let raw = to.as_raw_fd();
    let mut to = std::fs::File::from(to);
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
        }
    }
    // SAFETY: shutting down the write side of a socket we hold.
    unsafe {
        libc::shutdown(raw, libc::SHUT_WR);
    }
}
