//! The worker's view of the files, built by the init in its own mount
//! namespace: a fresh `/proc` (only the tree's processes), empty tmpfs
//! over the places sockets live (`/run`, `/tmp`, …) and over Eagle's own
//! directories, the run's own directories bound back where they were, its
//! checkout's `.git` pinned (a mount point cannot be renamed away) with
//! `config` and `hooks` read-only, `lo` up, and the bridges' listeners.
//!
//! Landlock (`landlock.rs`) decides what may be read or written; this file
//! hides what Landlock cannot: connecting to a pathname Unix socket is not
//! a Landlock access, so the only sockets a worker can name are the ones
//! bound here.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::namespaces::Plan;
use super::{COVERED, INSIDE_SOCKET, PROXY_ADDR, under};

const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

fn cstr(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("a NUL in the path {}", path.display()))
}

fn os_error(what: String) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn mount(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    let source = source.map(|s| CString::new(s).unwrap_or_default());
    let fstype = fstype.map(|s| CString::new(s).unwrap_or_default());
    let data = data.map(|s| CString::new(s).unwrap_or_default());
    let target_c = cstr(target)?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string or null.
    let rc = unsafe {
        libc::mount(
            ptr(&source),
            target_c.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(os_error(format!("cannot mount on {}", target.display())))
    }
}

/// For the probe: what `build` does first, in a throwaway namespace.
pub(super) fn probe() -> Result<(), String> {
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    fresh_proc()?;
    tmpfs(Path::new("/tmp"), "1m")
}

fn fresh_proc() -> Result<(), String> {
    mount(
        Some("proc"),
        Path::new("/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
}

fn tmpfs(path: &Path, size: &str) -> Result<(), String> {
    mount(
        Some("tmpfs"),
        path,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&format!("mode=0755,size={size}")),
    )
}

/// A detached copy of the mounts at `path` (`open_tree`), to be put back
/// after what covers it is mounted.
fn detach_copy(path: &Path) -> Result<OwnedFd, String> {
    let c = cstr(path)?;
    // SAFETY: open_tree with a NUL-terminated path; returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(os_error(format!(
            "cannot copy the mount of {}",
            path.display()
        )));
    }
    // SAFETY: the kernel just gave us this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn attach(copy: &OwnedFd, target: &Path) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let c = cstr(target)?;
    let empty = CString::default();
    // SAFETY: move_mount from a descriptor to a NUL-terminated path.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            copy.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(os_error(format!("cannot put {} back", target.display())))
    }
}

/// Binds `path` onto itself, read-only when asked, keeping the flags a
/// user namespace may not clear (nosuid, nodev, noexec of the original).
fn bind_self(path: &Path, read_only: bool) -> Result<(), String> {
    let as_str = path.display().to_string();
    mount(
        Some(&as_str),
        path,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )?;
    if !read_only {
        return Ok(());
    }
    let c = cstr(path)?;
    // SAFETY: statvfs fills a plain struct.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statvfs(c.as_ptr(), &mut vfs) } != 0 {
        return Err(os_error(format!("statvfs {}", path.display())));
    }
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY;
    for (st, ms) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if vfs.f_flag & st != 0 {
            flags |= ms;
        }
    }
    mount(None, path, None, flags, None)
}

