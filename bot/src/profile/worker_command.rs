//! A worker command template (`runner.worker_command`, `analyzer.command`):
//! split into words once, its program and its kind (Claude Code or another)
//! told apart, so a wrong template is refused when the profile is read.

use std::path::Path;

use super::field::WORKER_PLACEHOLDERS;
use super::{WorkerCommand, WorkerKind};

/// Parses a worker command template.
pub fn worker_command(text: &str, kind: Option<&str>) -> Result<WorkerCommand, String> {
    let argv = shell_words::split(text)
        .map_err(|e| format!("{text:?} cannot be split into words: {e}"))?;
    let Some(program) = argv.first() else {
        return Err("is empty".into());
    };
    if program.contains('{') {
        return Err(format!(
            "{text:?}: the program itself cannot be a placeholder"
        ));
    }
    let mut has_prompt = false;
    for word in &argv {
        let mut rest = word.as_str();
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else {
                return Err(format!("{word:?} has a '{{' without '}}'"));
            };
            let name = &rest[open + 1..open + close];
            if !WORKER_PLACEHOLDERS.contains(&name) {
                return Err(format!(
                    "{{{name}}} is not a placeholder (use {})",
                    WORKER_PLACEHOLDERS
                        .iter()
                        .map(|p| format!("{{{p}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if name == "prompt" && word != "{prompt}" {
                return Err(format!(
                    "{word:?}: {{prompt}} must be a word of its own (the prompt is handed to the \
                     program on its standard input, never on its command line)"
                ));
            }
            has_prompt |= name == "prompt";
            rest = &rest[open + close + 1..];
        }
    }
    if !has_prompt {
        return Err(format!(
            "{text:?} does not pass the prompt: put {{prompt}} where the program takes it"
        ));
    }
    let is_claude = Path::new(program)
        .file_name()
        .is_some_and(|name| name == "claude");
    let kind = match kind.map(str::trim) {
        None | Some("auto") => {
            if is_claude {
                WorkerKind::Claude
            } else {
                WorkerKind::Generic
            }
        }
        Some("claude") => WorkerKind::Claude,
        Some("generic") => WorkerKind::Generic,
        Some(other) => {
            return Err(format!(
                "worker_kind {other:?} is not one of auto, claude, generic"
            ));
        }
    };
    Ok(WorkerCommand {
        template: text.to_string(),
        argv,
        kind,
    })
}
