//! The house's shape, held: `bot/src` is a few wings in layer order, every
//! arrow between wings points down, and no files import each other in a
//! circle. The test reads the `crate::…` and `super::…` paths of every
//! source file (comments aside) and resolves each to the file it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The wings from the top floor down: a wing may use those after it, never
/// one before it. ARCHITECTURE.md says why each is where it is.
const WINGS: &[&str] = &[
    "cli",
    "transport",
    "daemon",
    "ops",
    "chat",
    "eagle",
    "executor",
    "worker",
    "confine",
    "policy",
    "runtime",
    "integrations",
    "store",
    "profile",
    "ground",
];

/// A source file as a module path: `executor/runner/socket.rs` is
/// `["executor", "runner", "socket"]`; `lib.rs` and `main.rs` are the root.
fn module_of(file: &str) -> Vec<String> {
    let stem = file.strip_suffix(".rs").unwrap_or(file);
    if stem == "lib" || stem == "main" {
        return Vec::new();
    }
    stem.split('/').map(str::to_string).collect()
}

struct Tree {
    /// Relative path (`a/b.rs`) → its code, comments removed.
    files: BTreeMap<String, String>,
}

impl Tree {
    fn read(root: &Path) -> Tree {
        let mut files = BTreeMap::new();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path
                        .strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    let text = std::fs::read_to_string(&path).unwrap();
                    files.insert(rel, code_only(&text));
                }
            }
        }
        Tree { files }
    }

    /// The file a module path lands in: the longest prefix that is a file.
    fn resolve(&self, path: &[String]) -> Option<&str> {
        (1..=path.len()).rev().find_map(|n| {
            let file = format!("{}.rs", path[..n].join("/"));
            self.files.get_key_value(&file).map(|(k, _)| k.as_str())
        })
    }

    /// Every file each file names, by `crate::` and `super::` paths.
    fn arrows(&self) -> BTreeMap<&str, BTreeSet<&str>> {
        let mut arrows = BTreeMap::new();
        for (file, code) in &self.files {
            let me = module_of(file);
            let mut to = BTreeSet::new();
            for (start, path) in paths(code) {
                let base: Vec<String> = match start {
                    Start::Crate => Vec::new(),
                    Start::Super(n) if n <= me.len() => me[..me.len() - n].to_vec(),
                    Start::Super(_) => continue,
                };
                let full: Vec<String> = base.into_iter().chain(path).collect();
                if let Some(target) = self.resolve(&full)
                    && target != file
                {
                    to.insert(target);
                }
            }
            arrows.insert(file.as_str(), to);
        }
        arrows
    }
}

enum Start {
    Crate,
    Super(usize),
}

/// Every `crate::a::b` and `super::super::a` path in `code`, as where it
/// starts and its lowercase segments (a type or function name ends it; the
/// file is found by the longest prefix anyway).
fn paths(code: &str) -> Vec<(Start, Vec<String>)> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !code.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let at_word_start = i == 0 || !(word(bytes[i - 1]) || bytes[i - 1] == b'$');
        let rest = &code[i..];
        let start = if at_word_start && rest.starts_with("crate::") {
            i += "crate::".len();
            Some(Start::Crate)
        } else if at_word_start && rest.starts_with("super::") {
            let mut n = 0;
            while code[i..].starts_with("super::") {
                n += 1;
                i += "super::".len();
            }
            Some(Start::Super(n))
        } else {
            None
        };
        let Some(start) = start else {
            i += 1;
            continue;
        };
        let mut segments = Vec::new();
        loop {
            let end = code[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(code.len(), |e| i + e);
            let segment = &code[i..end];
            if segment.is_empty() || !segment.starts_with(|c: char| c.is_ascii_lowercase()) {
                break;
            }
            segments.push(segment.to_string());
            i = end;
            if code[i..].starts_with("::") {
                i += 2;
            } else {
                break;
            }
        }
        found.push((start, segments));
    }
    found
}

