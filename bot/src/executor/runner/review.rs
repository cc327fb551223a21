//! What a pr-review worker reviews by, put into its prompt: the
//! repository's own rule files the profile names (`runner.review_rules`,
//! read from the run's checkout), the checks that must be green
//! (`runner.review_checks` and `github.required_checks`), and the
//! recording and UI acceptance criteria the task asks for.
//!
//! The checkout is the worker's, so its files are data: a rule is read
//! only when it is a regular file inside the checkout once symlinks are
//! resolved (a link to Eagle's files is never followed), opened without
//! following a link, and cut at [`MAX_RULE_BYTES`] (all of them at
//! [`MAX_RULES_BYTES`]).

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::store::Task;

/// The most of one rule file put into a prompt.
pub const MAX_RULE_BYTES: usize = 32 * 1024;
/// The most of all rule files together.
pub const MAX_RULES_BYTES: usize = 96 * 1024;
/// At most this many files match one pattern.
const MAX_MATCHES: usize = 50;

/// The rule files of `checkout` that `patterns` name, as prompt text.
pub fn rules_text(checkout: &Path, patterns: &[String]) -> String {
    if patterns.is_empty() {
        return "(the profile names no review rules: `[runner] review_rules`)".into();
    }
    let Ok(root) = checkout.canonicalize() else {
        return "(the run's checkout could not be read)".into();
    };
    let mut out = String::new();
    let mut budget = MAX_RULES_BYTES;
    let mut found = 0;
    for pattern in patterns {
        for path in expand(&root, pattern) {
            let shown = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .display()
                .to_string();
            if budget == 0 {
                out.push_str(&format!(
                    "\n(left out: {shown}; the rules are cut at {MAX_RULES_BYTES} bytes)\n"
                ));
                continue;
            }
            let Some((text, cut)) = read_rule(&root, &path, budget.min(MAX_RULE_BYTES)) else {
                continue;
            };
            found += 1;
            budget = budget.saturating_sub(text.len());
            out.push_str(&format!("\n----- {shown} -----\n{}", text.trim_end()));
            if cut {
                out.push_str("\n(cut here: the file is longer)");
            }
            out.push_str(&format!("\n----- end of {shown} -----\n"));
        }
    }
    if found == 0 {
        return format!(
            "(none of the review rules the profile names is in this checkout: {})",
            patterns.join(", ")
        );
    }
    out
}

/// The files one pattern names: a path whose last part may hold `*` and `?`.
fn expand(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let (dir, name) = match pattern.rsplit_once('/') {
        Some((dir, name)) => (root.join(dir), name),
        None => (root.to_path_buf(), pattern),
    };
    if !name.contains(['*', '?']) {
        return vec![dir.join(name)];
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| glob(name, n)))
        .map(|e| e.path())
        .collect();
    files.sort();
    files.truncate(MAX_MATCHES);
    files
}

/// Whether `name` matches `pattern` (`*` any run, `?` one character).
fn glob(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A rule file's text, at most `limit` bytes (and whether it was cut), if
/// it is a regular file inside `root`.
fn read_rule(root: &Path, path: &Path, limit: usize) -> Option<(String, bool)> {
    let real = path.canonicalize().ok()?;
    if !real.starts_with(root) || !real.is_file() {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1).read_to_end(&mut bytes).ok()?;
    let cut = bytes.len() > limit;
    bytes.truncate(limit);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if cut {
        // A character cut in two is dropped, not shown as garbage.
        while text.ends_with('\u{fffd}') {
            text.pop();
        }
    }
    Some((text, cut))
}

/// The checks that must be green, one line.
pub fn checks_text(checks: &[String]) -> String {
    if checks.is_empty() {
        "(none named)".into()
    } else {
        checks.join(", ")
    }
}

/// Words that say a task asks for a recording or UI acceptance.
const ACCEPTANCE_WORDS: &[&str] = &[
    "recording",
    "screen record",
    "screencast",
    "video",
    "acceptance",
    "ui test",
    "ui tests",
];

/// The recording and UI acceptance criteria the task asks for, quoted
/// line by line, or that it asks for none.
pub fn acceptance_text(task: Option<&Task>) -> String {
    let Some(task) = task else {
        return "(no task text)".into();
    };
    let mut lines: Vec<String> = Vec::new();
    for text in [&task.title, &task.description, &task.notes] {
        for line in text.lines() {
            let lower = line.to_lowercase();
            let line = line.trim();
            if !line.is_empty()
                && ACCEPTANCE_WORDS.iter().any(|w| lower.contains(w))
                && !lines.iter().any(|l| l == line)
            {
                lines.push(crate::ground::text::one_line(line, 300));
            }
        }
    }
    if lines.is_empty() {
        return "(the task asks for no recording and states no UI acceptance criteria)".into();
    }
    let mut out = String::from(
        "the task asks for these; each must be met and shown in the PR (a recording attached or linked in its description):",
    );
    for line in lines.iter().take(20) {
        out.push_str(&format!("\n- {line}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_the_last_part() {
        for (pattern, name, want) in [
            ("*.mdc", "swift.mdc", true),
            ("*.mdc", "swift.md", false),
            ("pull-request.mdc", "pull-request.mdc", true),
            ("?.md", "a.md", true),
            ("?.md", "ab.md", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("*", "", true),
        ] {
            assert_eq!(glob(pattern, name), want, "{pattern} {name}");
        }
    }

    #[test]
    fn rule_files_of_the_checkout_go_in_capped_and_links_out_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("checkout");
        std::fs::create_dir_all(root.join(".cursor/rules")).unwrap();
        std::fs::write(root.join(".cursor/rules/swift.mdc"), "No force unwraps.\n").unwrap();
        std::fs::write(
            root.join(".cursor/rules/tests.mdc"),
            "Every fix has a test.\n",
        )
        .unwrap();
        std::fs::write(
            root.join("pull-request.mdc"),
            "x".repeat(MAX_RULE_BYTES + 10),
        )
        .unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "TOKEN").unwrap();
        std::os::unix::fs::symlink(&secret, root.join("pixels.instructions.md")).unwrap();
        let patterns: Vec<String> = [
            ".cursor/rules/*.mdc",
            "pull-request.mdc",
            "pixels.instructions.md",
            "gone.md",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let text = rules_text(&root, &patterns);
        assert!(
            text.contains("----- .cursor/rules/swift.mdc -----\nNo force unwraps."),
            "{text}"
        );
        assert!(text.contains("Every fix has a test."), "{text}");
        assert!(text.contains("(cut here: the file is longer)"), "{text}");
        assert!(
            !text.contains("TOKEN"),
            "a link out of the checkout was followed"
        );
        assert!(text.len() < MAX_RULES_BYTES + 1000);
        let none = rules_text(&root.join(".cursor"), &["pull-request.mdc".to_string()]);
        assert!(none.starts_with("(none of the review rules"), "{none}");
        assert!(rules_text(&root, &[]).contains("names no review rules"));
    }
}
