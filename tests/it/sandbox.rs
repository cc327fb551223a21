//! The sandbox, tried as an attacker would: a hostile worker
//! (`escape-worker.sh`) run as a worker is (the real `eagle shell`, the real
//! shim, the real sandbox, a worker user of its own) tries every way out of
//! its run; each attempt is asserted by name, and so is the ordinary work
//! that must still be possible. The limits stop a fork bomb, a disk filler,
//! a file past its size and a hoarder of open files, and Eagle keeps
//! serving throughout. The shim's own writes before the sandbox (the run's
//! rules) follow no link a worker left in its checkout.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::{Home, text};

/// A Unix user for confined workers, made for the test and removed after.
struct SandboxUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl SandboxUser {
    fn create(name: &str) -> SandboxUser {
        assert_eq!(
            eagle::ground::host::euid(),
            0,
            "the sandbox tests start workers as another user: run them as root (CI does)"
        );
        if eagle::ground::host::lookup_user(name).unwrap().is_none() {
            let out = std::process::Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    name,
                ])
                .output()
                .expect("useradd");
            assert!(
                out.status.success(),
                "useradd: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let user = eagle::ground::host::lookup_user(name)
            .unwrap()
            .expect("the user");
        SandboxUser {
            name: name.into(),
            uid: user.uid,
            gid: user.gid,
        }
    }
}

impl Drop for SandboxUser {
    fn drop(&mut self) {
        let _ = std::process::Command::new("userdel")
            .arg(&self.name)
            .output();
    }
}

/// Listeners outside the sandbox that record whether anyone reached them.
struct Listeners {
    tcp_port: u16,
    udp_port: u16,
    abstract_name: String,
    reached: Arc<AtomicBool>,
}

impl Listeners {
    fn start() -> Listeners {
        let reached = Arc::new(AtomicBool::new(false));
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let abstract_name = format!(
            "eagle-sandbox-test-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        );
        let abstract_listener = {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
                .unwrap();
            UnixListener::bind_addr(&addr).unwrap()
        };
        let listeners = Listeners {
            tcp_port: tcp.local_addr().unwrap().port(),
            udp_port: udp.local_addr().unwrap().port(),
            abstract_name,
            reached: Arc::clone(&reached),
        };
        let flag = Arc::clone(&reached);
        std::thread::spawn(move || {
            if tcp.accept().is_ok() {
                flag.store(true, Ordering::SeqCst);
            }
        });
        let flag = Arc::clone(&reached);
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            if let Ok((_, from)) = udp.recv_from(&mut buf) {
                flag.store(true, Ordering::SeqCst);
                let _ = udp.send_to(b"echo", from);
            }
        });
        std::thread::spawn(move || {
            if abstract_listener.accept().is_ok() {
                reached.store(true, Ordering::SeqCst);
            }
        });
        listeners
    }
}

/// Runs `eagle shell` as root with a confined worker user, the hostile
/// worker as the worker command, and `lines` after the pid is known.
fn shell(home: &Home, input: impl FnOnce(u32) -> String) -> (String, String) {
    shell_as(home, None, input)
}