/// `text` without `//` comments (doc comments name paths freely).
fn code_only(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            // A `//` inside a string (a URL) is kept: only a line that is a
            // comment, or code followed by one outside quotes, is cut.
            Some(at) if line[..at].matches('"').count() % 2 == 0 => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn wing_of(file: &str) -> Option<&str> {
    file.split_once('/')
        .map(|(w, _)| w)
        .or_else(|| file.strip_suffix(".rs"))
        .filter(|w| *w != "lib" && *w != "main")
}

fn rank(wing: &str) -> usize {
    WINGS
        .iter()
        .position(|w| *w == wing)
        .unwrap_or_else(|| panic!("bot/src/{wing} is not a wing: add it to WINGS in layer order"))
}

fn source_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Arrows from a wing to a wing above it, as `file → file (wing → wing)`.
fn upward(arrows: &BTreeMap<&str, BTreeSet<&str>>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (from, targets) in arrows {
        let Some(a) = wing_of(from) else { continue };
        for to in targets {
            let Some(b) = wing_of(to) else { continue };
            if rank(b) < rank(a) {
                wrong.push(format!(
                    "bot/src/{from} → bot/src/{to} ({a} uses {b}, a wing above it)"
                ));
            }
        }
    }
    wrong
}

/// Files that import each other in a circle. A file may use the module it
/// belongs to (its parent names its namespace), so arrows to an ancestor
/// are left out.
fn circles<'a>(arrows: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    let is_ancestor = |from: &str, to: &str| {
        let (a, b) = (module_of(from), module_of(to));
        b.len() < a.len() && a[..b.len()] == b[..]
    };
    let edges: BTreeMap<&str, Vec<&str>> = arrows
        .iter()
        .map(|(from, to)| {
            let kept = to
                .iter()
                .copied()
                .filter(|t| !is_ancestor(from, t))
                .collect();
            (*from, kept)
        })
        .collect();
    // Tarjan's strongly connected components, iteratively small enough to
    // recurse: the tree has a few hundred files.
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(v: &'a str, edges: &BTreeMap<&'a str, Vec<&'a str>>, s: &mut State<'a>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, edges, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort_unstable();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(v, &edges, &mut state);
        }
    }
    state.found
}

#[test]
fn every_arrow_between_wings_points_down() {
    let tree = Tree::read(&source_root());
    let top: BTreeSet<&str> = tree.files.keys().filter_map(|f| wing_of(f)).collect();
    for wing in &top {
        rank(wing);
    }
    assert!(top.len() <= 16, "bot/src has {} wings: {top:?}", top.len());
    let wrong = upward(&tree.arrows());
    assert!(wrong.is_empty(), "arrows back up:\n{}", wrong.join("\n"));
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let tree = Tree::read(&source_root());
    let arrows = tree.arrows();
    let found = circles(&arrows);
    assert!(
        found.is_empty(),
        "files that import each other in a circle:\n{}",
        found
            .iter()
            .map(|c| c.join(" ⇄ "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The checks themselves catch what they are for: an arrow up and a circle,
/// planted in a copy of the tree.
#[test]
fn an_arrow_back_up_and_a_circle_are_caught() {
    let mut tree = Tree::read(&source_root());
    let store = tree.files.get_mut("store.rs").expect("bot/src/store.rs");
    store.push_str("\nuse crate::policy::Policy;\n");
    let wrong = upward(&tree.arrows());
    assert_eq!(
        wrong,
        ["bot/src/store.rs → bot/src/policy.rs (store uses policy, a wing above it)"]
    );

    let mut tree = Tree::read(&source_root());
    tree.files
        .get_mut("ground/text.rs")
        .unwrap()
        .push_str("\nuse super::host::pid;\n");
    tree.files
        .get_mut("ground/host.rs")
        .unwrap()
        .push_str("\nuse crate::ground::text::hex;\n");
    let arrows = tree.arrows();
    assert_eq!(circles(&arrows), [vec!["ground/host.rs", "ground/text.rs"]]);
}
