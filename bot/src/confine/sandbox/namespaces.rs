//! The confined process tree: the shim (S) forks a keeper (C) that enters
//! new user, mount, network and PID namespaces; the keeper forks the
//! namespace's init (I, PID 1), which sets the worker's world up, starts
//! the worker (W) and reaps. They talk over one `SOCK_SEQPACKET` pair: I
//! sends `ready` with the bridges' listeners (or `error <why>`), later
//! `limit <what>` and the worker's `exit <code>` / `signal <n>`.
//!
//! S forks while it is single-threaded (checked), so C and I may allocate;
//! S starts its threads (bridges, the deadline) only after.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::time::Duration;

use super::{Spec, bridge, landlock, limits, mounts};

/// How a confined worker ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Signaled(i32),
    /// A limit was hit and the tree stopped: which, in words.
    Limit(String),
    /// The sandbox could not be set up (the worker never ran) or broke.
    Failed(String),
}

impl Outcome {
    /// The exit file's line.
    pub fn exit_line(&self) -> String {
        match self {
            Outcome::Exited(code) => format!("exit {code}"),
            Outcome::Signaled(signal) => format!("signal {signal}"),
            Outcome::Limit(what) => format!("limit {what}"),
            Outcome::Failed(why) => format!("error sandbox: {why}"),
        }
    }
}

/// A started confined tree, seen from the shim.
pub struct Tree {
    keeper: libc::pid_t,
    channel: OwnedFd,
    bridges: Vec<bridge::Bridge>,
}

/// What a message from the init says.
enum Said {
    Ready(Vec<OwnedFd>),
    Error(String),
    Limit(String),
    Exit(i32),
    Signal(i32),
}

fn single_threaded() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|d| d.count() == 1)
}

fn last_error(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

/// Forks the confined tree running `program args` with `env` (the
/// worker's environment as the runner built it). Returns once the init
/// said it is ready (or failed: the worker never ran).
pub fn start(
    spec: &Spec,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
) -> Result<Tree, Outcome> {
    if !single_threaded() {
        return Err(Outcome::Failed(
            "the shim has more than one thread: it cannot fork the sandbox safely".into(),
        ));
    }
    let plan = Plan::new(spec, program, args, env).map_err(Outcome::Failed)?;
    let (ours, theirs) = seqpacket_pair().map_err(Outcome::Failed)?;
    let shim = std::process::id() as libc::pid_t;
    // SAFETY: single-threaded (checked above): the child may do anything.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Outcome::Failed(last_error("fork")));
    }
    if pid == 0 {
        drop(ours);
        keeper(&plan, theirs, shim);
    }
    drop(theirs);
    let mut tree = Tree {
        keeper: pid,
        channel: ours,
        bridges: Vec::new(),
    };
    match receive(&tree.channel) {
        Some(Said::Ready(fds)) => {
            // In the order mounts::build made them: the request socket's, the proxy's.
            let mut fds = fds.into_iter();
            if let Some(target) = &spec.request_socket
                && let Some(listener) = fds.next()
            {
                tree.bridges
                    .push(bridge::Bridge::new(listener, target.clone()));
            }
            if let Some(target) = &spec.egress_socket
                && let Some(listener) = fds.next()
            {
                tree.bridges
                    .push(bridge::Bridge::new(listener, target.clone()));
            }
            Ok(tree)
        }
        Some(Said::Error(why)) => {
            tree.reap();
            Err(Outcome::Failed(why))
        }
        _ => {
            let status = tree.reap();
            Err(Outcome::Failed(format!(
                "the sandbox ended before the worker started ({status})"
            )))
        }
    }
}

impl Tree {
    /// Bridges the sockets until the worker's end, then says how it ended.
    pub fn wait(mut self) -> Outcome {
        for bridge in std::mem::take(&mut self.bridges) {
            bridge.serve();
        }
        let mut limit = None;
        let mut outcome = None;
        while let Some(said) = receive(&self.channel) {
            match said {
                Said::Limit(what) => limit = Some(what),
                Said::Exit(code) => outcome = Some(Outcome::Exited(code)),
                Said::Signal(signal) => outcome = Some(Outcome::Signaled(signal)),
                Said::Error(why) => outcome = Some(Outcome::Failed(why)),
                Said::Ready(_) => {}
            }
        }
        let status = self.reap();
        match (limit, outcome) {
            (Some(what), _) => Outcome::Limit(what),
            (None, Some(outcome)) => outcome,
            (None, None) => Outcome::Failed(format!("the sandbox's init ended ({status})")),
        }
    }

