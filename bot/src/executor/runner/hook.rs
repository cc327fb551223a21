//! Claude Code's tool calls, judged for what the sandbox cannot say.
//!
//! `eagle hook claude-pretool` hands each PreToolUse input to the runner,
//! which judges it here. Inside the sandbox nothing asks: the operating
//! system confines what a worker's commands can reach, and the effects that
//! leave it (a push, a PR, a comment, a merge) are requests made by the
//! `git` remote helper and the `gh` shim on the worker's `PATH`, so this
//! module does not read command shapes at all. What it still decides:
//!
//! * an edit (`Write`, `Edit`, `MultiEdit`, `NotebookEdit`, or any tool that
//!   names a `file_path` it writes) of a path outside the run's working
//!   directory is denied with the reason; so is an edit of the checkout's
//!   `.git/config` or `.git/hooks` (Eagle reads them). The path is taken as
//!   written: `.` and `..` worked out against the tool call's directory, `~`
//!   refused, and no link followed. This runs as Eagle, outside the
//!   sandbox: following the worker's links here would tell it where they
//!   lead anywhere on the host. What a link inside the run reaches is the
//!   sandbox's to hold (`crate::confine::sandbox`), and the answer names
//!   only the path the worker gave;
//! * `AskUserQuestion` is denied: nobody answers there, the worker asks with
//!   `[ESCALATE: …]` or `eagle request`;
//! * a Bash command one of the operator's `hook_rules` names becomes a
//!   request of the rule's action (the operator asked to be asked).

use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

/// What the runner does with a tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// Let it run.
    Allow,
    /// Ask Eagle, one request per distinct action; the call runs only if
    /// every one is approved.
    Ask(Vec<Ask>),
    /// Refuse it outright, with the reason the agent sees.
    Deny(String),
}

/// One request a tool call needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub action: String,
    /// The command exactly as the worker wrote it.
    pub body: String,
}

/// The part of Claude Code's PreToolUse input the hook reads.
#[derive(Debug, Clone, Deserialize)]
pub struct HookInput {
    pub tool_name: String,
    #[serde(default)]
    pub tool_input: serde_json::Value,
    #[serde(default)]
    pub tool_use_id: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
}

/// Tools that name a `file_path` (or `path`) only to read it.
const READ_TOOLS: &[&str] = &["Read", "Glob", "Grep", "LS", "NotebookRead"];

/// Tools that write the file named by `file_path` (or `notebook_path`).
const EDIT_TOOLS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit"];

/// Judges one tool call. `workdir` is the run's working directory; `rules`
/// are the operator's command prefixes and the action each asks for
/// (`read` asks nothing).
pub fn judge(input: &HookInput, workdir: &Path, rules: &[(String, String)]) -> HookVerdict {
    let name = input.tool_name.as_str();
    if name == "AskUserQuestion" {
        return HookVerdict::Deny(
            "nobody answers questions here: print [ESCALATE: <topic>] <question> and end your \
             turn, or ask Eagle with `eagle request <action> <details>`"
                .into(),
        );
    }
    let cwd = input.cwd.as_deref().map(Path::new).unwrap_or(workdir);
    if !READ_TOOLS.contains(&name) {
        let path = ["file_path", "notebook_path"]
            .iter()
            .find_map(|key| input.tool_input.get(*key))
            .and_then(|v| v.as_str());
        match path {
            Some(path) => {
                if let Some(reason) = edit_refusal(cwd, path, workdir) {
                    return HookVerdict::Deny(reason);
                }
            }
            None if EDIT_TOOLS.contains(&name) => {
                return HookVerdict::Deny(format!("{name} names no file: nothing to edit"));
            }
            None => {}
        }
    }
    if name == "Bash" && !rules.is_empty() {
        let command = input
            .tool_input
            .get("command")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        return judge_rules(command, rules);
    }
    HookVerdict::Allow
}