/// As [`shell`], as `user` (an unprivileged Eagle) when given.
fn shell_as(
    home: &Home,
    user: Option<&SandboxUser>,
    input: impl FnOnce(u32) -> String,
) -> (String, String) {
    use std::os::unix::process::CommandExt as _;
    let mut command = std::process::Command::new(home.dir.path().join("bin/eagle"));
    if let Some(user) = user {
        command.uid(user.uid).gid(user.gid);
    }
    let child = command
        .arg("shell")
        .env_clear()
        .envs(&home.env)
        .current_dir(home.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let input = input(child.id());
    let out = crate::support::finish(child, input.as_bytes(), "eagle shell");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// A home whose executor runs `escape-worker.sh` confined, as `user`, in a
/// clone of a small repository.
fn hostile_home(user: &SandboxUser) -> Home {
    hostile_home_as(user, false)
}

/// As [`hostile_home`]; `shared`: Eagle itself runs as `user` (an
/// unprivileged Eagle whose workers share its user), so the home is its.
fn hostile_home_as(user: &SandboxUser, shared: bool) -> Home {
    let mut home = Home::new();
    let root = home.dir.path().to_path_buf();
    eagle::ground::host::chmod(&root, 0o711).unwrap();
    let bin = root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    eagle::ground::host::chmod(&bin, 0o755).unwrap();
    std::fs::copy(crate::support::eagle_bin(), bin.join("eagle")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/it/escape-worker.sh");
    std::fs::copy(&script, bin.join("escape-worker.sh")).unwrap();
    for file in ["eagle", "escape-worker.sh"] {
        eagle::ground::host::chmod(&bin.join(file), 0o755).unwrap();
    }
    let repo = root.join("repo");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README"), "a repository to work in\n").unwrap();
    git(&["add", "README"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "commit",
        "-q",
        "-m",
        "start",
    ]);
    // The worker user clones it (git refuses a repository of another owner).
    let out = std::process::Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", user.uid, user.gid))
        .arg(&repo)
        .output()
        .unwrap();
    assert!(out.status.success());
    let outside = root.join("outside");
    std::fs::create_dir(&outside).unwrap();
    eagle::ground::host::chmod(&outside, 0o777).unwrap();
    let zuliprc = home.profiles().join("eagle.zuliprc");
    std::fs::write(
        &zuliprc,
        "[api]\nemail=eagle-bot@example.com\nkey=secret-key-0123456789\nsite=https://zulip.example.com\n",
    )
    .unwrap();
    // As a worker user's file would be: the same user could read it.
    std::os::unix::fs::chown(&zuliprc, Some(user.uid), Some(user.gid)).unwrap();
    if shared {
        home.env.remove("EAGLE_RUNNER__WORKER_USER");
    } else {
        home.set("EAGLE_RUNNER__WORKER_USER", &user.name);
    }
    home.set(
        "EAGLE_RUNNER__WORKER_COMMAND",
        &format!("bash {} {{prompt}}", bin.join("escape-worker.sh").display()),
    )
    .set("EAGLE_RUNNER__WORKER_PATH", "/usr/local/bin:/usr/bin:/bin")
    .set("EAGLE_RUNNER__REPO", &repo.display().to_string())
    .set("EAGLE_RUNNER__MAX_ATTEMPTS", "1")
    .set("EAGLE_RUNNER__SANDBOX__MODE", "on")
    .set("EAGLE_RUNNER__SANDBOX__MAX_PROCESSES", "64")
    .set("EAGLE_RUNNER__SANDBOX__MAX_FILE_SIZE", "16MiB")
    .set("EAGLE_RUNNER__SANDBOX__MAX_DISK", "48MiB");
    home
}

/// Another run of the same worker user, as the sandbox must hide it: its
/// token readable by that user, its socket connectable by anyone.
fn other_run(runs: &Path, user: &SandboxUser) -> (PathBuf, PathBuf, UnixListener) {
    let other = runs.join("99");
    for dir in ["work", "home", "eagle"] {
        std::fs::create_dir_all(other.join(dir)).unwrap();
    }
    eagle::ground::host::chmod(&other, 0o711).unwrap();
    let token = other.join("home/token");
    std::fs::write(&token, "another run's token").unwrap();
    for path in [other.join("work"), other.join("home"), token] {
        std::os::unix::fs::chown(&path, Some(user.uid), Some(user.gid)).unwrap();
    }
    let sock = other.join("eagle/sock-1");
    let listener = UnixListener::bind(&sock).unwrap();
    eagle::ground::host::chmod(&sock, 0o777).unwrap();
    (other, sock, listener)
}

fn report_of(runs: &Path, run: i64) -> BTreeMap<String, String> {
    let path = runs.join(run.to_string()).join("work/escape-report.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the hostile worker wrote no report at {}: {e}",
            path.display()
        )
    });
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, outcome)| (name.to_string(), outcome.to_string()))
        .collect()
}

/// Things outside the sandbox a hostile worker tries to reach, each of
/// which records (or shows, read from outside) whether it was: a Unix
/// socket under `/var/lib` and one in Eagle's HOME, a terminal of another
/// user, a System V message queue of the host, secret files under `/opt`
/// and `/etc` (the latter named by a profile), all readable by the
/// worker's user as far as file modes go. Removed when dropped.
struct HostBait {
    _dirs: RemoveOnDrop,
    tool: PathBuf,
    varlib_sock: PathBuf,
    home_sock: PathBuf,
    reached: Arc<AtomicBool>,
    pty_master: std::os::fd::OwnedFd,
    pty_slave: PathBuf,
    msgq_key: i32,
    msgq: i32,
    opt_token: PathBuf,
    etc_token: PathBuf,
}

