//! The operating system as Eagle sees it (the runner, leases, hardening): who this host is, whether a
//! process is still the one that was started, process groups, and users.
//!
//! Linux only (`/proc`, `pidfd_open`, `prctl`), like the rest of the runner.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// This host's identity for workers and leases: the kernel's boot id and the
/// PID namespace. Two containers on one machine (separate PID namespaces)
/// and the same machine after a reboot are different hosts; a hostname,
/// which containers share and people rename, is not used.
pub fn host_id() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-boot".into());
    let pidns = std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|p| p.to_str().map(str::to_string))
        .map(|s| {
            s.trim_start_matches("pid:[")
                .trim_end_matches(']')
                .to_string()
        })
        .unwrap_or_else(|| "unknown-ns".into());
    // Eight hex digits of the boot id tell boots apart well enough, and keep
    // lease names readable in the audit log.
    format!("{}/{pidns}", &boot[..boot.len().min(8)])
}

/// A process's start time in clock ticks after boot (`/proc/<pid>/stat`
/// field 22): with the pid, it names one process for the life of the boot.
pub fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces and
    // parentheses itself: the fields after it start after the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    // Field 3 is the first after the name; field 22 is the 20th from there.
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process `pid` is alive and is the one that started at `ticks`.
/// A zombie (exited, not yet reaped) counts as gone.
pub fn is_alive(pid: i32, ticks: u64) -> bool {
    if start_ticks(pid) != Some(ticks) {
        return false;
    }
    !matches!(process_state(pid), Some('Z') | Some('X') | None)
}

fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// This process's own lease name: `<host id>#<pid>#<start ticks>`. Another
/// process on the same host can tell whether its holder is still alive.
pub fn instance_name() -> String {
    let pid = std::process::id() as i32;
    format!("{}#{pid}#{}", host_id(), start_ticks(pid).unwrap_or(0))
}

/// Whether the holder of a lease named by [`instance_name`] is known to be
/// dead: it was on this host and its process is gone. `false` when that
/// cannot be told (another host, a name of another form).
pub fn holder_is_dead(owner: &str) -> bool {
    let mut parts = owner.rsplitn(3, '#');
    let (Some(ticks), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(ticks), Ok(pid)) = (ticks.parse::<u64>(), pid.parse::<i32>()) else {
        return false;
    };
    host == host_id() && !is_alive(pid, ticks)
}

/// Sends `signal` to every process of a group. A group that is gone already is fine.
pub fn signal_group(pgid: i32, signal: i32) -> io::Result<()> {
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    let rc = unsafe { libc::kill(-pgid, signal) };
    if rc == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(error)
    }
}

/// The process groups of the processes whose environment holds `key=value`
/// and whose working directory is under `dir` (a worker started but never
/// recorded, found by its run's id in its run's own directory: another
/// deployment's run with the same id is someone else's). Processes this
/// one may not read are skipped.
pub fn groups_with_env(key: &str, value: &str, dir: &Path) -> Vec<i32> {
    let wanted = format!("{key}={value}");
    let mut groups = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return groups;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes()) {
            continue;
        }
        let inside =
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir));
        if !inside {
            continue;
        }
        let pgid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let after = stat[stat.rfind(')')? + 1..].to_string();
                after.split_whitespace().nth(2)?.parse::<i32>().ok()
            });
        if let Some(pgid) = pgid
            && pgid > 1
            && !groups.contains(&pgid)
        {
            groups.push(pgid);
        }
    }
    groups
}

/// A file descriptor that becomes readable when the process exits
/// (`pidfd_open(2)`). It refers to this very process even if its pid is reused.
pub fn pidfd(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: a plain system call returning a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Waits until the process behind `fd` exits.
pub async fn wait_exit(fd: OwnedFd) -> io::Result<()> {
    // SAFETY: the OwnedFd is moved into the AsyncFd and owned by it until it
    // drops, so the descriptor stays open and the same.
    let fd = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    }
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    let _ready = fd.readable().await?;
    Ok(())
}

