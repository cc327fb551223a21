//! The worker's view of the files, built by the init in its own mount
//! namespace from what is allowed, never from what is denied: a fresh root
//! (a tmpfs) holding the system's directories read-only (`/usr`, `/etc`,
//! the merged-`/usr` links), the worker's `PATH` and its program's files
//! read-only wherever they live, the paths the profile lists
//! (`[runner.sandbox] read_only`), the run's own files of Eagle read-only,
//! its working directory and HOME writable, a fresh `/proc`, a `/dev` of a
//! few device nodes with a `devpts` of its own, and empty `/tmp`, `/run`
//! and `/dev/shm`. Nothing else exists there: no `/home`, `/root`,
//! `/var/lib`, `/srv`, `/opt` or `/mnt`, so a secret, a socket or another
//! run anywhere else is absent without being named. Secrets inside what is
//! shown (`/etc/shadow`, Eagle's own files) are covered. The checkout's
//! `.git` is pinned (a mount point cannot be renamed away) with the files
//! that make git run programs read-only; `lo` is brought up, and the
//! bridges' listeners are made.
//!
//! Landlock (`landlock.rs`) is the second layer, with the same rules.
//! Connecting to a pathname Unix socket is not a Landlock access: the only
//! sockets a worker can name are the ones in this view.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::namespaces::Plan;
use super::{INSIDE_SOCKET, PROXY_ADDR, SYSTEM_SECRETS, under};

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

/// For the probe: what `build` needs of the kernel, in a throwaway
/// namespace: a private `/`, a fresh `/proc`, a tmpfs, a `devpts` of its
/// own, and a read-only copy of a mount.
pub(super) fn probe() -> Result<(), String> {
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    fresh_proc()?;
    let copy = detach_copy(Path::new("/usr"))?;
    read_only(&copy, Path::new("/usr"))?;
    tmpfs(Path::new("/tmp"), "1m", "0755")?;
    let pts = Path::new("/tmp/pts");
    std::fs::create_dir(pts).map_err(|e| format!("cannot make {}: {e}", pts.display()))?;
    devpts(pts)?;
    let usr = Path::new("/tmp/usr");
    std::fs::create_dir(usr).map_err(|e| format!("cannot make {}: {e}", usr.display()))?;
    attach(&copy, usr)
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

fn tmpfs(path: &Path, size: &str, mode: &str) -> Result<(), String> {
    mount(
        Some("tmpfs"),
        path,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&format!("mode={mode},size={size}")),
    )
}

/// A `devpts` instance of the sandbox's own: its terminals are its own,
/// the host's are not there.
fn devpts(path: &Path) -> Result<(), String> {
    mount(
        Some("devpts"),
        path,
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
}

/// Makes a detached copy of mounts (`detach_copy`) read-only, every mount
/// in it (`mount_setattr`).
fn read_only(copy: &OwnedFd, path: &Path) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let empty = CString::default();
    // SAFETY: mount_setattr on a descriptor the kernel gave us, with an
    // empty path and a plain struct of the size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            copy.as_raw_fd(),
            empty.as_ptr(),
            (libc::AT_EMPTY_PATH as libc::c_uint) | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(os_error(format!(
            "cannot make the copy of {} read-only",
            path.display()
        )))
    }
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

/// One path of the host shown in the worker's view, at the same place.
struct Shown {
    path: PathBuf,
    writable: bool,
    is_dir: bool,
}