    fn reap(&self) -> String {
        let mut status = 0;
        loop {
            // SAFETY: waiting for our own child.
            let rc = unsafe { libc::waitpid(self.keeper, &mut status, 0) };
            if rc >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        describe(status)
    }
}

fn describe(status: libc::c_int) -> String {
    if libc::WIFEXITED(status) {
        format!("exit {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("signal {}", libc::WTERMSIG(status))
    } else {
        format!("status {status}")
    }
}

/// What the keeper and the init need, resolved before the fork (paths
/// canonical, the program found on `PATH`).
pub(super) struct Plan {
    pub spec: Spec,
    /// The program as the view shows it (its canonical path, when found).
    pub program: String,
    /// The program as the command names it (the worker's `argv[0]`).
    pub arg0: String,
    /// The arguments, a file named by an absolute path given canonical
    /// (the path the view shows it at).
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Read-only beyond the system: `PATH`'s directories, the program's,
    /// and the files its arguments name by absolute path (a script).
    pub read_extra: Vec<std::path::PathBuf>,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    /// The worker's working directory (the shim's), found again inside.
    pub cwd: std::path::PathBuf,
}

impl Plan {
    fn new(
        spec: &Spec,
        program: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
    ) -> Result<Plan, String> {
        let canonical = |p: &std::path::PathBuf| {
            std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))
        };
        let mut resolved = spec.clone();
        resolved.write = spec.write.iter().map(canonical).collect::<Result<_, _>>()?;
        resolved.read = spec.read.iter().filter_map(|p| canonical(p).ok()).collect();
        resolved.hide = spec
            .hide
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .collect();
        let mut read_extra = Vec::new();
        let path = env.get("PATH").cloned().unwrap_or_default();
        for dir in path.split(':').filter(|d| d.starts_with('/')) {
            if let Ok(dir) = std::fs::canonicalize(dir) {
                read_extra.push(dir);
            }
        }
        let found = if program.contains('/') {
            Some(std::path::PathBuf::from(program))
        } else {
            path.split(':')
                .map(|d| std::path::Path::new(d).join(program))
                .find(|p| p.is_file())
        };
        let mut shown_program = program.to_string();
        match found.as_ref().map(std::fs::canonicalize) {
            Some(Ok(canonical)) => {
                if let Some(parent) = canonical.parent() {
                    read_extra.push(parent.to_path_buf());
                }
                // Only the program's own directory is shown: a link to it
                // from elsewhere (`node_modules/.bin`) is not there.
                shown_program = canonical.display().to_string();
            }
            Some(Err(e)) => {
                return Err(format!(
                    "cannot show the program {} in the sandbox: {e}",
                    found
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                ));
            }
            None => {}
        }
        // A script or file the command names by its absolute path is shown
        // too, read-only, wherever it lives, and named by the path it is
        // shown at.
        let mut shown_args = Vec::with_capacity(args.len());
        for arg in args {
            match std::fs::canonicalize(arg) {
                Ok(file) if arg.starts_with('/') && file.is_file() => {
                    shown_args.push(file.display().to_string());
                    read_extra.push(file);
                }
                _ => shown_args.push(arg.clone()),
            }
        }
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let cwd = std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .map_err(|e| format!("the working directory: {e}"))?;
        Ok(Plan {
            cwd,
            spec: resolved,
            program: shown_program,
            arg0: program.to_string(),
            args: shown_args,
            env: super::inside_env(spec, env),
            read_extra,
            uid,
            gid,
        })
    }
}

/// The keeper: new namespaces, then the init as its only child.
fn keeper(plan: &Plan, channel: OwnedFd, shim: libc::pid_t) -> ! {
    let fail = |why: String| -> ! {
        send(&channel, format!("error {why}").as_bytes(), &[]);
        // SAFETY: ending a forked child without running the parent's destructors.
        unsafe { libc::_exit(1) }
    };
    die_with_parent(shim);
    if let Err(why) = enter_namespaces(plan.uid, plan.gid) {
        fail(why);
    }
    // SAFETY: the keeper is single-threaded.
    let init = unsafe { libc::fork() };
    if init < 0 {
        fail(last_error("fork the init"));
    }
    if init == 0 {
        init_main(plan, channel);
    }
    drop(channel);
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let rc = unsafe { libc::waitpid(init, &mut status, 0) };
        if rc >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        1
    };
    // SAFETY: as above.
    unsafe { libc::_exit(code) }
}

