//! Waiting for child processes and for events, always with a deadline: a
//! test whose `eagle` or whose condition hangs fails with what it was
//! waiting for (and what the child printed) instead of holding up CI.

use std::io::{Read, Write};
use std::process::{Child, ExitStatus, Output};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// How long the tests wait for something that happens within seconds
/// (a reply, a row, a lock wait): generous, so that only a hang reaches it.
pub const WAIT: Duration = Duration::from_secs(30);

/// How long one run of a child process may take. The longest runs of the
/// binary (a shell session through every watchdog, Claude Code turns) take
/// well under a minute; five cover a loaded machine, and only a hang gets
/// here.
pub const CHILD_DEADLINE: Duration = Duration::from_secs(300);

/// How often a child is looked at while it runs: short next to what any
/// run of the binary costs.
const POLL: Duration = Duration::from_millis(5);

/// Waits for `child` to exit, at most `within`. A child still running
/// then is killed and reaped, and `None` returned.
pub fn exit_within(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(error) => panic!("cannot wait for child {}: {error}", child.id()),
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// What a child printed on one pipe, read by a thread of its own so that a
/// full pipe never stalls the child; readable so far at any time.
struct Drained {
    bytes: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl Drained {
    fn start(pipe: Option<impl Read + Send + 'static>) -> Drained {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        let sink = Arc::clone(&bytes);
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut chunk = [0u8; 8192];
                while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                    sink.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend_from_slice(&chunk[..n]);
                }
            }
            let _ = tx.send(());
        });
        Drained { bytes, done }
    }

    /// Waits until the pipe is closed, at most until `deadline`; whether it was.
    fn closed_by(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        self.done.recv_timeout(left).is_ok()
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.bytes.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Writes `input` to a spawned child's stdin (if piped, then closes it),
/// collects its stdout and stderr (if piped), and waits for it to exit and
/// its pipes to close, at most [`CHILD_DEADLINE`]. A child still running
/// then is killed and the test fails, naming `what` and showing what it
/// printed so far.
pub fn finish(mut child: Child, input: &[u8], what: &str) -> Output {
    let deadline = Instant::now() + CHILD_DEADLINE;
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_vec();
        // From a thread: a child that never reads must not block the test
        // before its deadline. A write refused because the child exited is
        // not an error of the test: the child's output says why it did.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    let stdout = Drained::start(child.stdout.take());
    let stderr = Drained::start(child.stderr.take());
    let status = exit_within(&mut child, CHILD_DEADLINE);
    // A descendant that inherited a pipe keeps it open after the child is
    // gone: that is a hang too. A killed child's last words take a moment.
    let pipes_by = match status {
        Some(_) => deadline,
        None => Instant::now() + Duration::from_secs(2),
    };
    let closed = stdout.closed_by(pipes_by) && stderr.closed_by(pipes_by);
    let (out, err) = (stdout.take(), stderr.take());
    let shown = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match status {
        Some(status) if closed => Output {
            status,
            stdout: out,
            stderr: err,
        },
        Some(status) => panic!(
            "{what} exited ({status}) but its output was still open after {CHILD_DEADLINE:?} \
             (a process it started holds it)\nstdout:\n{}\nstderr:\n{}",
            shown(&out),
            shown(&err)
        ),
        None => panic!(
            "{what} was still running after {CHILD_DEADLINE:?}; it was killed\n\
             stdout:\n{}\nstderr:\n{}",
            shown(&out),
            shown(&err)
        ),
    }
}

/// Awaits `future` for at most `limit`; a test whose future is still
/// pending then fails, saying what it was waiting for.
pub async fn within<T>(limit: Duration, what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| panic!("waited {limit:?} for {what}, in vain"))
}
