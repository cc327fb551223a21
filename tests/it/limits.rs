//! The runner's own bounds, through the real binary and the fake worker: the
//! run's socket serves at most 32 connections at once and goes on serving; a
//! line of hundreds of MiB is cut (Eagle posts and stores a few hundred
//! bytes of it, and its memory grows by a bounded amount) and the line after
//! it is posted; a worker that always stops to wait is held past
//! `runner.max_waits` instead of being resumed for ever.

use std::io::BufRead as _;
use std::process::Stdio;
use std::sync::mpsc;

use crate::executor::{fake_worker_command, home_store};
use crate::promises::run_posts;
use crate::support::{Home, WAIT, text};

fn fake_home() -> Home {
    let mut home = Home::new();
    home.set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s");
    home
}

#[test]
fn the_run_socket_refuses_connections_past_its_cap_and_keeps_serving() {
    let home = fake_home();
    let out = home.run(&["shell"], "!queue crowd mode:crowd\n!go 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let posts = run_posts(&stdout);
    // While 32 connections are held, every one over them is closed
    // unanswered (and nothing it asked is recorded)…
    assert!(
        posts
            .iter()
            .any(|p| p.ends_with("[STATUS: crowd] run:1 held=32 refused=8 answered=0")),
        "{stdout}\n{stderr}"
    );
    assert!(
        !posts.iter().any(|p| p.contains("one over the cap")),
        "{stdout}"
    );
    // …and once they are gone, the same run asks and is answered, and its
    // run ends as its worker said.
    assert!(
        posts
            .iter()
            .any(|p| p.contains("[APPROVED: run_tests] run:1 req:1")),
        "{stdout}"
    );
    assert!(
        posts
            .iter()
            .any(|p| p.ends_with("[STATUS: crowd_after] run:1 exit=0")),
        "{stdout}\n{stderr}"
    );
    assert!(
        posts
            .iter()
            .any(|p| p.contains("[STATUS: abandoned] run:1 the task goes back for review")),
        "{stdout}"
    );
}

/// The peak resident memory of a running process, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    kib * 1024
}

#[test]
fn a_line_of_512_mib_is_cut_posted_short_and_eagles_memory_stays_bounded() {
    let home = fake_home();
    let gate = home.exchange().join("gate");
    let stderr_path = home.dir.path().join("shell.stderr");
    let mut child = home
        .command(&["shell"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("spawn eagle shell");
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(
        &mut stdin,
        format!("!queue long mode:longline gate:{}\n!go 1\n", gate.display()).as_bytes(),
    )
    .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut wait_for = |needle: &str, seen: &mut Vec<String>| loop {
        match rx.recv_timeout(WAIT * 4) {
            Ok(line) => {
                let found = line.contains(needle);
                seen.push(line);
                if found {
                    return;
                }
            }
            Err(_) => {
                let _ = child.kill();
                let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                panic!(
                    "no {needle:?} from the shell:\n{}\n{stderr}",
                    seen.join("\n")
                );
            }
        }
    };
    // Up and following its worker: what Eagle holds now is its baseline.
    wait_for("[STATUS: ready] run:1", &mut seen);
    let before = peak_rss(pid);
    std::fs::write(&gate, "").unwrap();
    wait_for("[STATUS: abandoned] run:1", &mut seen);
    let after = peak_rss(pid);
    drop(stdin);
    let out = crate::support::finish(child, b"", "eagle shell");
    assert!(out.status.success());
    let stdout = seen.join("\n");
    let posts = run_posts(&stdout);
    // The long line's first words are relayed, capped; nothing posts the line.
    let long = posts
        .iter()
        .find(|p| p.contains("[STATUS: long] run:1 xxx"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(long.len() < 1024, "{} bytes posted", long.len());
    assert!(
        stdout.len() < 64 * 1024,
        "the shell printed {} bytes",
        stdout.len()
    );
    // The line after it is posted as it was written.
    assert!(
        posts
            .iter()
            .any(|p| p.ends_with("[STATUS: after_long] run:1 the line after the long one")),
        "{stdout}"
    );
    // Lines are read at most 8 MiB at a time and cut at 256 KiB: Eagle's
    // peak memory grew by far less than the line (512 MiB) and than the
    // cut pieces of it together (128 MiB).
    let grew = after.saturating_sub(before);
    assert!(
        grew < 64 << 20,
        "Eagle's peak memory grew by {} MiB (from {} MiB) while the worker wrote a 512 MiB line",
        grew >> 20,
        before >> 20
    );
    // Nor is it stored: the whole database is smaller than one cut piece's worth of batches.
    let data = home.dir.path().join("data");
    let stored: u64 = ["eagle.db", "eagle.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(data.join(f)).ok())
        .map(|m| m.len())
        .sum();
    assert!(stored < 16 << 20, "the database holds {stored} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_always_waits_is_held_past_max_waits() {
    let mut home = fake_home();
    home.set("EAGLE_RUNNER__MAX_WAITS", "2");
    // Attempt 1 asks a human and stops to wait (1 wait of 2).
    let out = home.run(&["shell"], "!queue waiter mode:waits\n!go 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let posts = run_posts(&stdout);
    assert!(
        posts
            .iter()
            .any(|p| p.contains("[ESCALATED: merge_pr] run:1 req:1")),
        "{stdout}"
    );
    assert!(
        posts
            .iter()
            .any(|p| p.contains("[STATUS: waiting] run:1 the worker stopped to wait for")),
        "{stdout}"
    );
    assert!(!stdout.contains("runner.max_waits"), "{stdout}");
    // Approved, it is resumed, asks again and waits again: that is the
    // second wait, and the run is held for its owner instead.
    let out = home.run(&["shell"], "!approve 1 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let posts = run_posts(&stdout);
    assert!(
        posts
            .iter()
            .any(|p| p.contains("[STATUS: started] run:1 attempt 2: continue worker")),
        "{stdout}"
    );
    assert!(
        posts
            .iter()
            .any(|p| p.contains("[ESCALATED: merge_pr] run:1 req:2")),
        "{stdout}"
    );
    let held = posts
        .iter()
        .find(|p| p.contains("[STATUS: held] run:1"))
        .unwrap_or_else(|| panic!("run 1 was not held:\n{stdout}\n{stderr}"));
    assert!(
        held.contains("2 attempts stopped to wait for decisions (runner.max_waits)"),
        "{held}"
    );
    let store = home_store(&home).await;
    let run = {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks().run(1).await.unwrap().expect("run 1")
    };
    assert!(run.held && run.waits == 2, "{run:?}");
    // Its last question answered, it is still not resumed: it waits for its owner.
    let out = home.run(&["shell"], "!approve 1 2\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("Approved request 2 (merge_pr) of run 1"),
        "{stdout}"
    );
    assert!(!stdout.contains("attempt 3"), "{stdout}");
}