/// Dies with SIGKILL when `parent` does (and at once if it already did).
fn die_with_parent(parent: libc::pid_t) {
    // SAFETY: prctl and getppid take and return plain integers.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
}

/// New user (uid and gid mapped to themselves), mount, network, PID and
/// IPC namespaces for this process (the PID namespace for its children).
fn enter_namespaces(uid: libc::uid_t, gid: libc::gid_t) -> Result<(), String> {
    let flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC;
    // SAFETY: unshare takes flags; the process is single-threaded.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(last_error(
            "cannot create the user, mount, network, PID and IPC namespaces (unshare)",
        ));
    }
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("cannot write /proc/self/{file}: {e}"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// The probe: the namespaces, a PID 1 in them, a fresh `/proc` and a tmpfs.
pub(super) fn probe() -> Result<(), String> {
    if !single_threaded() {
        return Err("the probe must run single-threaded".into());
    }
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: single-threaded (checked).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(last_error("fork"));
    }
    if pid == 0 {
        let code = match enter_namespaces(uid, gid) {
            Err(why) => {
                eprintln!("{why}");
                2
            }
            Ok(()) => {
                // SAFETY: single-threaded.
                let init = unsafe { libc::fork() };
                if init == 0 {
                    let code = match mounts::probe() {
                        Ok(()) => 0,
                        Err(why) => {
                            eprintln!("{why}");
                            3
                        }
                    };
                    // SAFETY: ending the forked child.
                    unsafe { libc::_exit(code) }
                }
                let mut status = 0;
                // SAFETY: waiting for our own child.
                unsafe { libc::waitpid(init, &mut status, 0) };
                if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    4
                }
            }
        };
        // SAFETY: ending the forked child.
        unsafe { libc::_exit(code) }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, 2) => Err("cannot create the user, mount, network, PID and IPC namespaces for the worker's user (are unprivileged user namespaces allowed? kernel.unprivileged_userns_clone, user.max_user_namespaces, AppArmor's restrict_unprivileged_userns)".into()),
        (true, 3) => Err("cannot build the worker's view in its namespaces (a fresh /proc, a tmpfs, a devpts of its own, a read-only copy of /usr)".into()),
        _ => Err(format!("the sandbox probe failed ({})", describe(status))),
    }
}

