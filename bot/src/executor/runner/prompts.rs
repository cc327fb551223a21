//! The worker prompts: one template per situation of a run, built into the
//! binary, overridable file by file from `runner.prompts_dir`.

use std::collections::BTreeMap;
use std::path::Path;

/// What a worker is started for; also the prefix of its work log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PromptKind {
    /// A queued run: investigate, fix, open a draft PR.
    Investigation,
    /// An in-progress run resumed after a crash, a hold or decisions.
    Continue,
    FixCi,
    FixComments,
    PrReview,
    /// The analyzer's triage of a task.
    Analysis,
}

impl PromptKind {
    pub const ALL: [PromptKind; 6] = [
        PromptKind::Investigation,
        PromptKind::Continue,
        PromptKind::FixCi,
        PromptKind::FixComments,
        PromptKind::PrReview,
        PromptKind::Analysis,
    ];

    /// The name profiles and logs use (`investigation`, `fix_ci`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            PromptKind::Investigation => "investigation",
            PromptKind::Continue => "continue",
            PromptKind::FixCi => "fix_ci",
            PromptKind::FixComments => "fix_comments",
            PromptKind::PrReview => "pr_review",
            PromptKind::Analysis => "analysis",
        }
    }

    /// The template's file name in `prompts/`.
    pub fn file_name(self) -> &'static str {
        match self {
            PromptKind::Investigation => "executor-worker-queued.md",
            PromptKind::Continue => "executor-worker-inprogress.md",
            PromptKind::FixCi => "executor-worker-fix-ci.md",
            PromptKind::FixComments => "executor-worker-fix-comments.md",
            PromptKind::PrReview => "executor-worker-pr-review.md",
            PromptKind::Analysis => "analyzer.md",
        }
    }

    fn builtin(self) -> &'static str {
        match self {
            PromptKind::Investigation => {
                include_str!("../../../../prompts/executor-worker-queued.md")
            }
            PromptKind::Continue => {
                include_str!("../../../../prompts/executor-worker-inprogress.md")
            }
            PromptKind::FixCi => include_str!("../../../../prompts/executor-worker-fix-ci.md"),
            PromptKind::FixComments => {
                include_str!("../../../../prompts/executor-worker-fix-comments.md")
            }
            PromptKind::PrReview => {
                include_str!("../../../../prompts/executor-worker-pr-review.md")
            }
            PromptKind::Analysis => include_str!("../../../../prompts/analyzer.md"),
        }
    }
}

/// The placeholders a template may use.
pub const PLACEHOLDERS: &[&str] = &[
    "run_id",
    "task_id",
    "attempt",
    "title",
    "description",
    "workdir",
    "branch",
    "pr_url",
    "pr_status",
    "pr_threads",
    "decisions",
    "review_rules",
    "required_checks",
    "acceptance",
    "source",
    "links",
    "tags",
    "repos",
];

/// The templates in use.
#[derive(Debug, Clone)]
pub struct Prompts {
    templates: BTreeMap<PromptKind, String>,
}

impl Prompts {
    /// The built-in templates, each replaced by `<dir>/<file name>` where
    /// that file exists. Every template is checked once, here.
    pub fn load(dir: Option<&Path>) -> Result<Prompts, String> {
        let mut templates = BTreeMap::new();
        for kind in PromptKind::ALL {
            let text = match dir.map(|d| d.join(kind.file_name())) {
                Some(path) if path.is_file() => std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read the prompt {}: {e}", path.display()))?,
                _ => kind.builtin().to_string(),
            };
            check(&text).map_err(|why| format!("prompt {}: {why}", kind.file_name()))?;
            templates.insert(kind, text);
        }
        Ok(Prompts { templates })
    }