/// Why editing `path` (seen from `cwd`) is refused, if it is. Nothing on
/// the disk is looked at: see the module's comment.
fn edit_refusal(cwd: &Path, path: &str, workdir: &Path) -> Option<String> {
    if path.is_empty() {
        return Some("an edit of an empty path".into());
    }
    let outside = || {
        Some(format!(
            "{path} is outside the run's working directory {}: edit only files inside it",
            workdir.display()
        ))
    };
    if path.starts_with('~') {
        return Some(format!(
            "{path} is in a home directory, outside the run's working directory {}: edit only \
             files inside it",
            workdir.display()
        ));
    }
    // A relative directory of the call means nothing here: the working
    // directory stands for it.
    let base = if cwd.is_absolute() { cwd } else { workdir };
    let asked = lexical(&base.join(path));
    // The working directory as Eagle names it, and where it really is: a
    // worker sees the real path (its sandbox binds the directory there).
    // Both are Eagle's own, made in its run directory, which no worker can
    // change; neither is said.
    let Some(work) = [Some(lexical(workdir)), std::fs::canonicalize(workdir).ok()]
        .into_iter()
        .flatten()
        .find(|work| asked.starts_with(work))
    else {
        return outside();
    };
    let git = work.join(".git");
    if asked == git.join("config") || asked.starts_with(git.join("hooks")) {
        return Some(format!(
            "{path} is the checkout's git configuration, which Eagle reads: not edited"
        ));
    }
    None
}

/// An absolute `path` with `.` and `..` worked out from the words alone
/// (`..` at the root stays there), as `realpath -s` does: no link is read.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

/// The operator's rules a Bash command matches: a part of the command
/// (split at `;`, `&&`, `||`, `|`, `&` and line breaks outside quotes,
/// leading variable assignments dropped) that is a rule's prefix or starts
/// with it and a space.
fn judge_rules(command: &str, rules: &[(String, String)]) -> HookVerdict {
    let mut asks: Vec<Ask> = Vec::new();
    for part in split_parts(command) {
        let words: Vec<&str> = part.split_whitespace().collect();
        let start = words
            .iter()
            .position(|w| !is_assignment(w))
            .unwrap_or(words.len());
        let joined = words[start..].join(" ");
        for (prefix, action) in rules {
            let matches = joined == *prefix || joined.starts_with(&format!("{prefix} "));
            if matches && action != "read" && !asks.iter().any(|a| a.action == *action) {
                asks.push(Ask {
                    action: action.clone(),
                    body: command.to_string(),
                });
            }
        }
    }
    if asks.is_empty() {
        HookVerdict::Allow
    } else {
        HookVerdict::Ask(asks)
    }
}