/// What the view shows of the host: the system's directories, the
/// worker's `PATH` and program, what the spec lets it read and write, and
/// the few files of `/sys` that say how many processors there are; each
/// once (a path inside another shown the same way is not shown again),
/// parents first. The links of a merged `/usr` come back as links.
fn shown(plan: &Plan) -> (Vec<Shown>, Vec<(PathBuf, PathBuf)>) {
    let spec = &plan.spec;
    let hidden = |p: &Path| spec.hide.iter().any(|h| under(p, h));
    let mut links = Vec::new();
    let mut wanted: Vec<Shown> = Vec::new();
    for top in SYSTEM {
        let path = Path::new(top);
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    links.push((path.to_path_buf(), target));
                }
            }
            Ok(meta) if meta.is_dir() => wanted.push(Shown {
                path: path.to_path_buf(),
                writable: false,
                is_dir: true,
            }),
            _ => {}
        }
    }
    let read = plan
        .read_extra
        .iter()
        .filter(|p| !hidden(p))
        // The run's own: shown even inside a hidden directory.
        .chain(&spec.read)
        .chain(
            SYS_SHOWN
                .iter()
                .map(Path::new)
                .map(Path::to_path_buf)
                .collect::<Vec<_>>()
                .iter(),
        )
        .map(|p| Shown {
            path: p.clone(),
            writable: false,
            is_dir: true,
        })
        .collect::<Vec<_>>();
    wanted.extend(read);
    wanted.extend(spec.write.iter().map(|p| Shown {
        path: p.clone(),
        writable: true,
        is_dir: true,
    }));
    let mut out: Vec<Shown> = Vec::new();
    for mut want in wanted {
        let Ok(meta) = std::fs::metadata(&want.path) else {
            continue;
        };
        want.is_dir = meta.is_dir();
        // Inside one shown the same way already: nothing to add.
        if out
            .iter()
            .any(|o| o.writable == want.writable && under(&want.path, &o.path))
        {
            continue;
        }
        out.retain(|o| !(o.writable == want.writable && under(&o.path, &want.path)));
        out.push(want);
    }
    out.sort_by_key(|s| s.path.components().count());
    (out, links)
}

/// The top-level directories of the system every worker reads (those that
/// are links, as in a merged `/usr`, are recreated as links).
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/nix", "/snap",
];

/// What of `/sys` is shown: how many processors, the cgroup's limits.
const SYS_SHOWN: &[&str] = &["/sys/devices/system/cpu", "/sys/fs/cgroup"];

/// The device nodes of the host a worker gets (bound from the host's).
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Where the new root is assembled before it becomes `/` (covered by a
/// tmpfs of the namespace's own first; the host's is untouched).
const STAGING: &str = "/tmp";

/// Builds the worker's view, makes it the root, and returns the bridges'
/// listeners (the request socket's, then the proxy's, those the spec names).
pub(super) fn build(plan: &Plan) -> Result<Vec<OwnedFd>, String> {
    let spec = &plan.spec;
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let (shown, links) = shown(plan);
    // Copies first: the staging tmpfs covers /tmp, where some may lie.
    let mut copies: Vec<(&Shown, OwnedFd)> = Vec::new();
    for item in &shown {
        let copy = detach_copy(&item.path)?;
        if !item.writable {
            read_only(&copy, &item.path)?;
        }
        copies.push((item, copy));
    }
    let root = Path::new(STAGING);
    tmpfs(root, "8m", "0755")?;
    let inside = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    let dir = |p: &Path| {
        std::fs::create_dir_all(p).map_err(|e| format!("cannot make {}: {e}", p.display()))
    };
    // A fresh /proc: only the tree's processes.
    dir(&inside(Path::new("/proc")))?;
    mount(
        Some("proc"),
        &inside(Path::new("/proc")),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    // /dev: a few device nodes, terminals of its own, its own shared memory.
    let dev = inside(Path::new("/dev"));
    dir(&dev)?;
    tmpfs(&dev, "64k", "0755")?;
    for name in DEVICES {
        let host = Path::new("/dev").join(name);
        if std::fs::metadata(&host).is_err() {
            continue;
        }
        let at = dev.join(name);
        make_mount_point(&at, false)?;
        mount(
            Some(&host.display().to_string()),
            &at,
            None,
            libc::MS_BIND,
            None,
        )?;
    }
    dir(&dev.join("pts"))?;
    devpts(&dev.join("pts"))?;
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(link))
            .map_err(|e| format!("cannot make /dev/{link}: {e}"))?;
    }
    for (path, size, mode) in [
        ("/dev/shm", "64m", "1777"),
        ("/tmp", "64m", "1777"),
        ("/var/tmp", "64m", "1777"),
        ("/run", "4m", "0755"),
    ] {
        let at = inside(Path::new(path));
        dir(&at)?;
        tmpfs(&at, size, mode)?;
    }
    // Then what is shown of the host (some of it may lie in /tmp: on the
    // view's /tmp, not under it).
    for (item, copy) in &copies {
        let at = inside(&item.path);
        make_mount_point(&at, item.is_dir)?;
        attach(copy, &at)?;
    }
    for (path, target) in &links {
        let at = inside(path);
        if std::fs::symlink_metadata(&at).is_err() {
            std::os::unix::fs::symlink(target, &at)
                .map_err(|e| format!("cannot make the link {}: {e}", path.display()))?;
        }
    }
    cover_secrets(spec, &shown, &inside)?;
    become_root(root)?;
    for work in &spec.write {
        pin_git(work)?;
    }
    loopback_up()?;
    listeners(plan)
}

