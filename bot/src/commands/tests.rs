//! The command set as a whole: `!help` pinned, every name unique.

use super::*;

#[test]
fn help_is_pinned() {
    expect_test::expect_file!["snapshots/help.txt"].assert_eq(&help_text(None));
    expect_test::expect_file!["snapshots/help-queue.txt"].assert_eq(&help_text(Some("queue")));
}

#[test]
fn every_spec_is_reachable_and_unique() {
    let mut names: Vec<&str> = SPECS.iter().map(|s| s.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), SPECS.len());
    for spec in SPECS {
        assert!(spec.name.chars().all(|c| c.is_ascii_lowercase()));
        assert!(!spec.summary.ends_with('.'));
    }
}
