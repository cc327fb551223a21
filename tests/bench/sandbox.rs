//! What the sandbox costs: `cargo bench --bench sandbox`.
//!
//! * A worker's start: the real shim (`eagle worker-shim`) running
//!   `/bin/true`, from spawn to exit, unconfined and confined (the
//!   namespaces, the mounts, the Landlock ruleset, the bridges), 200 times
//!   each, as p50 and p99.
//! * One question over the run's socket: a client inside the worker
//!   connects, writes a line and reads the answer of an echo server
//!   standing in for the runner, 1,000 times, directly (unconfined) and
//!   through the shim's bridge (confined).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use eagle::confine::sandbox::{Limits, Spec};

const STARTS: usize = 200;
const QUESTIONS: usize = 1_000;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

fn eagle_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_eagle"))
}

/// The shim running `argv` (confined when `spec` is given); returns its
/// standard output once it is gone.
fn shim(dir: &Path, spec: Option<&Path>, env: &[(&str, String)], argv: &[&str]) -> String {
    let exit = std::fs::File::create(dir.join("exit")).unwrap();
    let fd = exit.as_raw_fd();
    let mut command = Command::new(eagle_bin());
    command.args(["worker-shim", "--deadline", "60"]);
    if let Some(spec) = spec {
        command.arg("--sandbox").arg(spec);
    }
    command
        .arg("--")
        .args(argv)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.join("home"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(dir.join("work"))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    // SAFETY: setsid and dup2 only, between fork and exec.
    unsafe {
        command.pre_exec(move || {
            libc::setsid();
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = command.output().unwrap();
    let recorded = std::fs::read_to_string(dir.join("exit")).unwrap_or_default();
    assert!(
        recorded.starts_with("exit 0"),
        "the shim recorded {recorded:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["work", "home"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    let socket = dir.path().join("sock");
    let spec = Spec {
        write: vec![dir.path().join("work"), dir.path().join("home")],
        read: Vec::new(),
        hide: Vec::new(),
        request_socket: Some(socket.clone()),
        egress_socket: None,
        limits: Limits::default(),
    };
    let spec_path = dir.path().join("sandbox.json");
    spec.write_to(&spec_path).unwrap();
    echo_server(&socket);

    println!("A worker's start (the shim running /bin/true, {STARTS} times):");
    for (name, spec) in [
        ("unconfined", None),
        ("confined", Some(spec_path.as_path())),
    ] {
        let mut times = Vec::with_capacity(STARTS);
        for _ in 0..STARTS + 10 {
            let started = Instant::now();
            shim(dir.path(), spec, &[], &["/bin/true"]);
            times.push(started.elapsed());
        }
        let mut times = times.split_off(10);
        times.sort();
        println!(
            "  {name:>10}: p50 {:.2} ms, p99 {:.2} ms",
            percentile(&times, 0.5),
            percentile(&times, 0.99)
        );
    }

    println!("One question over the run's socket ({QUESTIONS} round trips):");
    let client = format!(
        "import os,socket,time\nts=[]\nfor _ in range({QUESTIONS}):\n  t=time.perf_counter()\n  s=socket.socket(socket.AF_UNIX)\n  s.connect(os.environ['EAGLE_RUN_SOCKET'])\n  s.sendall(b'ask\\n')\n  f=s.makefile()\n  f.readline()\n  s.close()\n  ts.append(time.perf_counter()-t)\nprint(' '.join(str(x) for x in ts))\n"
    );
    for (name, spec) in [("direct", None), ("bridged", Some(spec_path.as_path()))] {
        let out = shim(
            dir.path(),
            spec,
            &[("EAGLE_RUN_SOCKET", socket.display().to_string())],
            &["/usr/bin/python3", "-c", &client],
        );
        let mut times: Vec<Duration> = out
            .split_whitespace()
            .filter_map(|t| t.parse::<f64>().ok())
            .map(Duration::from_secs_f64)
            .collect();
        assert_eq!(times.len(), QUESTIONS, "{out}");
        times.sort();
        println!(
            "  {name:>10}: p50 {:.3} ms, p99 {:.3} ms",
            percentile(&times, 0.5),
            percentile(&times, 0.99)
        );
    }
}

/// Answers each line with a line, as the runner answers a question.
fn echo_server(path: &Path) {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_ok() {
                    let mut stream = stream;
                    let _ = stream.write_all(b"{\"status\":\"approved\"}\n");
                }
            });
        }
    });
}
