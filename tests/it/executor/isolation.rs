//! A worker running as its own user cannot reach Eagle's secrets, nor
//! forge what Eagle decides.

use super::{fake_worker, home_store, posts};
use crate::support::{Home, text};

#[test]
fn a_worker_running_as_its_own_user_cannot_reach_eagles_secrets() {
    assert_eq!(
        eagle::ground::host::euid(),
        0,
        "this test starts workers as another user: run it as root (CI does)"
    );
    let user = crate::support::worker_user();
    let mut home = Home::new();
    // The worker user may pass through the home (not list it), and run the
    // binary and the script from a copy it can read.
    eagle::ground::host::chmod(home.dir.path(), 0o711).unwrap();
    let bin = home.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    eagle::ground::host::chmod(&bin, 0o755).unwrap();
    std::fs::copy(crate::support::eagle_bin(), bin.join("eagle")).unwrap();
    std::fs::copy(fake_worker(), bin.join("fake-worker.sh")).unwrap();
    for file in ["eagle", "fake-worker.sh"] {
        eagle::ground::host::chmod(&bin.join(file), 0o755).unwrap();
    }
    let zuliprc = home.profiles().join("eagle.zuliprc");
    // Written readable by everyone, as an operator's editor may leave it:
    // Eagle makes it private before any worker starts.
    std::fs::write(&zuliprc, "[api]\nemail=eagle-bot@example.com\nkey=secret-key-0123456789\nsite=https://zulip.example.com\n").unwrap();
    eagle::ground::host::chmod(&zuliprc, 0o644).unwrap();
    home.set("EAGLE_RUNNER__WORKER_USER", user).set(
        "EAGLE_RUNNER__WORKER_COMMAND",
        &format!("bash {} {{prompt}}", bin.join("fake-worker.sh").display()),
    );
    let child = std::process::Command::new(bin.join("eagle"))
        .arg("shell")
        .env_clear()
        .envs(&home.env)
        .current_dir(home.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let db = home.dir.path().join("data/eagle.db");
    let input = format!(
        "!queue spoof mode:spoof db:{} zuliprc:{} eagle_pid:{}\n!go 1\n",
        db.display(),
        zuliprc.display(),
        child.id()
    );
    let out = crate::support::finish(child, input.as_bytes(), "eagle shell");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let spoof = posts(&stdout, 1)
        .into_iter()
        .find(|p| p.contains("[STATUS: spoof]"))
        .unwrap_or_else(|| panic!("the spoofing worker reported nothing:\n{stdout}\n{stderr}"));
    assert!(
        spoof.ends_with(&format!(
            "db=denied zuliprc=denied environ=denied token=exit4 user={}",
            user
        )),
        "{spoof}"
    );
    // The forged ask was refused before anything was recorded.
    let requests = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(async { home_store(&home).await.requests().requests_of_run(1).await })
        .unwrap();
    assert!(requests.iter().all(|r| r.body != "forged"), "{requests:#?}");
    // The worker's own [APPROVED: …] line is not relayed, and decides nothing.
    assert!(
        !stdout.contains("approved by the worker itself"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Eagle: [ESCALATED: merge_pr] run:1"),
        "{stdout}"
    );
    // What Eagle keeps is private to it.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o077, 0, "the database is {mode:o}");
    let mode = std::fs::metadata(&zuliprc).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the zuliprc is {mode:o}");
}
