//! Operating Eagle: the shell completions and manual pages, an installed
//! binary that runs from any directory (where profiles are looked for, the
//! built-in ones, `eagle profile init`), the systemd unit (checked by the
//! real `systemd-analyze verify`), and what a clean stop says it left.

use std::collections::BTreeMap;
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::{eagle_bin, finish, text};

/// A machine with nothing of Eagle's on it: a fresh working directory, and
/// `HOME`, `XDG_CONFIG_HOME` and `XDG_DATA_HOME` inside it.
struct Fresh {
    dir: tempfile::TempDir,
    env: BTreeMap<String, String>,
}

impl Fresh {
    fn new() -> Fresh {
        let dir = tempfile::tempdir().unwrap();
        let mut env = BTreeMap::new();
        let at = |sub: &str| dir.path().join(sub).display().to_string();
        env.insert("HOME".into(), at("home"));
        env.insert("XDG_CONFIG_HOME".into(), at("config"));
        env.insert("XDG_DATA_HOME".into(), at("share"));
        env.insert("PATH".into(), std::env::var("PATH").unwrap_or_default());
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("cwd")).unwrap();
        Fresh { dir, env }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// The binary in `cwd/`, with exactly this environment.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(eagle_bin());
        cmd.args(args)
            .env_clear()
            .envs(&self.env)
            .current_dir(self.path("cwd"));
        cmd
    }

    fn run(&self, args: &[&str], stdin: &str) -> Output {
        let child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn eagle");
        finish(
            child,
            stdin.as_bytes(),
            &format!("eagle {}", args.join(" ")),
        )
    }

    /// Runs and expects success: standard output.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args, "");
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "eagle {args:?}: {stderr}");
        stdout
    }
}

/// The subcommands a person uses (the hidden ones have no page).
const SUBCOMMANDS: &[&str] = &[
    "run",
    "shell",
    "migrate",
    "profile",
    "check",
    "analyze",
    "digest",
    "import",
    "policy",
    "request",
    "hook",
    "demo-worker",
    "completions",
    "man",
    "service",
];

/// Neither loads a profile nor opens a database: they work with a profiles
/// directory that does not exist, and leave no data directory behind.
#[test]
fn completions_for_each_shell_name_the_subcommands() {
    let mut fresh = Fresh::new();
    fresh.env.insert(
        "EAGLE_PROFILES_DIR".into(),
        fresh.path("nowhere").display().to_string(),
    );
    for shell in ["bash", "zsh", "fish"] {
        let script = fresh.ok(&["completions", shell]);
        assert!(!script.trim().is_empty(), "{shell}: empty");
        for sub in ["shell", "run", "profile", "service"] {
            assert!(script.contains(sub), "{shell}: no {sub} in:\n{script}");
        }
        if shell == "bash" {
            let file = fresh.path("eagle.bash");
            std::fs::write(&file, &script).unwrap();
            let checked = Command::new("bash").arg("-n").arg(&file).output().unwrap();
            assert!(
                checked.status.success(),
                "bash -n refuses the script: {}",
                String::from_utf8_lossy(&checked.stderr)
            );
        }
    }
    let out = fresh.run(&["completions", "tcsh"], "");
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
    assert!(
        !fresh.path("share/eagle").exists(),
        "a data directory was made"
    );
}

