//! The per-run limits: rlimits the worker starts with (processes, file
//! size, open files) and what the init watches, since hitting an rlimit
//! only makes a call fail: the tree at its process limit, a process at its
//! open-file limit, or the writable directories over the disk limit stop
//! the tree, and the shim records which (`limit …` in the exit file).
//!
//! The disk is measured by walking the writable directories (blocks of
//! each inode counted once) plus files unlinked but still open, every few
//! seconds (less often when a walk is slow): a filesystem quota would need
//! root and a filesystem that has them; a tmpfs would not outlive the run.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Limits, Spec};

/// Sets the rlimits (between fork and exec: only system calls).
pub(super) fn set_rlimits(limits: &Limits) -> std::io::Result<()> {
    for (resource, value) in [
        (libc::RLIMIT_NPROC, limits.processes),
        (libc::RLIMIT_FSIZE, limits.file_size),
        (libc::RLIMIT_NOFILE, limits.open_files),
        (libc::RLIMIT_CORE, 0),
    ] {
        let limit = libc::rlimit {
            rlim_cur: value as libc::rlim_t,
            rlim_max: value as libc::rlim_t,
        };
        // SAFETY: setrlimit reads a plain struct.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

const CAP_DAC_READ_SEARCH: u32 = 2;

/// Drops every capability (the bounding set too, so no program regains
/// any), keeping only `CAP_DAC_READ_SEARCH` for the init when asked (it
/// measures the disk even in a directory the worker closed), and makes the
/// process non-dumpable and unable to gain privileges.
pub(super) fn drop_privileges(keep_read_search: bool) -> Result<(), String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // SAFETY: prctl and capset with plain integers and local structs.
    unsafe {
        for cap in 0..64 {
            if cap == CAP_DAC_READ_SEARCH as libc::c_ulong && keep_read_search {
                continue;
            }
            // EINVAL: past the last capability; EPERM: dropped already
            // by the init (the worker lacks CAP_SETPCAP).
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            {
                break;
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let header = Header {
            version: 0x2008_0522,
            pid: 0,
        };
        let kept = if keep_read_search {
            1u32 << CAP_DAC_READ_SEARCH
        } else {
            0
        };
        let data = [
            Data {
                effective: kept,
                permitted: kept,
                inheritable: 0,
            },
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            return Err(format!(
                "cannot drop capabilities: {}",
                std::io::Error::last_os_error()
            ));
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(format!(
                "cannot set no_new_privs: {}",
                std::io::Error::last_os_error()
            ));
        }
        if keep_read_search {
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
    }
    Ok(())
}

/// What the init watches while the worker runs.
pub(super) struct Watch {
    limits: Limits,
    dirs: Vec<PathBuf>,
    next_count: Instant,
    next_disk: Instant,
    disk_every: Duration,
}

impl Watch {
    pub fn new(spec: &Spec) -> Watch {
        let now = Instant::now();
        Watch {
            limits: spec.limits,
            dirs: spec.write.clone(),
            next_count: now + Duration::from_secs(1),
            next_disk: now + Duration::from_secs(2),
            disk_every: Duration::from_secs(5),
        }
    }

    /// The limit hit, in words, if one is.
    pub fn check(&mut self) -> Option<String> {
        let now = Instant::now();
        if now >= self.next_count {
            self.next_count = now + Duration::from_secs(1);
            let (tasks, most_files) = count_tasks_and_files();
            // The keeper, outside the PID namespace, counts against the
            // user namespace's limit too.
            let tasks = tasks + 1;
            if tasks >= self.limits.processes {
                return Some(format!(
                    "processes: {tasks} processes and threads reached max_processes ({})",
                    self.limits.processes
                ));
            }
            if most_files >= self.limits.open_files {
                return Some(format!(
                    "open files: a process held {most_files} open files, max_open_files is {}",
                    self.limits.open_files
                ));
            }
        }
        if now >= self.next_disk {
            let started = Instant::now();
            let used = disk_use(&self.dirs);
            // A slow walk is done less often: at most a twentieth of the time.
            let took = started.elapsed();
            self.disk_every = (took * 20).max(Duration::from_secs(5));
            self.next_disk = Instant::now() + self.disk_every;
            if used > self.limits.disk {
                return Some(format!(
                    "disk: the run's directories hold {} MiB, max_disk is {} MiB",
                    used >> 20,
                    self.limits.disk >> 20
                ));
            }
        }
        None
    }
}

/// The namespace's tasks (processes and threads, as `RLIMIT_NPROC`
/// counts them) and the most files one process has open.
fn count_tasks_and_files() -> (u64, u64) {
    let mut tasks = 0u64;
    let mut most = 0u64;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return (0, 0);
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = entry.path();
        tasks += std::fs::read_dir(dir.join("task")).map_or(1, |d| d.count() as u64);
        let files = std::fs::read_dir(dir.join("fd")).map_or(0, |d| d.count() as u64);
        most = most.max(files);
    }
    (tasks, most)
}

/// Bytes the writable directories hold (each inode once), and files
/// deleted but still open in the namespace.
fn disk_use(dirs: &[PathBuf]) -> u64 {
    let mut seen = HashSet::new();
    let mut total = 0u64;
    for dir in dirs {
        walk(dir, &mut seen, &mut total, 0);
    }
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
                continue;
            };
            for fd in fds.flatten() {
                if let Ok(meta) = std::fs::metadata(fd.path())
                    && meta.is_file()
                    && meta.nlink() == 0
                    && seen.insert((meta.dev(), meta.ino()))
                {
                    total += meta.blocks() * 512;
                }
            }
        }
    }
    total
}

fn walk(path: &Path, seen: &mut HashSet<(u64, u64)>, total: &mut u64, depth: usize) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !seen.insert((meta.dev(), meta.ino())) {
        return;
    }
    *total += meta.blocks() * 512;
    if !meta.is_dir() || depth > 256 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        walk(&entry.path(), seen, total, depth + 1);
    }
}