/// Keeps other processes of this user from reading this one's memory or
/// `/proc/<pid>/environ` (and from attaching a debugger): what Eagle holds
/// (keys, the database) stays Eagle's even from a process of the same user.
pub fn make_non_dumpable() -> io::Result<()> {
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) takes plain integers.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes files Eagle creates private to its user from now on.
pub fn private_umask() {
    // SAFETY: umask(2) cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Makes a file of Eagle's private to its user if it is not: one that
/// exists, is a regular file (not followed through a symlink) owned by
/// Eagle's user, and that others may read or write loses those bits.
/// Returns the mode it had when it was changed.
pub fn make_private(path: &Path) -> io::Result<Option<u32>> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mode = meta.permissions().mode() & 0o7777;
    if !meta.is_file() || meta.uid() != euid() || mode & 0o077 == 0 {
        return Ok(None);
    }
    chmod(path, mode & 0o700)?;
    Ok(Some(mode))
}

/// A Unix user workers run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

/// Looks a user up in the password database.
pub fn lookup_user(name: &str) -> io::Result<Option<UnixUser>> {
    let c_name = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a user name"))?;
    let mut buffer = vec![0u8; 16 * 1024];
    // SAFETY: passwd is plain old data; getpwnam_r fills it, pointing into `buffer`.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buffer` outlives the reads below.
    let rc = unsafe {
        libc::getpwnam_r(
            c_name.as_ptr(),
            &mut entry,
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            &mut found,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    if found.is_null() {
        return Ok(None);
    }
    // SAFETY: pw_dir points into `buffer`, NUL-terminated, per getpwnam_r.
    let home = unsafe { std::ffi::CStr::from_ptr(entry.pw_dir) }
        .to_string_lossy()
        .into_owned();
    Ok(Some(UnixUser {
        name: name.to_string(),
        uid: entry.pw_uid,
        gid: entry.pw_gid,
        home: PathBuf::from(home),
    }))
}

/// The effective user id of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() }
}

/// Hands a path to a user (`chown`), leaving the group as the user's own.
pub fn chown(path: &Path, user: &UnixUser) -> io::Result<()> {
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
}

/// Sets a path's permission bits.
pub fn chmod(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Sets `command` up to start in a session (and process group) of its own,
/// as `user` when given, with `exit_fd` as its descriptor 3: where the
/// worker shim records how its child ended. The runner's workers and the
/// analyzer's command start so.
pub fn own_session(
    command: &mut tokio::process::Command,
    user: Option<&UnixUser>,
    exit_fd: std::os::fd::RawFd,
) {
    if let Some(user) = user {
        command.uid(user.uid).gid(user.gid);
    }
    // SAFETY: only async-signal-safe calls (setsid, dup2, fcntl) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if exit_fd == 3 {
                if libc::fcntl(3, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(exit_fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Keeps glibc's allocator to two arenas. By default it makes up to eight
/// per core, one for each thread that allocates at once (the runtime's
/// workers, SQLite's connection threads, blocking threads); each keeps
/// memory it freed, which a long-running bot pays for in resident memory.
/// Called before any thread starts; elsewhere than glibc it does nothing.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it is called before
    // any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_named() {
        let pid = std::process::id() as i32;
        let ticks = start_ticks(pid).expect("own start time");
        assert!(is_alive(pid, ticks));
        assert!(
            !is_alive(pid, ticks + 1),
            "another start time is another process"
        );
        let me = instance_name();
        assert!(me.starts_with(&host_id()));
        assert!(!holder_is_dead(&me));
        let gone = format!("{}#{}#1", host_id(), i32::MAX - 1);
        assert!(holder_is_dead(&gone));
        assert!(!holder_is_dead("other-host/1#12#34"));
        assert!(!holder_is_dead("garbage"));
    }

    #[test]
    fn root_exists_and_nobody_does_not() {
        let root = lookup_user("root").unwrap().expect("root");
        assert_eq!(root.uid, 0);
        assert_eq!(lookup_user("no-such-user-eagle-test").unwrap(), None);
    }

    #[test]
    fn signalling_a_gone_group_is_fine_and_group_one_is_refused() {
        assert!(signal_group(i32::MAX - 1, 0).is_ok());
        assert!(signal_group(1, libc::SIGTERM).is_err());
        assert!(signal_group(0, libc::SIGTERM).is_err());
    }
}