#[test]
fn the_manual_page_names_every_subcommand() {
    let fresh = Fresh::new();
    let page = fresh.ok(&["man"]);
    // The title comes first (after clap_mangen's definition of \*(Aq).
    let first = page
        .lines()
        .find(|l| l.starts_with(".TH") || l.starts_with(".SH"))
        .unwrap_or_default();
    assert!(
        first.starts_with(".TH eagle 1"),
        "not a manual page:\n{page}"
    );
    for sub in SUBCOMMANDS {
        let name = format!("eagle-{sub}").replace('-', "\\-");
        assert!(
            page.contains(&name),
            "the page does not name {sub}:\n{page}"
        );
    }
    assert!(!page.contains("worker-shim"), "a hidden command has a page");
    // man renders it (groff is there wherever man is).
    let file = fresh.path("eagle.1");
    std::fs::write(&file, &page).unwrap();
    let rendered = Command::new("man")
        .arg("-l")
        .arg(&file)
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_FORMATTING", "0")
        .output()
        .expect("man is installed");
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let shown = String::from_utf8_lossy(&rendered.stdout);
    assert!(shown.contains("runs AI coding agents"), "{shown}");
    assert!(shown.contains("eagle-service"), "{shown}");

    // One page per subcommand, nested ones too.
    let out = fresh.ok(&["man", "--out", fresh.path("man1").to_str().unwrap()]);
    for sub in SUBCOMMANDS {
        let path = fresh.path(&format!("man1/eagle-{sub}.1"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}\n{out}", path.display()));
        assert!(
            text.contains(&format!("\n.TH eagle-{sub} 1")),
            "{}:\n{text}",
            path.display()
        );
    }
    for nested in ["eagle.1", "eagle-profile-init.1", "eagle-service-install.1"] {
        assert!(
            fresh.path(&format!("man1/{nested}")).is_file(),
            "no {nested}: {out}"
        );
    }
    assert!(!fresh.path("man1/eagle-worker-shim.1").exists());
}

/// Installed (no checkout, no `profiles/` here), `eagle shell` runs on the
/// built-in profiles and SQLite in the default data directory; `eagle
/// profile init` writes the documented files where `eagle profile list`
/// then finds them.
#[test]
fn installed_eagle_runs_from_any_directory() {
    let fresh = Fresh::new();
    let data = fresh.path("share/eagle");
    crate::support::seed_plugin_cache(&data);
    let out = fresh.run(&["shell"], "!queue x\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("Queued task #1: x"), "{stdout}");
    assert!(
        data.join("eagle.db").is_file(),
        "no database in {}",
        data.display()
    );

    let config = fresh.path("config/eagle/profiles");
    let show = fresh.ok(&["profile", "show", "eagle"]);
    assert!(
        show.contains(&format!(
            "profile:       eagle (built-in; no file {}:",
            config.join("eagle.toml").display()
        )),
        "{show}"
    );
    assert!(
        show.contains("persona:       built-in eagle.soul.md"),
        "{show}"
    );
    // `eagle check` says so too (then fails: there is no zuliprc).
    let check = text(&fresh.run(&["check"], "")).0;
    assert!(
        check.contains("ok    profile eagle: settings are valid (built-in; no file"),
        "{check}"
    );
    let list = fresh.ok(&["profile", "list"]);
    assert!(
        list.contains("eagle\torchestrator\tEagle\tbuilt-in"),
        "{list}"
    );
    assert!(
        list.contains("executor\texecutor\tИсполнитель\tbuilt-in"),
        "{list}"
    );

    let init = fresh.ok(&["profile", "init"]);
    for file in [
        "eagle.toml",
        "eagle.soul.md",
        "executor.toml",
        "executor.soul.md",
    ] {
        let path = config.join(file);
        assert!(
            init.contains(&format!("wrote {}", path.display())),
            "{init}"
        );
        assert!(path.is_file(), "{}", path.display());
    }
    assert_eq!(
        std::fs::read_to_string(config.join("eagle.toml")).unwrap(),
        std::fs::read_to_string(crate::support::repo_profiles().join("eagle.toml")).unwrap(),
        "init writes the documented profile"
    );
    let list = fresh.ok(&["profile", "list"]);
    assert!(
        list.contains(&format!(
            "eagle\torchestrator\tEagle\t{}",
            config.join("eagle.toml").display()
        )),
        "{list}"
    );
    assert!(!list.contains("built-in"), "{list}");
    let show = fresh.ok(&["profile", "show", "eagle"]);
    assert!(
        show.contains(&format!(
            "profile:       eagle ({})",
            config.join("eagle.toml").display()
        )),
        "{show}"
    );
    // A second init does not overwrite an edit; --force does.
    std::fs::write(config.join("eagle.toml"), "role = \"orchestrator\"\n").unwrap();
    let out = fresh.run(&["profile", "init"], "");
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(config.join("eagle.toml")).unwrap(),
        "role = \"orchestrator\"\n"
    );
    fresh.ok(&["profile", "init", "--force"]);
    assert!(
        std::fs::read_to_string(config.join("eagle.toml"))
            .unwrap()
            .len()
            > 100
    );
    // --dir writes elsewhere.
    let elsewhere = fresh.path("elsewhere");
    fresh.ok(&["profile", "init", "--dir", elsewhere.to_str().unwrap()]);
    assert!(elsewhere.join("executor.soul.md").is_file());
}

fn profile_named(dir: &Path, display_name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("eagle.toml"),
        format!("role = \"orchestrator\"\ndisplay_name = \"{display_name}\"\n"),
    )
    .unwrap();
}

fn display_name(fresh: &Fresh, args: &[&str]) -> String {
    let show = fresh.ok(&[args, &["profile", "show", "eagle"]].concat());
    show.lines()
        .find_map(|l| l.strip_prefix("display name:"))
        .unwrap_or_else(|| panic!("{show}"))
        .trim()
        .to_string()
}