/// Builds the worker's view and returns the bridges' listeners (the
/// request socket's, then the proxy's, those the spec names).
pub(super) fn build(plan: &Plan) -> Result<Vec<OwnedFd>, String> {
    let spec = &plan.spec;
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let hidden = |p: &Path| spec.hide.iter().any(|h| under(p, h));
    // What is covered: the socket places, then Eagle's own directories
    // that are not inside one already.
    let mut covers: Vec<PathBuf> = Vec::new();
    for dir in COVERED {
        let Ok(meta) = std::fs::symlink_metadata(dir) else {
            continue;
        };
        if meta.is_dir() && !covers.iter().any(|c| under(Path::new(dir), c)) {
            covers.push(PathBuf::from(dir));
        }
    }
    let mut hidden_files = Vec::new();
    for path in &spec.hide {
        if covers.iter().any(|c| under(path, c)) {
            continue;
        }
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                covers.retain(|c| !under(c, path));
                covers.push(path.clone());
            }
            Ok(_) => hidden_files.push(path.clone()),
            Err(_) => {}
        }
    }
    // What comes back: the run's own directories and the worker's PATH,
    // where they lie under a cover (and not under a hidden directory).
    let mut keep: Vec<PathBuf> = Vec::new();
    let wanted = spec
        .write
        .iter()
        .chain(&spec.read)
        .chain(plan.read_extra.iter().filter(|p| !hidden(p)));
    for path in wanted {
        if covers.iter().any(|c| under(path, c))
            && !keep.iter().any(|k| under(path, k))
            && path.exists()
        {
            keep.retain(|k| !under(k, path));
            keep.push(path.clone());
        }
    }
    let copies: Vec<(PathBuf, OwnedFd)> = keep
        .iter()
        .map(|path| detach_copy(path).map(|fd| (path.clone(), fd)))
        .collect::<Result<_, _>>()?;
    fresh_proc()?;
    for cover in &covers {
        let size = if cover == Path::new("/dev/shm") {
            "64m"
        } else {
            "4m"
        };
        tmpfs(cover, size)?;
    }
    for file in &hidden_files {
        let as_str = "/dev/null";
        mount(Some(as_str), file, None, libc::MS_BIND, None)?;
    }
    for (path, copy) in &copies {
        let is_dir = std::fs::metadata(path).map_or(true, |m| m.is_dir());
        make_mount_point(path, is_dir)?;
        attach(copy, path)?;
    }
    for work in &spec.write {
        pin_git(work)?;
    }
    loopback_up()?;
    listeners(plan)
}

/// Creates what `attach` mounts on, on the tmpfs that covers it.
fn make_mount_point(path: &Path, is_dir: bool) -> Result<(), String> {
    let what = |e: std::io::Error| format!("cannot make {}: {e}", path.display());
    if is_dir {
        std::fs::create_dir_all(path).map_err(what)
    } else {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(what)?;
        }
        std::fs::File::create(path).map(drop).map_err(what)
    }
}

/// The checkout's `.git`: a mount point (so it cannot be renamed away and
/// replaced), its `config` and `hooks` read-only.
fn pin_git(work: &Path) -> Result<(), String> {
    let git = work.join(".git");
    let Ok(meta) = std::fs::symlink_metadata(&git) else {
        return Ok(());
    };
    if meta.file_type().is_symlink() {
        return bind_self(&git, true);
    }
    if !meta.is_dir() {
        // A gitlink file (`gitdir: …`): the worker must not point it elsewhere.
        return bind_self(&git, true);
    }
    bind_self(&git, false)?;
    for name in ["config", "hooks", "commondir"] {
        let path = git.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            bind_self(&path, true)?;
        }
    }
    Ok(())
}

/// Brings the new network namespace's loopback interface up.
fn loopback_up() -> Result<(), String> {
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    // SAFETY: a datagram socket for interface ioctls.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(os_error("cannot open a socket to bring lo up".into()));
    }
    // SAFETY: the kernel gave us this descriptor.
    let _fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: 0,
        _pad: [0; 22],
    };
    req.name[..2].copy_from_slice(b"lo");
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write an ifreq.
    unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(os_error("cannot read lo's flags".into()));
        }
        req.flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(os_error("cannot bring lo up".into()));
        }
    }
    Ok(())
}

/// The listeners the shim's bridges accept on, made inside.
fn listeners(plan: &Plan) -> Result<Vec<OwnedFd>, String> {
    let mut fds = Vec::new();
    if plan.spec.request_socket.is_some() {
        let path = Path::new(INSIDE_SOCKET);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        }
        let listener = std::os::unix::net::UnixListener::bind(path)
            .map_err(|e| format!("cannot listen on {INSIDE_SOCKET}: {e}"))?;
        fds.push(OwnedFd::from(listener));
    }
    if plan.spec.egress_socket.is_some() {
        let listener = std::net::TcpListener::bind(PROXY_ADDR)
            .map_err(|e| format!("cannot listen on {PROXY_ADDR}: {e}"))?;
        fds.push(OwnedFd::from(listener));
    }
    Ok(fds)
}