/// Covers what is secret inside what the view shows: the system's secrets
/// and Eagle's own files (an empty, unreadable tmpfs over a directory,
/// `/dev/null` over a file). A hidden directory that holds a path shown on
/// its own (the run's, inside Eagle's data directory) is not shown itself,
/// only that path.
fn cover_secrets(
    spec: &super::Spec,
    shown: &[Shown],
    inside: &dyn Fn(&Path) -> PathBuf,
) -> Result<(), String> {
    let secrets = SYSTEM_SECRETS
        .iter()
        .map(PathBuf::from)
        .chain(spec.hide.iter().cloned());
    for secret in secrets {
        let in_view = shown.iter().any(|s| under(&secret, &s.path));
        let holds_shown = shown
            .iter()
            .any(|s| under(&s.path, &secret) && s.path != secret);
        if !in_view || holds_shown {
            continue;
        }
        let at = inside(&secret);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => tmpfs(&at, "4k", "0000")?,
            Ok(meta) if meta.is_file() => mount(Some("/dev/null"), &at, None, libc::MS_BIND, None)?,
            _ => {}
        }
    }
    Ok(())
}

/// Makes `root` the root of the mount namespace (`pivot_root`), the old
/// root detached and gone from the view.
fn become_root(root: &Path) -> Result<(), String> {
    std::env::set_current_dir(root)
        .map_err(|e| format!("cannot enter the new root {}: {e}", root.display()))?;
    let dot = CString::new(".").unwrap_or_default();
    // SAFETY: pivot_root(".", ".") stacks the old root under the new one;
    // both are NUL-terminated strings.
    if unsafe { libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) } != 0 {
        return Err(os_error(
            "cannot make the worker's view its root (pivot_root)".into(),
        ));
    }
    // SAFETY: detaching the old root, now mounted at ".".
    if unsafe { libc::umount2(dot.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(os_error(
            "cannot detach the host's root from the view".into(),
        ));
    }
    std::env::set_current_dir("/").map_err(|e| format!("cannot enter the view's /: {e}"))
}

/// Creates what `attach` mounts on, in the new root.
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

/// What in a checkout's `.git` makes git run programs, or read them from
/// elsewhere: read-only in the view (`hooks` and `info` made, empty, when
/// the clone has none, so there is nothing to plant them in).
const GIT_PINNED: &[&str] = &[
    "config",
    "config.worktree",
    "hooks",
    "info",
    "commondir",
    "gitdir",
    "objects/info/alternates",
];

/// The checkout's `.git`: a mount point (so it cannot be renamed away and
/// replaced), with [`GIT_PINNED`] read-only.
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
    for name in GIT_PINNED {
        let path = git.join(name);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(_) if matches!(*name, "hooks" | "info") => {
                std::fs::create_dir(&path)
                    .map_err(|e| format!("cannot make {}: {e}", path.display()))?;
                std::fs::symlink_metadata(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?
            }
            Err(_) => continue,
        };
        if meta.file_type().is_symlink() {
            // Planted by an earlier attempt: a link must not be followed to
            // pin (or expose) what it names.
            return Err(format!(
                "{} is a symbolic link: the checkout's git files must be its own",
                path.display()
            ));
        }
        bind_self(&path, true)?;
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