/// The init (PID 1 of the worker's PID namespace).
fn init_main(plan: &Plan, channel: OwnedFd) -> ! {
    let fail = |why: String| -> ! {
        send(&channel, format!("error {why}").as_bytes(), &[]);
        // SAFETY: ending the forked child.
        unsafe { libc::_exit(1) }
    };
    // The keeper is our parent in another PID namespace: getppid() is 0 here.
    // SAFETY: plain prctl.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
    let listeners = match mounts::build(plan) {
        Ok(listeners) => listeners,
        Err(why) => fail(why),
    };
    let ruleset = match landlock::ruleset(plan) {
        Ok(ruleset) => ruleset,
        Err(why) => fail(why),
    };
    let fds: Vec<RawFd> = listeners.iter().map(AsRawFd::as_raw_fd).collect();
    send(&channel, b"ready", &fds);
    drop(listeners);
    if let Err(why) = limits::drop_privileges(true) {
        fail(why);
    }
    if let Err(why) = landlock::restrict(ruleset) {
        fail(why);
    }
    // SIGCHLD is waited for, not handled (the worker's mask is reset by exec).
    // SAFETY: plain signal-mask calls on a local set.
    let mut chld: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &chld, std::ptr::null_mut());
    }
    let rlimits = plan.spec.limits;
    let mut command = std::process::Command::new(&plan.program);
    command
        .arg0(&plan.arg0)
        .args(&plan.args)
        .env_clear()
        .envs(&plan.env)
        .current_dir(&plan.cwd);
    // SAFETY: only async-signal-safe calls (setrlimit, prctl, capset) before exec.
    unsafe {
        command.pre_exec(move || {
            limits::set_rlimits(&rlimits)?;
            limits::drop_privileges(false).map_err(io::Error::other)?;
            Ok(())
        });
    }
    let worker = match command.spawn() {
        Ok(child) => child.id() as libc::pid_t,
        Err(error) => fail(format!("cannot start {}: {error}", plan.program)),
    };
    let mut watch = limits::Watch::new(&plan.spec);
    let end = loop {
        if let Some(status) = reap_all(worker) {
            break Some(status);
        }
        if let Some(what) = watch.check() {
            send(&channel, format!("limit {what}").as_bytes(), &[]);
            break None;
        }
        let timeout = libc::timespec {
            tv_sec: 0,
            tv_nsec: 500_000_000,
        };
        // SAFETY: waits for SIGCHLD (blocked above) for at most `timeout`.
        unsafe {
            libc::sigtimedwait(&chld, std::ptr::null_mut(), &timeout);
        }
    };
    // Whatever is left in the namespace ends with the worker.
    // SAFETY: kill(-1) from PID 1 signals every other process of its namespace.
    unsafe {
        libc::kill(-1, libc::SIGKILL);
    }
    let status = end.unwrap_or_else(|| {
        loop {
            if let Some(status) = reap_all(worker) {
                break status;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let line = if libc::WIFSIGNALED(status) {
        format!("signal {}", libc::WTERMSIG(status))
    } else {
        format!("exit {}", libc::WEXITSTATUS(status))
    };
    send(&channel, line.as_bytes(), &[]);
    // SAFETY: the init ends; the kernel ends the rest of the namespace.
    unsafe { libc::_exit(0) }
}

/// Reaps every child that ended; the worker's status once it did.
fn reap_all(worker: libc::pid_t) -> Option<libc::c_int> {
    let mut found = None;
    loop {
        let mut status = 0;
        // SAFETY: reaping our own children without blocking.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return found;
        }
        if pid == worker {
            found = Some(status);
        }
    }
}

fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills two descriptors.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(last_error("socketpair"));
    }
    // SAFETY: the kernel just gave us these descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

const MAX_MESSAGE: usize = 4096;

/// Sends one message with descriptors (best effort: the other side reads
/// an absent message as the tree's end).
fn send(channel: &OwnedFd, bytes: &[u8], fds: &[RawFd]) {
    let bytes = &bytes[..bytes.len().min(MAX_MESSAGE)];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let space = if fds.is_empty() {
        0
    } else {
        // SAFETY: CMSG_SPACE is a pure computation.
        unsafe { libc::CMSG_SPACE(std::mem::size_of_val(fds) as u32) as usize }
    };
    let mut control = vec![0u8; space];
    // SAFETY: msghdr is plain data; the pointers stay valid for the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer has room for one header and the descriptors.
        unsafe {
            let header = libc::CMSG_FIRSTHDR(&msg);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(header).cast::<RawFd>(),
                fds.len(),
            );
        }
    }
    // SAFETY: msg points at live buffers.
    unsafe {
        libc::sendmsg(channel.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
    }
}

/// Receives one message; `None` when the other side is gone.
fn receive(channel: &OwnedFd) -> Option<Said> {
    let mut buffer = vec![0u8; MAX_MESSAGE];
    let mut control = vec![0u8; 256];
    loop {
        let mut iov = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: buffer.len(),
        };
        // SAFETY: msghdr is plain data; the pointers stay valid for the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        // SAFETY: as above.
        let n = unsafe { libc::recvmsg(channel.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if n <= 0 {
            return None;
        }
        let mut fds = Vec::new();
        // SAFETY: walking the control messages the kernel wrote.
        unsafe {
            let mut header = libc::CMSG_FIRSTHDR(&msg);
            while !header.is_null() {
                if (*header).cmsg_level == libc::SOL_SOCKET
                    && (*header).cmsg_type == libc::SCM_RIGHTS
                {
                    let len = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    let data = libc::CMSG_DATA(header).cast::<RawFd>();
                    for i in 0..len / std::mem::size_of::<RawFd>() {
                        fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                    }
                }
                header = libc::CMSG_NXTHDR(&msg, header);
            }
        }
        let text = String::from_utf8_lossy(&buffer[..n as usize]).into_owned();
        let (word, rest) = text.split_once(' ').unwrap_or((text.as_str(), ""));
        return Some(match word {
            "ready" => Said::Ready(fds),
            "limit" => Said::Limit(rest.to_string()),
            "exit" => Said::Exit(rest.trim().parse().unwrap_or(1)),
            "signal" => Said::Signal(rest.trim().parse().unwrap_or(9)),
            _ => Said::Error(rest.to_string()),
        });
    }
}