impl HostBait {
    fn set(home: &Home) -> HostBait {
        use std::os::fd::FromRawFd as _;
        let tag = format!("eagle-test-{}-{}", std::process::id(), fastrand::u32(..));
        let reached = Arc::new(AtomicBool::new(false));
        // Removed even if a step below fails.
        let mut dirs = RemoveOnDrop(Vec::new());
        let mut made = |parent: &str| {
            let dir = Path::new(parent).join(&tag);
            dirs.0.push(dir.clone());
            std::fs::create_dir(&dir).unwrap();
            eagle::ground::host::chmod(&dir, 0o777).unwrap();
            dir
        };
        let varlib = made("/var/lib");
        let opt = made("/opt");
        let etc = made("/etc");
        // A toolchain under /opt the profile shows (`read_only`).
        let tool = opt.join("tool");
        std::fs::create_dir_all(&tool).unwrap();
        std::fs::write(tool.join("version"), "tool 1.0\n").unwrap();
        eagle::ground::host::chmod(&tool, 0o755).unwrap();
        let listen = |path: &Path| {
            let listener = UnixListener::bind(path).unwrap();
            eagle::ground::host::chmod(path, 0o777).unwrap();
            let flag = Arc::clone(&reached);
            std::thread::spawn(move || {
                if listener.accept().is_ok() {
                    flag.store(true, Ordering::SeqCst);
                }
            });
        };
        let varlib_sock = varlib.join("db.sock");
        listen(&varlib_sock);
        let home_sock = home.dir.path().join("eagle-home.sock");
        listen(&home_sock);
        let opt_token = opt.join("token");
        let etc_token = etc.join("token");
        for token in [&opt_token, &etc_token] {
            std::fs::write(token, "ghp_hostBaitToken").unwrap();
            eagle::ground::host::chmod(token, 0o644).unwrap();
        }
        // Named by a profile (one Eagle does not even load): out of view.
        std::fs::write(
            home.profiles().join("other.toml"),
            format!("[github]\ntoken_file = \"{}\"\n", etc_token.display()),
        )
        .unwrap();
        // A terminal of another user, open to anyone by its mode.
        // SAFETY: plain libc calls on a descriptor we own.
        let (pty_master, pty_slave) = unsafe {
            let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(fd >= 0, "posix_openpt");
            assert_eq!(libc::grantpt(fd), 0);
            assert_eq!(libc::unlockpt(fd), 0);
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0);
            let name = std::ffi::CStr::from_ptr(name.as_ptr())
                .to_string_lossy()
                .into_owned();
            libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
            (std::os::fd::OwnedFd::from_raw_fd(fd), PathBuf::from(name))
        };
        eagle::ground::host::chmod(&pty_slave, 0o666).unwrap();
        let msgq_key = (fastrand::u32(..) & 0x00ff_ffff) as i32 | 0x4500_0000;
        // SAFETY: msgget with a key and flags.
        let msgq = unsafe { libc::msgget(msgq_key, libc::IPC_CREAT | libc::IPC_EXCL | 0o666) };
        assert!(msgq >= 0, "msgget: {}", std::io::Error::last_os_error());
        HostBait {
            _dirs: dirs,
            tool,
            varlib_sock,
            home_sock,
            reached,
            pty_master,
            pty_slave,
            msgq_key,
            msgq,
            opt_token,
            etc_token,
        }
    }

    /// The task's words naming each bait.
    fn words(&self, home: &Home) -> String {
        format!(
            "pty:{} msgq:{} varlib_sock:{} home_sock:{} opt_token:{} etc_token:{} other_zuliprc:{} wal:{} tool:{}",
            self.pty_slave.display(),
            self.msgq_key,
            self.varlib_sock.display(),
            self.home_sock.display(),
            self.opt_token.display(),
            self.etc_token.display(),
            home.profiles().join("executor.zuliprc").display(),
            home.dir.path().join("data/eagle.db-wal").display(),
            self.tool.display(),
        )
    }

    /// Whether anything reached a bait, read from outside.
    fn touched(&self) -> Vec<&'static str> {
        use std::os::fd::AsRawFd as _;
        let mut touched = Vec::new();
        if self.reached.load(Ordering::SeqCst) {
            touched.push("a Unix socket");
        }
        let mut buf = [0u8; 64];
        // SAFETY: a non-blocking read into a local buffer.
        let n = unsafe {
            libc::read(
                self.pty_master.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n > 0 {
            touched.push("the terminal");
        }
        // SAFETY: IPC_STAT fills a plain struct.
        let mut stat: libc::msqid_ds = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::msgctl(self.msgq, libc::IPC_STAT, &mut stat) };
        assert_eq!(rc, 0, "msgctl: {}", std::io::Error::last_os_error());
        if stat.msg_qnum != 0 {
            touched.push("the message queue");
        }
        touched
    }
}

