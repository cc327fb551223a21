//! The docs hold to the tree: the chat commands' reference is what the
//! binary generates, ARCHITECTURE.md and README.md stay short enough to read
//! in one sitting, every repository path ARCHITECTURE.md names exists, and
//! every relative link of README.md and `docs/` leads to a file.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::eagle_bin;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Words as `wc -w` counts them: runs of characters between whitespace.
fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

#[test]
fn the_chat_commands_reference_is_what_the_binary_generates() {
    let out = Command::new(eagle_bin())
        .args(["man", "--chat"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "eagle man --chat failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).unwrap();
    assert!(generated.contains("## `!approve"), "{generated}");
    let written = read("docs/commands.md");
    assert!(
        written == generated,
        "docs/commands.md differs from what the command definitions say; \
         regenerate it with `cargo run -q -- man --chat > docs/commands.md`"
    );
}

#[test]
fn architecture_and_readme_stay_short() {
    for (file, most) in [("ARCHITECTURE.md", 3000), ("README.md", 1500)] {
        let n = words(&read(file));
        assert!(
            n <= most,
            "{file} has {n} words, more than {most}: move detail into docs/"
        );
    }
}

/// Top-level folders whose paths ARCHITECTURE.md may name.
const ROOTS: &[&str] = &[
    "bot/",
    "tests/",
    "plugins/",
    "wit/",
    "migrations/",
    "profiles/",
    "prompts/",
    "dist/",
    "docs/",
    ".ci/",
];

/// What is written in backticks, and the targets of Markdown links.
fn quoted_and_linked(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            found.extend(part.split_whitespace().map(str::to_string));
        }
    }
    found.extend(link_targets(text));
    found
}

/// The targets of `[text](target)` links.
fn link_targets(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            rest.find(')').map(|end| rest[..end].trim().to_string())
        })
        .collect()
}

/// `a/{b,c}.rs` as `a/b.rs` and `a/c.rs` (one group of braces).
fn expand(path: &str) -> Vec<String> {
    match (path.find('{'), path.find('}')) {
        (Some(open), Some(close)) if open < close => path[open + 1..close]
            .split(',')
            .map(|alt| format!("{}{}{}", &path[..open], alt, &path[close + 1..]))
            .collect(),
        _ => vec![path.to_string()],
    }
}

/// The repository paths a word names: it starts with one of [`ROOTS`];
/// trailing punctuation, a `:line` and a `#fragment` are not part of it.
fn repository_paths(word: &str) -> Vec<String> {
    let word = word.trim_matches(|c: char| "()[],;.:\"'".contains(c));
    let word = word.split('#').next().unwrap_or_default();
    if !ROOTS.iter().any(|r| word.starts_with(r)) {
        return Vec::new();
    }
    expand(word)
        .into_iter()
        .map(|p| p.split(':').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn every_path_architecture_names_exists() {
    let text = read("ARCHITECTURE.md");
    let mut missing = Vec::new();
    let mut seen = 0;
    for word in quoted_and_linked(&text) {
        for path in repository_paths(&word) {
            seen += 1;
            if !root().join(&path).exists() {
                missing.push(path);
            }
        }
    }
    assert!(seen > 50, "only {seen} paths found: is the reader broken?");
    missing.dedup();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn every_relative_link_leads_to_a_file() {
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("ARCHITECTURE.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path.strip_prefix(root()).unwrap().to_path_buf());
        }
    }
    assert!(files.len() >= 8, "docs/ has too few pages: {files:?}");
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let dir = file.parent().unwrap_or(Path::new(""));
        for target in link_targets(&text) {
            let target = target.split_whitespace().next().unwrap_or_default();
            if target.is_empty()
                || target.starts_with('#')
                || target.contains("://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            let path = target.split('#').next().unwrap_or_default();
            if !root().join(dir).join(path).exists() {
                broken.push(format!("{}: {target}", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing: {broken:?}");
}

#[test]
fn the_path_reader_reads_what_the_map_writes() {
    let cases: &[(&str, &[&str])] = &[
        ("bot/src/lib.rs", &["bot/src/lib.rs"]),
        ("bot/src/lib.rs:12", &["bot/src/lib.rs"]),
        ("(bot/src/eagle.rs),", &["bot/src/eagle.rs"]),
        (
            "bot/src/ground/{text,host}.rs",
            &["bot/src/ground/text.rs", "bot/src/ground/host.rs"],
        ),
        ("docs/running.md#installing", &["docs/running.md"]),
        ("cargo", &[]),
        ("src/lib.rs", &[]),
    ];
    for (word, want) in cases {
        assert_eq!(repository_paths(word), *want, "{word}");
    }
    assert_eq!(
        link_targets("see [running](docs/running.md) and [x](#y)"),
        ["docs/running.md", "#y"]
    );
}