/// `--profiles-dir`, then `EAGLE_PROFILES_DIR`, then `./profiles`, then
/// the XDG directory, then the built-in profile.
#[test]
fn profiles_are_looked_for_in_order() {
    let mut fresh = Fresh::new();
    let (flag, env, local, xdg) = (
        fresh.path("flag"),
        fresh.path("env"),
        fresh.path("cwd/profiles"),
        fresh.path("config/eagle/profiles"),
    );
    profile_named(&flag, "FromFlag");
    profile_named(&env, "FromEnv");
    profile_named(&local, "FromCwd");
    profile_named(&xdg, "FromXdg");
    fresh
        .env
        .insert("EAGLE_PROFILES_DIR".into(), env.display().to_string());
    let flag_args = ["--profiles-dir", flag.to_str().unwrap()];
    assert_eq!(display_name(&fresh, &flag_args), "FromFlag");
    assert_eq!(display_name(&fresh, &[]), "FromEnv");
    fresh.env.remove("EAGLE_PROFILES_DIR");
    assert_eq!(display_name(&fresh, &[]), "FromCwd");
    std::fs::remove_dir_all(&local).unwrap();
    assert_eq!(display_name(&fresh, &[]), "FromXdg");
    std::fs::remove_file(xdg.join("eagle.toml")).unwrap();
    assert_eq!(display_name(&fresh, &[]), "Eagle");
    // In a chosen directory without the file, the built-in one serves too.
    assert_eq!(
        display_name(&fresh, &["--profiles-dir", xdg.to_str().unwrap()]),
        "Eagle"
    );

    // An explicit directory that does not exist is an error naming it.
    let missing = fresh.path("missing");
    let out = fresh.run(&["--profiles-dir", missing.to_str().unwrap(), "shell"], "");
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains(&format!(
            "--profiles-dir {}: no such directory",
            missing.display()
        )),
        "{stderr}"
    );
    fresh
        .env
        .insert("EAGLE_PROFILES_DIR".into(), missing.display().to_string());
    let out = fresh.run(&["profile", "list"], "");
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains(&format!(
            "EAGLE_PROFILES_DIR {}: no such directory",
            missing.display()
        )),
        "{stderr}"
    );
    // A name with no file and no built-in profile is named.
    fresh.env.remove("EAGLE_PROFILES_DIR");
    let out = fresh.run(&["profile", "show", "nobody"], "");
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains(&format!(
            "{}: no such profile file",
            xdg.join("nobody.toml").display()
        )),
        "{stderr}"
    );
}

/// The unit as `eagle service install` writes it passes the real
/// `systemd-analyze verify` (as the instance `eagle@eagle`), with no
/// warning about it.
#[test]
fn the_service_unit_verifies() {
    let fresh = Fresh::new();
    let units = fresh.path("units");
    let data = fresh.path("data");
    let profiles = fresh.path("etc-profiles");
    let bin = eagle_bin();
    let args = [
        "service",
        "install",
        "--unit-dir",
        units.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--profiles-dir",
        profiles.to_str().unwrap(),
        "--bin",
        bin.to_str().unwrap(),
        "--user",
        "root",
    ];
    let out = fresh.ok(&args);
    let unit_file = units.join("eagle@.service");
    assert!(
        out.contains(&format!("wrote {}", unit_file.display())),
        "{out}"
    );
    assert!(
        out.contains("systemctl enable eagle@eagle eagle@executor"),
        "{out}"
    );
    assert!(data.is_dir() && profiles.is_dir(), "{out}");
    let unit = std::fs::read_to_string(&unit_file).unwrap();
    assert!(
        unit.contains(&format!("ExecStart={} run --profile %i", bin.display())),
        "{unit}"
    );
    assert!(
        unit.contains(&format!("ReadWritePaths={}", data.display())),
        "{unit}"
    );
    assert!(!unit.contains("@EAGLE_BIN@") && !unit.contains("@DATA_DIR@"));
    // --print prints the same unit and writes nothing.
    let printed = fresh.ok(&[&args[..], &["--print"]].concat());
    assert_eq!(printed, unit);

    // The unit's Documentation= is its manual page: installed where
    // systemd-analyze looks (MANPATH), it is found.
    let man = fresh.path("man");
    fresh.ok(&["man", "--out", man.join("man1").to_str().unwrap()]);
    std::os::unix::fs::symlink("eagle@.service", units.join("eagle@eagle.service")).unwrap();
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(units.join("eagle@eagle.service"))
        .env("MANPATH", &man)
        .env("SYSTEMD_LOG_COLOR", "0")
        .output()
        .expect("systemd-analyze is installed");
    let stderr = String::from_utf8_lossy(&verify.stderr);
    assert!(
        verify.status.success(),
        "systemd-analyze verify failed:\n{stderr}"
    );
    assert!(
        !stderr.contains("eagle@"),
        "systemd-analyze warns about the unit:\n{stderr}"
    );

    // --enable without systemctl on PATH says what to run.
    let mut bare = Fresh::new();
    bare.env
        .insert("PATH".into(), bare.path("empty").display().to_string());
    let units = bare.path("units");
    let out = bare.ok(&[
        "service",
        "install",
        "--enable",
        "--unit-dir",
        units.to_str().unwrap(),
        "--data-dir",
        bare.path("data").to_str().unwrap(),
        "--profiles-dir",
        bare.path("profiles").to_str().unwrap(),
        "--bin",
        bin.to_str().unwrap(),
    ]);
    assert!(out.contains("systemctl is not on PATH"), "{out}");
    assert!(out.contains("  systemctl daemon-reload\n"), "{out}");
    let unit = std::fs::read_to_string(units.join("eagle@.service")).unwrap();
    assert!(!unit.lines().any(|l| l.starts_with("User=")), "{unit}");
    // A relative or unusual path is refused before anything is written.
    let out = bare.run(&["service", "install", "--print", "--data-dir", "data"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out)
            .1
            .contains("--data-dir data: must be an absolute path")
    );
}