impl Drop for HostBait {
    fn drop(&mut self) {
        // SAFETY: removing the queue this test made.
        unsafe {
            libc::msgctl(self.msgq, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

/// Directories a test made outside its home, removed when dropped.
struct RemoveOnDrop(Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[test]
fn a_hostile_worker_escapes_nowhere_and_ordinary_work_still_works() {
    escape_suite("eagle-test-sbx", false);
}

/// The same suite with an unprivileged Eagle whose workers share its user:
/// the view, not the user, keeps Eagle's own files out of reach.
#[test]
fn a_hostile_worker_sharing_an_unprivileged_eagles_user_escapes_nowhere() {
    escape_suite("eagle-test-sbx-shared", true);
}

fn escape_suite(user: &str, shared: bool) {
    let user = SandboxUser::create(user);
    let home = hostile_home_as(&user, shared);
    let root = home.dir.path().to_path_buf();
    let data = root.join("data");
    let runs = data.join("executor/runs");
    std::fs::create_dir_all(&runs).unwrap();
    let (other, other_sock, other_listener) = other_run(&runs, &user);
    let other_reached = Arc::new(AtomicBool::new(false));
    {
        let flag = Arc::clone(&other_reached);
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = other_listener.accept() {
                flag.store(true, Ordering::SeqCst);
                let _ = stream.read(&mut [0u8; 8]);
            }
        });
    }
    let listeners = Listeners::start();
    let bait = HostBait::set(&home);
    let mut home = home;
    home.set(
        "EAGLE_RUNNER__SANDBOX__READ_ONLY",
        &bait.tool.display().to_string(),
    );
    std::fs::write(
        home.profiles().join("executor.zuliprc"),
        "[api]\nemail=executor-bot@example.com\nkey=executor-key-0123456789\nsite=https://zulip.example.com\n",
    )
    .unwrap();
    if shared {
        // Everything of the home is Eagle's user's, as it would be.
        let out = std::process::Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", user.uid, user.gid))
            .arg(&root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let db = data.join("eagle.db");
    let zuliprc = home.profiles().join("eagle.zuliprc");
    let profile = home.profiles().join("executor.toml");
    let outside = root.join("outside");
    let (stdout, stderr) = shell_as(&home, shared.then_some(&user), |pid| {
        format!(
            "!queue escape mode:escape db:{} zuliprc:{} profile:{} data:{} other:{} other_sock:{} outside:{} port:{} uport:{} abstract:{} eagle_pid:{pid} {}\n!go 1\n!status\n",
            db.display(),
            zuliprc.display(),
            profile.display(),
            data.display(),
            other.display(),
            other_sock.display(),
            outside.display(),
            listeners.tcp_port,
            listeners.udp_port,
            listeners.abstract_name,
            bait.words(&home),
        )
    });
    let report = report_of(&runs, 1);
    let outcome = |name: &str| {
        report
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no outcome for {name} in {report:?}\n{stdout}\n{stderr}"))
    };
    for name in [
        "read_db",
        "read_zuliprc",
        "read_profile",
        "list_data",
        "read_other_run",
        "list_other_run",
        "connect_other_socket",
        "write_absolute",
        "write_dotdot",
        "write_symlink",
        "write_tmp",
        "write_eagle_home",
        "git_config_append",
        "git_config_command",
        "git_hook",
        "git_swap",
        "tcp_by_ip",
        "tcp_by_name",
        "udp_by_ip",
        "tcp_eagle_listener",
        "udp_eagle_listener",
        "tcp_postgres",
        "unix_postgres",
        "abstract_socket",
        "signal_eagle",
        "ptrace_eagle",
        "environ_eagle",
        "unix_var_lib",
        "unix_eagle_home",
        "write_pty",
        "ipc_msgq",
        "read_token_opt",
        "read_token_etc",
        "read_other_zuliprc",
        "read_db_wal",
        "git_attributes",
        "git_hooks_swap",
    ] {
        assert_eq!(outcome(name), "blocked", "{name} escaped the sandbox");
    }
    assert!(
        bait.touched().is_empty(),
        "{:?} reached from inside",
        bait.touched()
    );
    for name in [
        "write_workdir",
        "write_tmpdir",
        "git_commit",
        "python",
        "cc",
        "loopback_port",
        "proxy_env",
        "read_only_tool",
        "ask_eagle",
    ] {
        assert_eq!(
            outcome(name),
            "works",
            "{name} is broken inside the sandbox"
        );
    }
    // Nothing reached from inside, nothing written outside.
    assert!(
        !listeners.reached.load(Ordering::SeqCst),
        "a listener outside was reached"
    );
    assert!(
        !other_reached.load(Ordering::SeqCst),
        "another run's socket was reached"
    );
    for path in [
        outside.join("escaped-absolute"),
        outside.join("escaped-symlink"),
        runs.join("escaped-dotdot"),
        PathBuf::from("/tmp/eagle-escaped-1"),
        PathBuf::from("/root/eagle-escaped-1"),
    ] {
        assert!(!path.exists(), "{} was written from inside", path.display());
    }
    let config = std::fs::read_to_string(runs.join("1/work/.git/config")).unwrap();
    assert!(
        !config.contains("fsmonitor") && !config.contains("hooksPath"),
        "{config}"
    );
    assert!(!runs.join("1/work/.git/hooks/post-commit").exists());
    assert!(!runs.join("1/work/.git/hooks/pre-push").exists());
    assert!(!runs.join("1/work/.git/info/attributes").exists());
    // Eagle kept serving: the run ended as its worker said, and !status answered.
    assert!(
        stdout.contains("[STATUS: abandoned] run:1"),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("**Executors**"), "{stdout}");
    assert!(!stdout.contains("unconfined"), "{stdout}");
}

#[test]
fn the_limits_stop_a_fork_bomb_a_disk_filler_and_a_file_past_its_size() {
    let user = SandboxUser::create("eagle-test-sbx2");
    let home = hostile_home(&user);
    let (stdout, stderr) = shell(&home, |_| {
        "!queue bomb mode:forkbomb\n!go 1\n!queue filler mode:disk\n!go 2\n!queue big mode:fsize\n!go 3\n!status\n"
            .to_string()
    });
    let failed = |run: i64| {
        stdout
            .lines()
            .find(|l| l.contains(&format!("run:{run} attempt 1 failed")))
            .unwrap_or_else(|| panic!("run {run} was not stopped:\n{stdout}\n{stderr}"))
            .to_string()
    };
    let bomb = failed(1);
    assert!(
        bomb.contains("limit of its sandbox") && bomb.contains("processes"),
        "{bomb}"
    );
    assert!(!stdout.contains("[STATUS: forkbomb]"), "{stdout}");
    let filler = failed(2);
    assert!(
        filler.contains("limit of its sandbox") && filler.contains("disk"),
        "{filler}"
    );
    // The disk is sampled (every few seconds), so a fast writer may get
    // past the limit before it is stopped; stopped it is, by that limit.
    let big = failed(3);
    assert!(big.contains("max_file_size"), "{big}");
    let size_line = stdout
        .lines()
        .find(|l| l.contains("[STATUS: fsize]"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(size_line.ends_with("big is 16777216 bytes"), "{size_line}");
    assert!(stdout.contains("**Executors**"), "{stdout}");
}

#[test]
fn the_open_files_limit_stops_a_worker_that_holds_more() {
    let user = SandboxUser::create("eagle-test-sbx3");
    let mut home = hostile_home(&user);
    home.set("EAGLE_RUNNER__SANDBOX__MAX_OPEN_FILES", "64");
    let (stdout, stderr) = shell(&home, |_| {
        "!queue hoarder mode:nofile\n!go 1\n!status\n".to_string()
    });
    let failed = stdout
        .lines()
        .find(|l| l.contains("run:1 attempt 1 failed"))
        .unwrap_or_else(|| panic!("run 1 was not stopped:\n{stdout}\n{stderr}"));
    assert!(
        failed.contains("limit of its sandbox") && failed.contains("max_open_files is 64"),
        "{failed}"
    );
    // The worker holds all it may (a descriptor it inherited past the limit,
    // as the test harness's, comes on top).
    let held: u64 = failed
        .split_once("open files: a process held ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{failed}"));
    assert!(held >= 64, "{failed}");
    assert!(!stdout.contains("[STATUS: nofile]"), "{stdout}");
    assert!(stdout.contains("**Executors**"), "{stdout}");
}

/// As root with the data directory under a private directory (a `HOME` of
/// mode 700) and a worker user: `eagle check` and the executor refuse,
/// naming the directory the worker user cannot pass; once it can, both go.
#[test]
fn a_runs_directory_the_worker_user_cannot_reach_is_refused_with_the_directory() {
    let user = SandboxUser::create("eagle-test-sbx-reach");
    let mut home = Home::new();
    let root = home.dir.path().to_path_buf();
    eagle::ground::host::chmod(&root, 0o700).unwrap();
    home.set("EAGLE_RUNNER__WORKER_USER", &user.name)
        .set("EAGLE_RUNNER__WORKER_COMMAND", "cat {prompt}");
    let blocked = format!(
        "the worker user {} cannot pass through {} (mode 700) on the way to the runs directory",
        user.name,
        root.display()
    );
    let out = home.run(&["check", "--profile", "executor"], "");
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(&blocked), "{stdout}\n{stderr}");
    let out = home.run(&["shell"], "!queue Anything\n!go 1\n");
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains(&blocked), "{stdout}\n{stderr}");
    // Passable: the check says where the runs are.
    eagle::ground::host::chmod(&root, 0o711).unwrap();
    let out = home.run(&["check", "--profile", "executor"], "");
    let (stdout, _) = text(&out);
    assert!(!stdout.contains("cannot pass through"), "{stdout}");
    assert!(
        stdout.contains(&format!("workers run as {} (uid {})", user.name, user.uid)),
        "{stdout}"
    );
}

/// The shim writes the run's rules into the checkout before the worker
/// starts, outside the sandbox: links an earlier attempt left there
/// (`AGENTS.md` to a file elsewhere, `.git/info` to a directory elsewhere)
/// are not followed, the shim says so, and the worker starts all the same.
#[test]
fn the_shim_writes_nothing_through_a_link_left_in_the_checkout() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let (work, home, outside) = (
        dir.path().join("work"),
        dir.path().join("home"),
        dir.path().join("outside"),
    );
    for made in [work.join(".git"), home.clone(), outside.join("info")] {
        std::fs::create_dir_all(made).unwrap();
    }
    // Another run's rules, which a shim following the link would take for
    // its own and write over.
    std::fs::write(outside.join("theirs.md"), "# Rules of run 2\n").unwrap();
    std::os::unix::fs::symlink(outside.join("theirs.md"), work.join("AGENTS.md")).unwrap();
    std::os::unix::fs::symlink(outside.join("info"), work.join(".git/info")).unwrap();
    let rules = dir.path().join("rules.md");
    std::fs::write(&rules, "# Rules of run 1\n").unwrap();
    let exit_file = std::fs::File::create(dir.path().join("exit")).unwrap();
    let exit_fd = exit_file.as_raw_fd();
    let mut shim = std::process::Command::new(crate::support::eagle_bin());
    shim.args(["worker-shim", "--deadline", "60", "--rules"])
        .arg(&rules)
        .args(["--", "true"])
        .current_dir(&work)
        .env_clear()
        .env("HOME", &home)
        // The shim ends its own process group when the worker is done.
        .process_group(0);
    // SAFETY: dup2 and fcntl are async-signal-safe; descriptor 3 is the
    // exit file, as the runner hands it over.
    unsafe {
        shim.pre_exec(move || {
            let rc = if exit_fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(exit_fd, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = shim.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("exit")).unwrap(),
        "exit 0\n",
        "{stderr}"
    );
    assert!(
        stderr.contains("AGENTS.md was not written: AGENTS.md is a symbolic link: not followed"),
        "{stderr}"
    );
    assert!(
        stderr.contains(".git/info/exclude was not written: info is a symbolic link"),
        "{stderr}"
    );
    // Nothing written elsewhere; the checkout's CLAUDE.md is there.
    assert_eq!(
        std::fs::read_to_string(outside.join("theirs.md")).unwrap(),
        "# Rules of run 2\n"
    );
    assert_eq!(std::fs::read_dir(outside.join("info")).unwrap().count(), 0);
    assert_eq!(
        std::fs::read_to_string(work.join("CLAUDE.md")).unwrap(),
        "@AGENTS.md\n"
    );
    assert!(home.join(".claude").is_dir());
}