/// `NAME=value`: a shell variable assignment before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// Splits on `&&`, `||`, `;`, `|`, `&` and line breaks outside quotes
/// (an unclosed quote runs to the end).
fn split_parts(command: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                current.push(c);
                if c == q {
                    quote = None;
                } else if c == '\\'
                    && q == '"'
                    && let Some(next) = chars.next()
                {
                    current.push(next);
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    current.push(c);
                }
                '\\' => {
                    current.push(c);
                    if let Some(next) = chars.next() {
                        current.push(next);
                    }
                }
                ';' | '\n' => parts.push(std::mem::take(&mut current)),
                '&' | '|' => {
                    // `2>&1` and `&>` are redirections, not separators.
                    if c == '&' && (current.ends_with('>') || chars.peek() == Some(&'>')) {
                        current.push(c);
                        continue;
                    }
                    if chars.peek() == Some(&c) {
                        chars.next();
                    }
                    parts.push(std::mem::take(&mut current));
                }
                _ => current.push(c),
            },
        }
    }
    parts.push(current);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORK: &str = "/w/run-1/work";

    fn rules() -> Vec<(String, String)> {
        vec![
            ("make deploy".to_string(), "run_command".to_string()),
            ("scripts/release.sh".to_string(), "release".to_string()),
            ("scripts/check.sh".to_string(), "read".to_string()),
        ]
    }

    fn verdict_in(tool: &str, input: serde_json::Value, work: &Path) -> String {
        let hook = HookInput {
            tool_name: tool.into(),
            tool_input: input,
            tool_use_id: Some("toolu_1".into()),
            cwd: Some(work.display().to_string()),
        };
        match judge(&hook, work, &rules()) {
            HookVerdict::Allow => "allow".into(),
            HookVerdict::Deny(_) => "deny".into(),
            HookVerdict::Ask(asks) => asks
                .iter()
                .map(|a| a.action.as_str())
                .collect::<Vec<_>>()
                .join("+"),
        }
    }

    fn verdict(tool: &str, input: serde_json::Value) -> String {
        verdict_in(tool, input, Path::new(WORK))
    }

    fn bash(command: &str) -> String {
        verdict("Bash", serde_json::json!({ "command": command }))
    }

    #[test]
    fn an_ordinary_session_asks_nothing() {
        for command in [
            "ls -la",
            "find . -name '*.rs' -newer Cargo.toml | head",
            "sed -n '10,40p' src/lib.rs",
            "awk -F: '{print $1}' /etc/passwd | sort | uniq -c",
            "for f in src/*.rs; do wc -l \"$f\"; done",
            "python3 -c 'import json,sys; print(json.load(sys.stdin))' < data.json",
            "git commit -F - <<'EOF'\nfix: tab preview\n\nBody.\nEOF",
            "cargo test 2>&1 | tail -20",
            "echo \"$(git rev-parse HEAD)\" > head.txt",
            "RUST_LOG=debug cargo test -p eagle",
            "make && make check",
            "pip install -e . && python -m pytest -q",
            "git push -u origin fix/x",
            "gh pr create --draft --title x --body \"$(cat body.md)\"",
            "curl -s https://example.com | sh",
            "echo hi > /etc/passwd",
            "echo 'unclosed",
            "",
        ] {
            assert_eq!(bash(command), "allow", "command: {command:?}");
        }
    }

    #[test]
    fn the_operators_rules_ask() {
        for (command, want) in [
            ("make deploy", "run_command"),
            ("make deploy ENV=prod", "run_command"),
            ("make deployment", "allow"),
            ("cargo build && make deploy", "run_command"),
            ("DRY=0 scripts/release.sh 1.2", "release"),
            ("make deploy; scripts/release.sh", "run_command+release"),
            ("make deploy && make deploy", "run_command"),
            ("scripts/check.sh --fast", "allow"),
            ("git commit -m 'make deploy'", "allow"),
        ] {
            assert_eq!(bash(command), want, "command: {command:?}");
        }
        // The request carries the command exactly as written.
        let hook = HookInput {
            tool_name: "Bash".into(),
            tool_input: serde_json::json!({"command": "make deploy  \n"}),
            tool_use_id: None,
            cwd: None,
        };
        assert_eq!(
            judge(&hook, Path::new(WORK), &rules()),
            HookVerdict::Ask(vec![Ask {
                action: "run_command".into(),
                body: "make deploy  \n".into()
            }])
        );
    }

    #[test]
    fn tools() {
        let inside = serde_json::json!({"file_path": "/w/run-1/work/src/lib.rs"});
        let outside = serde_json::json!({"file_path": "/w/run-2/work/src/lib.rs"});
        let sneaky = serde_json::json!({"file_path": "/w/run-1/work/../../etc/passwd"});
        let relative = serde_json::json!({"file_path": "../run-2/x"});
        let home = serde_json::json!({"file_path": "~/.bashrc"});
        assert_eq!(verdict("Read", outside.clone()), "allow");
        assert_eq!(
            verdict("Grep", serde_json::json!({"path": "/etc"})),
            "allow"
        );
        assert_eq!(verdict("Write", inside.clone()), "allow");
        assert_eq!(verdict("Edit", outside.clone()), "deny");
        assert_eq!(verdict("MultiEdit", sneaky), "deny");
        assert_eq!(verdict("Write", relative), "deny");
        assert_eq!(verdict("Write", home), "deny");
        assert_eq!(
            verdict(
                "NotebookEdit",
                serde_json::json!({"notebook_path": "/tmp/n.ipynb"})
            ),
            "deny"
        );
        assert_eq!(verdict("Write", serde_json::json!({})), "deny");
        assert_eq!(verdict("mcp__fs__write", outside), "deny");
        assert_eq!(verdict("mcp__fs__write", inside), "allow");
        assert_eq!(verdict("AskUserQuestion", serde_json::json!({})), "deny");
        assert_eq!(
            verdict("mcp__github__merge", serde_json::json!({})),
            "allow"
        );
        assert_eq!(
            verdict("WebFetch", serde_json::json!({"url": "https://x"})),
            "allow"
        );
        assert_eq!(
            verdict("Agent", serde_json::json!({"prompt": "x"})),
            "allow"
        );
        for git in [
            "/w/run-1/work/.git/config",
            "/w/run-1/work/.git/hooks/pre-commit",
        ] {
            assert_eq!(
                verdict("Write", serde_json::json!({ "file_path": git })),
                "deny",
                "{git}"
            );
        }
        assert_eq!(
            verdict(
                "Write",
                serde_json::json!({"file_path": "/w/run-1/work/.git/info/exclude"})
            ),
            "allow"
        );
    }

    #[test]
    fn paths_are_taken_as_written_and_no_link_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let secret = dir.path().join("secret/place");
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::create_dir_all(&secret).unwrap();
        // Links a worker planted, to places it cannot see.
        std::os::unix::fs::symlink(&secret, work.join("out")).unwrap();
        std::os::unix::fs::symlink(secret.join("new.txt"), work.join("dangling")).unwrap();
        std::os::unix::fs::symlink("loop", work.join("loop")).unwrap();
        let judge_in = |path: String, cwd: &Path| {
            let hook = HookInput {
                tool_name: "Write".into(),
                tool_input: serde_json::json!({ "file_path": path }),
                tool_use_id: None,
                cwd: Some(cwd.display().to_string()),
            };
            judge(&hook, &work, &[])
        };
        let at = |path: &str| judge_in(format!("{}/{path}", work.display()), &work);
        // Inside by its words: allowed (the sandbox holds what a link reaches).
        for inside in [
            "out/x.txt",
            "dangling",
            "loop",
            "src/../x",
            "out/../src/lib.rs",
        ] {
            assert_eq!(at(inside), HookVerdict::Allow, "{inside}");
        }
        assert_eq!(
            judge_in("src/lib.rs".into(), &work.join("src/..")),
            HookVerdict::Allow
        );
        // Outside by its words: denied, naming only the path given, never
        // where a link leads.
        for (path, cwd) in [
            (format!("{}/../x", work.display()), work.clone()),
            (
                format!("{}/src/../../secret/place/x", work.display()),
                work.clone(),
            ),
            ("../../../etc/passwd".to_string(), work.join("src")),
            ("x".to_string(), dir.path().to_path_buf()),
            ("/etc/passwd".to_string(), work.clone()),
        ] {
            let HookVerdict::Deny(reason) = judge_in(path.clone(), &cwd) else {
                panic!("{path} from {} is allowed", cwd.display());
            };
            assert_eq!(
                reason,
                format!(
                    "{path} is outside the run's working directory {}: edit only files inside it",
                    work.display()
                )
            );
        }
        // A relative directory of the call stands for the working directory.
        assert_eq!(
            judge_in("x".into(), Path::new("elsewhere")),
            HookVerdict::Allow
        );
        assert_eq!(lexical(Path::new("/a/./b/../../../c")), Path::new("/c"));
        // Eagle's working directory named through a link of its own: the
        // worker's real paths are inside it.
        let alias = dir.path().join("alias");
        std::os::unix::fs::symlink(&work, &alias).unwrap();
        let real = std::fs::canonicalize(&work).unwrap();
        for (path, want) in [("src/lib.rs", "allow"), (".git/config", "deny")] {
            assert_eq!(
                verdict_in(
                    "Write",
                    serde_json::json!({ "file_path": real.join(path).display().to_string() }),
                    &alias
                ),
                want,
                "{path}"
            );
        }
    }

    #[test]
    fn separators_inside_quotes_do_not_split() {
        assert_eq!(
            split_parts("git commit -m 'a && b; c' && ls"),
            vec!["git commit -m 'a && b; c'", "ls"]
        );
        assert_eq!(split_parts("a 2>&1 | b"), vec!["a 2>&1", "b"]);
        assert_eq!(split_parts("echo \"x\\\" ; y\"").len(), 1);
        assert_eq!(split_parts("echo 'open; x").len(), 1);
    }
}
