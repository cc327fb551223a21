//! The promises Eagle makes about what a worker gets and what it can reach,
//! each tried the way it could break, through the real binary: a started
//! worker's environment and command line, Eagle's own environment in
//! `/proc`, the files Eagle creates first, and the caps on what a worker can
//! make Eagle hold or post.

mod caps;
mod kill_9;
mod private;
mod secrets;
mod worker;

use std::path::PathBuf;

use crate::support::Home;

/// A worker program written for one test: a bash script in a directory the
/// worker user can read.
fn script(home: &Home, name: &str, body: &str) -> PathBuf {
    let dir = home.dir.path().join("scripts");
    std::fs::create_dir_all(&dir).unwrap();
    eagle::ground::host::chmod(&dir, 0o755).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/usr/bin/env bash\nset -u\n{body}\n")).unwrap();
    eagle::ground::host::chmod(&path, 0o755).unwrap();
    path
}

/// Posts the shell printed about run 1, in order.
pub(crate) fn run_posts(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("#executor > run 1 · "))
        .collect()
}
