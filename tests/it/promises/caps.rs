//! The caps on what a worker can make Eagle post.

use super::{run_posts, script};
use crate::support::{Home, text};

#[test]
fn a_burst_of_results_and_acknowledgements_is_posted_like_status_lines() {
    let mut home = Home::new();
    let worker = script(
        &home,
        "burst.sh",
        "cat >/dev/null\n\
         for i in $(seq 1 50); do echo \"[ACKNOWLEDGED: thread] run:$EAGLE_RUN_ID fixed $i\"; done\n\
         for i in $(seq 1 50); do echo \"[DONE: abandoned] run:$EAGLE_RUN_ID said $i\"; done",
    );
    home.set(
        "EAGLE_RUNNER__WORKER_COMMAND",
        &format!("bash {} {{prompt}}", worker.display()),
    )
    .set("EAGLE_RUNNER__STATUS_INTERVAL", "1h");
    let out = home.run(&["shell"], "!queue Fix the tab preview\n!go 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let posts = run_posts(&stdout);
    let count = |tag: &str| posts.iter().filter(|p| p.contains(tag)).count();
    assert!(count("[DONE: abandoned]") >= 1, "{stdout}");
    assert!(count("[DONE: abandoned]") <= 2, "{stdout}");
    assert!(count("[ACKNOWLEDGED: thread]") >= 1, "{stdout}");
    assert!(count("[ACKNOWLEDGED: thread]") <= 2, "{stdout}");
    // The result the run is judged by is the last one, and it is posted.
    assert!(stdout.contains("said 50"), "{stdout}");
}
