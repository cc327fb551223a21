//! What the worker shim writes before the worker starts, as the worker's
//! own user: its home's `.claude` and `tmp`, and in its working directory
//! the run's rules as `AGENTS.md` with a `CLAUDE.md` that imports them
//! (unless the checkout has its own), kept out of commits through
//! `.git/info/exclude`.
//!
//! The shim runs outside the sandbox, in a checkout an earlier attempt of
//! the worker wrote to: a link it left there (`AGENTS.md` → a file of
//! another run, `.git/info` → a directory elsewhere) would make the shim
//! write where the worker itself cannot. So nothing here resolves a path:
//! each directory on the way is opened relative to the one before it with
//! `O_DIRECTORY | O_NOFOLLOW`, each file with `O_NOFOLLOW`, and a file is
//! written only if it is a plain file with no other name (a hard link would
//! be another run's file). What is refused is not written, and the shim says
//! why on its standard error; the worker starts all the same.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The lines `.git/info/exclude` gets, one per file written.
const EXCLUDED: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// Prepares `work` (the working directory) and `home`. Returns what was
/// refused or failed, one line each, for the shim to say.
pub(super) fn prepare(home: Option<&Path>, work: &Path, rules: Option<&Path>) -> Vec<String> {
    let mut said = Vec::new();
    if let Some(home) = home {
        match Dir::open(home) {
            Ok(home) => {
                for sub in [".claude", "tmp"] {
                    if let Err(error) = home.sub(sub, true) {
                        said.push(format!("the home's {sub} was not made: {error}"));
                    }
                }
            }
            Err(error) => said.push(format!("the home was not prepared: {error}")),
        }
    }
    let Some(rules) = rules else {
        return said;
    };
    let rules = match std::fs::read_to_string(rules) {
        Ok(rules) => rules,
        Err(error) => {
            said.push(format!("the run's rules cannot be read: {error}"));
            return said;
        }
    };
    let work = match Dir::open(work) {
        Ok(work) => work,
        Err(error) => {
            said.push(format!("the working directory cannot be opened: {error}"));
            return said;
        }
    };
    let mut written = Vec::new();
    for (name, text) in [(EXCLUDED[0], rules.as_str()), (EXCLUDED[1], "@AGENTS.md\n")] {
        // The checkout's own file stays; Eagle's from an earlier attempt is
        // written again.
        let ours = |t: &str| t == text || t.starts_with("# Rules of run");
        let written_here = match work.read(name) {
            Ok(Some(current)) if !ours(&current) => continue,
            Ok(_) => work.write(name, text),
            Err(error) => Err(error),
        };
        match written_here {
            Ok(()) => written.push(name),
            Err(error) => said.push(format!("{name} was not written: {error}")),
        }
    }
    if !written.is_empty()
        && let Err(error) = exclude(&work, &written)
    {
        said.push(format!(".git/info/exclude was not written: {error}"));
    }
    said
}

/// Adds `/<name>` for each of `names` to the checkout's
/// `.git/info/exclude`, unless it is there. A checkout without a `.git`
/// directory (none, or a worktree's `.git` file) has nothing to write.
fn exclude(work: &Dir, names: &[&str]) -> std::io::Result<()> {
    let git = match work.sub(".git", false) {
        Ok(git) => git,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) if work.kind(".git") == Kind::File => {
            tracing::debug!(%error, "the checkout's .git is a file: nothing to exclude");
            return Ok(());
        }
        Err(error) => return Err(error),
    };
    let info = git.sub("info", true)?;
    let current = info.read("exclude")?.unwrap_or_default();
    let mut text = current.clone();
    for name in names {
        let line = format!("/{name}");
        if !current.lines().any(|l| l.trim() == line) {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&line);
            text.push('\n');
        }
    }
    if text != current {
        info.write("exclude", &text)?;
    }
    Ok(())
}

/// What a name in a directory is, without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Missing,
    Link,
    Dir,
    File,
    Other,
}

/// An open directory: every name below it is opened relative to it.
struct Dir(OwnedFd);