/// SIGTERM to the shell: it stops within its bound and says what it left.
#[test]
fn a_clean_stop_says_what_it_left() {
    let mut home = crate::support::Home::new();
    home.set("RUST_LOG", "warn,eagle=info");
    let mut child = home
        .command(&["shell"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "!queue Tabs").unwrap();
    // Its answer says the shell is up (and its signal handler with it).
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("Queued task #1") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(crate::support::CHILD_DEADLINE)
        .expect("the shell answered");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = crate::support::exit_within(&mut child, std::time::Duration::from_secs(60));
    drop(stdin);
    assert!(status.is_some(), "eagle shell did not stop on SIGTERM");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.unwrap().success(), "{stderr}");
    let left = stderr
        .lines()
        .find(|l| l.contains("stopped; left"))
        .unwrap_or_else(|| panic!("no account of what was left:\n{stderr}"));
    assert!(
        left.contains("runs_following_on=0") && left.contains("outbox_undelivered=0"),
        "{left}"
    );
}

/// SIGTERM with a worker running: the worker goes on in its own session
/// (the next runner re-adopts it), and the account says so.
#[test]
fn a_stop_with_a_worker_running_leaves_it_following_on() {
    let mut home = crate::support::Home::new();
    home.set("RUST_LOG", "warn,eagle=info").set(
        "EAGLE_RUNNER__WORKER_COMMAND",
        &crate::executor::fake_worker_command(),
    );
    let gate = home.exchange().join("never");
    let mut child = home
        .command(&["shell"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "!queue gated mode:gate gate:{}\n!go 1",
        gate.display()
    )
    .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("[STATUS: working] run:1") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(crate::support::CHILD_DEADLINE)
        .expect("the worker started");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = crate::support::exit_within(&mut child, std::time::Duration::from_secs(60));
    drop(stdin);
    assert!(status.is_some(), "eagle shell did not stop on SIGTERM");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let left = stderr
        .lines()
        .find(|l| l.contains("stopped; left"))
        .unwrap_or_else(|| panic!("no account of what was left:\n{stderr}"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let run = runtime.block_on(async {
        let store = crate::executor::home_store(&home).await;
        let run = {
            let mut tx = store.begin_read().await.unwrap();
            tx.tasks().run(1).await.unwrap().expect("run 1")
        };
        store.close().await;
        run
    });
    let (pid, ticks, group) = (
        run.worker_pid.expect("a worker") as i32,
        run.worker_start_ticks.unwrap_or(0) as u64,
        run.worker_pgid.expect("a group") as i32,
    );
    let alive = eagle::ground::host::is_alive(pid, ticks);
    // The test's own cleanup: nobody re-adopts this worker.
    let _ = eagle::ground::host::signal_group(group, libc::SIGKILL);
    assert!(alive, "the worker did not outlive the stop");
    assert!(left.contains("runs_following_on=1"), "{left}");
}
