//! Moving in: a plugin dropped into a running Eagle's plugin directory, and
//! (below) the old executor's data imported with `eagle import executor-v2`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{Home, fixture, text};

/// How long a live shell may take to print what a test waits for.
const WAIT: Duration = Duration::from_secs(60);

/// An `eagle shell` that keeps running while the test types into it.
struct LiveShell {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<String>>,
}

impl LiveShell {
    fn start(home: &Home) -> LiveShell {
        let mut child = home
            .command(&["shell"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn eagle shell");
        let out = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().unwrap();
        let sink = Arc::clone(&out);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut out = sink.lock().unwrap();
                out.push_str(&line);
                out.push('\n');
            }
        });
        LiveShell {
            stdin: child.stdin.take(),
            child,
            out,
        }
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("the shell's input is open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits until the shell printed `needle`; returns everything so far.
    fn wait_for(&self, needle: &str) -> String {
        self.wait_for_nth(needle, 1)
    }

    /// Waits until the shell printed `needle` `n` times.
    fn wait_for_nth(&self, needle: &str, n: usize) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let out = self.out.lock().unwrap().clone();
            if out.matches(needle).count() >= n {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "the shell did not print {needle:?} within {WAIT:?}:\n{out}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for LiveShell {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if crate::support::exit_within(&mut self.child, Duration::from_secs(30)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A component built from `tests/plugins/` and copied into the plugin
/// directory decides the next request, with no restart and no profile
/// edit; the owner is told its name, version and hash. A directory or a
/// file that others may write is refused, and that is said too.
#[test]
fn a_dropped_in_plugin_decides_the_next_request_and_unsafe_ones_are_refused() {
    let mut home = Home::new();
    home.set("EAGLE_POLICY__RELOAD_INTERVAL", "200ms")
        .set("EAGLE_SHELL_WAIT", "5s");
    let plugins = home.dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    chmod(&plugins, 0o700);
    let mut shell = LiveShell::start(&home);
    shell.say("!queue Before mode:x\n!go 1");
    shell.wait_for("[APPROVED: create_worktree] run:1 req:1 (default-approval)");

    // Dropped in: written elsewhere, then moved in whole.
    let staged = home.dir.path().join("probe.wasm");
    std::fs::copy(fixture("reload-v2"), &staged).unwrap();
    chmod(&staged, 0o600);
    let dropped = plugins.join("probe.wasm");
    std::fs::rename(&staged, &dropped).unwrap();
    let sha = eagle::policy::content_hash(&std::fs::read(&dropped).unwrap());
    let out = shell.wait_for("Policy plugin **reload-probe** 2.0.0");
    assert!(
        out.contains(&format!(
            "Policy plugin **reload-probe** 2.0.0 (sha256 `{sha}`) is loaded from `{}`",
            dropped.display()
        )),
        "{out}"
    );
    assert!(out.contains("#executor > plugins · Eagle: @**"), "{out}");
    shell.say("!queue After mode:x\n!go 2");
    let out = shell.wait_for("[DENIED: create_worktree] run:2 req:");
    assert!(out.contains("version 2 denies"), "{out}");

    // A directory anyone may write: refused, said, and it votes escalate.
    chmod(&plugins, 0o777);
    let out = shell.wait_for("is not used:");
    assert!(
        out.contains(&format!(
            "its directory {} is writable by its group and everyone (mode 0777)",
            plugins.display()
        )) || out.contains("the plugin directory"),
        "{out}"
    );
    let listed = home.run(&["policy", "list"], "");
    let (stdout, stderr) = text(&listed);
    assert_eq!(listed.status.code(), Some(1), "a refused plugin: {stderr}");
    assert!(stdout.contains("state:     failed:"), "{stdout}");
    assert!(stdout.contains("is refused: its directory"), "{stdout}");
    assert!(
        stdout.contains("whoever can write there can decide"),
        "{stdout}"
    );

    // Back to private, but the file itself writable by others.
    chmod(&plugins, 0o700);
    let loaded = format!(
        "(sha256 `{sha}`) is loaded from `{}`: it votes from now on.",
        dropped.display()
    );
    shell.wait_for_nth(&loaded, 2);
    chmod(&dropped, 0o646);
    let out = shell.wait_for("the plugin file");
    assert!(
        out.contains(&format!(
            "the plugin file {} is writable by everyone (mode 0646)",
            dropped.display()
        )),
        "{out}"
    );
    drop(shell);

    // Excluded by the profile: not loaded, nothing to decide with.
    chmod(&dropped, 0o600);
    home.set("EAGLE_POLICY__EXCLUDE", "probe");
    let listed = home.run(&["policy", "list"], "");
    let (stdout, _) = text(&listed);
    assert!(!stdout.contains("reload-probe"), "{stdout}");
}