impl Dir {
    /// `path` itself (Eagle's own: the runner made the working directory
    /// and the home), its last part never a link.
    fn open(path: &Path) -> std::io::Result<Dir> {
        let c = cstring(path.as_os_str().as_bytes())?;
        // SAFETY: a NUL-terminated path; the descriptor is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(Dir(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The directory `name` in it, made first when `create`; refused when
    /// `name` is a link or not a directory.
    fn sub(&self, name: &str, create: bool) -> std::io::Result<Dir> {
        let c = cstring(name.as_bytes())?;
        if create {
            // SAFETY: mkdirat on our directory and a NUL-terminated name;
            // it never follows a link in the last part.
            let rc = unsafe { libc::mkdirat(self.0.as_raw_fd(), c.as_ptr(), 0o777) };
            let error = std::io::Error::last_os_error();
            if rc != 0 && error.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(error);
            }
        }
        // SAFETY: as above; the descriptor is owned below.
        let fd = unsafe {
            libc::openat(
                self.0.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(self.refusal(name, "a directory", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(Dir(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The text of the file `name`, `None` if there is none.
    fn read(&self, name: &str) -> std::io::Result<Option<String>> {
        let mut file = match self.file(name, libc::O_RDONLY) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        Ok(Some(text))
    }

    /// Writes `text` as the whole of the file `name`, made if missing.
    fn write(&self, name: &str, text: &str) -> std::io::Result<()> {
        let mut file = self.file(name, libc::O_WRONLY | libc::O_CREAT)?;
        file.set_len(0)?;
        file.write_all(text.as_bytes())
    }

    /// The plain file `name`, opened with `flags`, never through a link;
    /// refused unless it is a plain file with no other name.
    fn file(&self, name: &str, flags: libc::c_int) -> std::io::Result<std::fs::File> {
        use std::os::unix::fs::MetadataExt;
        let c = cstring(name.as_bytes())?;
        // SAFETY: openat on our directory and a NUL-terminated name; the
        // descriptor is owned below. O_NONBLOCK: a FIFO left there does
        // not hold the shim up (it is refused below).
        let fd = unsafe {
            libc::openat(
                self.0.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
                0o666 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(self.refusal(name, "a file", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just opened and nothing else owns it.
        let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(std::io::Error::other(format!(
                "{name} is not a plain file: not followed"
            )));
        }
        if meta.nlink() > 1 {
            return Err(std::io::Error::other(format!(
                "{name} has other names (a hard link): not written"
            )));
        }
        Ok(file)
    }

    /// What `name` is, looked at without following it.
    fn kind(&self, name: &str) -> Kind {
        let Ok(c) = cstring(name.as_bytes()) else {
            return Kind::Other;
        };
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: fstatat on our directory, a NUL-terminated name and a
        // buffer of the right size; it reads `stat` only when it succeeded.
        let rc = unsafe {
            libc::fstatat(
                self.0.as_raw_fd(),
                c.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            return Kind::Missing;
        }
        // SAFETY: fstatat succeeded, so it filled `stat`.
        let mode = unsafe { stat.assume_init() }.st_mode & libc::S_IFMT;
        match mode {
            libc::S_IFLNK => Kind::Link,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFREG => Kind::File,
            _ => Kind::Other,
        }
    }

    /// Why `name` could not be opened as `wanted` (`error`), naming a link
    /// as one. Where a link leads is never read.
    fn refusal(&self, name: &str, wanted: &str, error: std::io::Error) -> std::io::Error {
        if error.kind() == std::io::ErrorKind::NotFound {
            return error;
        }
        match self.kind(name) {
            Kind::Link => std::io::Error::other(format!("{name} is a symbolic link: not followed")),
            Kind::Missing => error,
            _ => std::io::Error::new(
                error.kind(),
                format!("{name} cannot be opened as {wanted}: {error}"),
            ),
        }
    }
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| std::io::Error::other("a NUL in a path"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const RULES: &str = "# Rules of run 7\n\nNever merge.\n";

    /// A run's directory with a checkout (`work`, with `.git`), its home,
    /// its rules, and a place outside the run.
    fn run_dir() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("work/.git")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        let rules = dir.path().join("rules.md");
        std::fs::write(&rules, RULES).unwrap();
        (dir, rules)
    }

    fn prepare_in(dir: &Path, rules: &Path) -> Vec<String> {
        prepare(Some(&dir.join("home")), &dir.join("work"), Some(rules))
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_rules_are_written_and_kept_out_of_commits() {
        let (dir, rules) = run_dir();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join(".git/info")).unwrap();
        std::fs::write(work.join(".git/info/exclude"), "# git's own\n/target").unwrap();
        assert_eq!(prepare_in(dir.path(), &rules), Vec::<String>::new());
        assert_eq!(
            std::fs::read_to_string(work.join("AGENTS.md")).unwrap(),
            RULES
        );
        assert_eq!(
            std::fs::read_to_string(work.join("CLAUDE.md")).unwrap(),
            "@AGENTS.md\n"
        );
        let exclude = "# git's own\n/target\n/AGENTS.md\n/CLAUDE.md\n";
        assert_eq!(
            std::fs::read_to_string(work.join(".git/info/exclude")).unwrap(),
            exclude
        );
        assert!(dir.path().join("home/.claude").is_dir());
        assert!(dir.path().join("home/tmp").is_dir());
        // Again (a later attempt): the same, nothing added twice; a
        // checkout's own CLAUDE.md stays.
        std::fs::write(work.join("CLAUDE.md"), "the project's own\n").unwrap();
        assert_eq!(prepare_in(dir.path(), &rules), Vec::<String>::new());
        assert_eq!(
            std::fs::read_to_string(work.join("CLAUDE.md")).unwrap(),
            "the project's own\n"
        );
        assert_eq!(
            std::fs::read_to_string(work.join(".git/info/exclude")).unwrap(),
            exclude
        );
    }

    #[test]
    fn links_left_in_the_checkout_are_not_followed() {
        let (dir, rules) = run_dir();
        let (work, outside) = (dir.path().join("work"), dir.path().join("outside"));
        // AGENTS.md → a file elsewhere (existing), CLAUDE.md → a file
        // elsewhere (to be made), .git/info → a directory elsewhere.
        std::fs::write(outside.join("theirs.md"), "# Rules of run 9\n").unwrap();
        symlink(outside.join("theirs.md"), work.join("AGENTS.md")).unwrap();
        symlink(outside.join("new.md"), work.join("CLAUDE.md")).unwrap();
        symlink(&outside, work.join(".git/info")).unwrap();
        let said = prepare_in(dir.path(), &rules);
        assert_eq!(
            said,
            [
                "AGENTS.md was not written: AGENTS.md is a symbolic link: not followed",
                "CLAUDE.md was not written: CLAUDE.md is a symbolic link: not followed",
            ],
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("theirs.md")).unwrap(),
            "# Rules of run 9\n"
        );
        assert_eq!(listing(&outside), ["theirs.md"]);
        // With the files plain, .git/info is the link: refused too.
        for name in ["AGENTS.md", "CLAUDE.md"] {
            std::fs::remove_file(work.join(name)).unwrap();
        }
        let said = prepare_in(dir.path(), &rules);
        assert_eq!(
            said,
            [".git/info/exclude was not written: info is a symbolic link: not followed"]
        );
        assert_eq!(listing(&outside), ["theirs.md"]);
        // A .git that is a link, a home's .claude that is one: the same.
        std::fs::remove_file(work.join(".git/info")).unwrap();
        std::fs::remove_dir(work.join(".git")).unwrap();
        symlink(&outside, work.join(".git")).unwrap();
        std::fs::remove_dir(dir.path().join("home/.claude")).unwrap();
        symlink(outside.join("claude"), dir.path().join("home/.claude")).unwrap();
        let said = prepare_in(dir.path(), &rules);
        assert_eq!(
            said,
            [
                "the home's .claude was not made: .claude is a symbolic link: not followed",
                ".git/info/exclude was not written: .git is a symbolic link: not followed",
            ]
        );
        assert_eq!(listing(&outside), ["theirs.md"]);
    }

    #[test]
    fn a_hard_link_or_a_fifo_is_not_written() {
        let (dir, rules) = run_dir();
        let (work, outside) = (dir.path().join("work"), dir.path().join("outside"));
        std::fs::write(outside.join("theirs.md"), "# Rules of run 9\n").unwrap();
        std::fs::hard_link(outside.join("theirs.md"), work.join("AGENTS.md")).unwrap();
        let fifo = CString::new(work.join("CLAUDE.md").as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o666) }, 0);
        let said = prepare_in(dir.path(), &rules);
        assert_eq!(
            said,
            [
                "AGENTS.md was not written: AGENTS.md has other names (a hard link): not written",
                "CLAUDE.md was not written: CLAUDE.md is not a plain file: not followed",
            ]
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("theirs.md")).unwrap(),
            "# Rules of run 9\n"
        );
        assert!(
            !work.join(".git/info").exists(),
            "nothing written, nothing excluded"
        );
    }

    #[test]
    fn a_worktree_checkout_has_no_exclude_to_write() {
        let (dir, rules) = run_dir();
        let work = dir.path().join("work");
        std::fs::remove_dir(work.join(".git")).unwrap();
        std::fs::write(work.join(".git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(prepare_in(dir.path(), &rules), Vec::<String>::new());
        assert!(work.join("AGENTS.md").is_file());
    }
}