    /// The prompt of `kind` with `values` put in. Missing values become empty.
    pub fn render(&self, kind: PromptKind, values: &BTreeMap<&str, String>) -> String {
        let template = self
            .templates
            .get(&kind)
            .map(String::as_str)
            .unwrap_or_else(|| kind.builtin());
        let mut out = String::with_capacity(template.len() + 256);
        let mut rest = template;
        while let Some(at) = rest.find(['{', '}']) {
            out.push_str(&rest[..at]);
            let tail = &rest[at..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                out.push_str(&tail[..1]);
                rest = &tail[2..];
            } else if let Some(close) = tail.find('}').filter(|_| tail.starts_with('{')) {
                let name = &tail[1..close];
                out.push_str(values.get(name).map(String::as_str).unwrap_or(""));
                rest = &tail[close + 1..];
            } else {
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
        out.push_str(rest);
        // Empty placeholders leave blank lines behind: at most one in a row.
        let mut tidy = String::with_capacity(out.len());
        let mut blank = 0;
        for line in out.lines() {
            blank = if line.trim().is_empty() { blank + 1 } else { 0 };
            if blank <= 1 {
                tidy.push_str(line);
                tidy.push('\n');
            }
        }
        tidy.trim().to_string()
    }
}

/// Every `{name}` must be a known placeholder; `{{` and `}}` are literal.
fn check(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(at) = rest.find(['{', '}']) {
        let tail = &rest[at..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('}') {
            return Err("a lone '}' (write '}}' for a literal brace)".into());
        }
        let Some(close) = tail.find('}') else {
            return Err("a '{' without '}' (write '{{' for a literal brace)".into());
        };
        let name = &tail[1..close];
        if !PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "{{{name}}} is not a placeholder (use {})",
                PLACEHOLDERS
                    .iter()
                    .map(|p| format!("{{{p}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        rest = &tail[close + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_prompts_are_valid_short_and_actionable() {
        let prompts = Prompts::load(None).expect("built-in prompts");
        for kind in PromptKind::ALL {
            let text = kind.builtin();
            assert!(text.lines().count() <= 40, "{} is long", kind.file_name());
            let steps = text
                .lines()
                .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
                .count();
            assert!(steps >= 4, "{} has {steps} steps", kind.file_name());
            assert!(
                text.lines()
                    .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
                    .all(|l| l.contains("Expect") || l.contains("Print") || l.contains("print")),
                "{}: every step names its outcome",
                kind.file_name()
            );
            let rendered = prompts.render(kind, &BTreeMap::new());
            assert!(!rendered.contains('{') || kind == PromptKind::Analysis);
        }
        assert!(
            PromptKind::PrReview
                .builtin()
                .contains("No code the task does not need")
        );
    }

    #[test]
    fn render_fills_and_escapes() {
        let prompts = Prompts::load(None).unwrap();
        let mut values = BTreeMap::new();
        values.insert("run_id", "42".to_string());
        values.insert("title", "Fix {the} tab".to_string());
        values.insert("branch", "eagle/run-42".to_string());
        let text = prompts.render(PromptKind::Investigation, &values);
        assert!(text.contains("run 42"));
        assert!(
            text.contains("Task: Fix {the} tab"),
            "values are not re-read as templates"
        );
        assert!(text.contains("on the branch `eagle/run-42`"), "{text}");
        let analysis = prompts.render(PromptKind::Analysis, &values);
        assert!(analysis.contains("{\"status\": "), "{analysis}");
    }

    #[test]
    fn overrides_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("executor-worker-fix-ci.md"), "Fix {ci} now").unwrap();
        let error = Prompts::load(Some(dir.path())).unwrap_err();
        assert!(error.contains("executor-worker-fix-ci.md"), "{error}");
        assert!(error.contains("{ci} is not a placeholder"), "{error}");
        std::fs::write(
            dir.path().join("executor-worker-fix-ci.md"),
            "Fix run {run_id}",
        )
        .unwrap();
        let prompts = Prompts::load(Some(dir.path())).unwrap();
        let mut values = BTreeMap::new();
        values.insert("run_id", "7".to_string());
        assert_eq!(prompts.render(PromptKind::FixCi, &values), "Fix run 7");
    }
}
