//! Eagle's pushes into a repository on this host (`runner.repo` a path):
//! the repository stays as usable to the next run as it was.

use std::process::Command;

use crate::effects::{git, home, note, notes, remote, shared_tempdir, shell};
use crate::support::{Db, TestDb};

/// A repository on this host that others read (an operator's, made with
/// the usual umask) stays readable after Eagle, which runs with a private
/// umask, pushed into it: the next run's clone, as the worker's user, works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_repository_stays_readable_to_the_next_run_after_eagles_push() {
    use std::os::unix::fs::PermissionsExt as _;
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (remote, _, _) = remote(dir.path());
    git(&remote, &["config", "--unset", "core.sharedRepository"]);
    let closed = Command::new("chmod")
        .args(["-R", "go-w"])
        .arg(&remote)
        .status()
        .unwrap();
    assert!(closed.success());
    let home = home(&db, &remote);
    let first = dir.path().join("first");
    shell(
        &home,
        &format!("!queue Push it mode:push out:{}\n!go 1\n", first.display()),
    );
    assert_eq!(note(&notes(&first), "push-a"), "ok");
    let mut unreadable = Vec::new();
    let mut dirs = vec![remote.join("objects")];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            let want = if path.is_dir() { 0o005 } else { 0o004 };
            if mode & want != want {
                unreadable.push(format!("{} {:o}", path.display(), mode & 0o777));
            }
            if path.is_dir() {
                dirs.push(path);
            }
        }
    }
    assert!(unreadable.is_empty(), "{unreadable:#?}");
    let second = dir.path().join("second");
    shell(
        &home,
        &format!("!queue Again mode:push out:{}\n!go 2\n", second.display()),
    );
    assert_eq!(note(&notes(&second), "pushurl"), "eagle::origin");
}
