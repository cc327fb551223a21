//! Reading the analysis command's answer: one JSON object with `status`,
//! `summary`, `complexity`, `feasibility`, `priority` and optionally
//! `repo` (the repository the task belongs to), wherever it is in
//! the output (bare, inside Claude Code's `--output-format json` envelope,
//! or after some prose). Anything else is not guessed at.

use serde_json::Value;

use crate::store::{Analysis, TaskStatus};

/// The longest summary kept; the rest is cut.
const MAX_SUMMARY_CHARS: usize = 1_000;
/// The longest complexity or feasibility word kept.
const MAX_WORD_CHARS: usize = 40;
/// The largest output searched for the answer.
const MAX_SEARCHED: usize = 256 * 1024;

/// The analysis in `output`, or why there is none.
pub fn parse(output: &str) -> Result<Analysis, String> {
    let output = cut(output, MAX_SEARCHED);
    let object = find(output, 0)
        .ok_or_else(|| "the answer holds no JSON object with a status".to_string())?;
    let status = match object.get("status").and_then(Value::as_str).map(normalise) {
        Some(s) if s == "for_review" => TaskStatus::ForReview,
        Some(s) if s == "awaiting_go" => TaskStatus::AwaitingGo,
        Some(s) if s == "skip" => TaskStatus::Skip,
        Some(other) => {
            return Err(format!(
                "the answer's status {other:?} is not for_review, awaiting_go or skip"
            ));
        }
        None => return Err("the answer's status is not a string".into()),
    };
    let text = |key: &str, max: usize| {
        object
            .get(key)
            .and_then(Value::as_str)
            .map(|s| crate::ground::text::one_line(s.trim(), max))
            .filter(|s| !s.is_empty())
    };
    let priority = match object.get("priority") {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|p| p.is_finite())
    .map(|p| (p.round() as i64).clamp(1, 5));
    let summary = text("summary", MAX_SUMMARY_CHARS);
    let reason = match (status, &summary) {
        (TaskStatus::Skip, Some(summary)) => format!("skipped by the analysis: {summary}"),
        (TaskStatus::Skip, None) => "skipped by the analysis".to_string(),
        (TaskStatus::AwaitingGo, _) => "the analysis finds it ready to start".to_string(),
        _ => "the analysis asks for a human look".to_string(),
    };
    Ok(Analysis {
        status: Some(status),
        summary,
        complexity: text("complexity", MAX_WORD_CHARS).map(|s| s.to_lowercase()),
        feasibility: text("feasibility", MAX_WORD_CHARS).map(|s| s.to_lowercase()),
        priority,
        repo: object
            .get("repo")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|r| crate::ground::repo::is_checkout_name(r))
            .map(str::to_string),
        raw: None,
        reason,
    })
}

/// `awaiting go`, `Awaiting-Go` → `awaiting_go`.
fn normalise(status: &str) -> String {
    status
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c == ' ' || c == '-' { '_' } else { c })
        .collect()
}

fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The answer object in `text`: the whole text as an object with a
/// status; or Claude Code's envelope (`{"type": "result", "result": "…"}`),
/// searched inside; else the last object with a status found in the text.
fn find(text: &str, depth: u8) -> Option<serde_json::Map<String, Value>> {
    if depth > 2 {
        return None;
    }
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text.trim()) {
        return from_object(object, depth);
    }
    // One JSON value per line (stream-json), or prose around an object.
    let mut found = None;
    for (at, _) in text.match_indices('{') {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(object))) = values.next()
            && let Some(answer) = from_object(object, depth)
        {
            found = Some(answer);
        }
    }
    found
}

fn from_object(
    object: serde_json::Map<String, Value>,
    depth: u8,
) -> Option<serde_json::Map<String, Value>> {
    if object.get("status").is_some_and(Value::is_string) {
        return Some(object);
    }
    // Claude Code: the answer is the text of the result.
    match object.get("result") {
        Some(Value::String(inner)) => find(inner, depth + 1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_answer_wherever_it_is() {
        let bare = r#"{"status": "awaiting_go", "summary": "Fix the preview", "complexity": "Small", "feasibility": "high", "priority": 2}"#;
        let a = parse(bare).unwrap();
        assert_eq!(a.status, Some(TaskStatus::AwaitingGo));
        assert_eq!(a.summary.as_deref(), Some("Fix the preview"));
        assert_eq!(a.complexity.as_deref(), Some("small"));
        assert_eq!(a.priority, Some(2));

        let claude = serde_json::json!({
            "type": "result",
            "subtype": "success",
            "result": format!("Here is my triage:\n```json\n{bare}\n```"),
        })
        .to_string();
        assert_eq!(parse(&claude).unwrap().status, Some(TaskStatus::AwaitingGo));

        let prose = "I looked. {\"status\": \"skip\", \"summary\": \"a design task\"} Done.";
        let a = parse(prose).unwrap();
        assert_eq!(a.status, Some(TaskStatus::Skip));
        assert_eq!(a.reason, "skipped by the analysis: a design task");

        let streamed = "{\"type\":\"system\"}\n{\"type\":\"result\",\"result\":\"{\\\"status\\\": \\\"for review\\\"}\"}\n";
        assert_eq!(parse(streamed).unwrap().status, Some(TaskStatus::ForReview));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for bad in [
            "",
            "no json here",
            r#"{"summary": "no status"}"#,
            r#"{"status": "ship it"}"#,
            r#"{"status": 3}"#,
            "{{{{",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bounds_what_it_keeps() {
        let long = format!(
            r#"{{"status": "for_review", "summary": "{}", "priority": 99, "complexity": "x"}}"#,
            "word ".repeat(1_000)
        );
        let a = parse(&long).unwrap();
        assert!(a.summary.unwrap().chars().count() <= MAX_SUMMARY_CHARS + 1);
        assert_eq!(a.priority, Some(5));
        let a = parse(r#"{"status": "skip", "priority": "NaN"}"#).unwrap();
        assert_eq!(a.priority, None);
    }

    #[test]
    fn never_panics_on_arbitrary_input() {
        let mut rng = fastrand::Rng::with_seed(7);
        let alphabet: Vec<char> = "{}[]\":,status skip\\ né\n0123".chars().collect();
        for _ in 0..5_000 {
            let len = rng.usize(0..80);
            let text: String = (0..len)
                .map(|_| alphabet[rng.usize(..alphabet.len())])
                .collect();
            let _ = parse(&text);
        }
    }
}
