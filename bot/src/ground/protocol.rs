//! The structured lines the executor posts and Eagle answers with:
//!
//! ```text
//! [STATUS: investigation] run:42 Analysing bug GID 123456...
//! [REQUEST: run_tests] run:42 Scheme: macOS UI Tests CI
//! [ESCALATE: scope_expansion] run:42 Found unrelated issue in TabBar.swift
//! [APPROVED: run_tests] run:42 req:7 (policy: default-approval)
//! ```
//!
//! Workers write `STATUS`, `REQUEST`, `DONE`, `ESCALATE` and `ACKNOWLEDGED`;
//! only Eagle writes `APPROVED`, `DENIED`, `ESCALATED` and `EXPIRED`, and
//! only its decider's records make them true: a line in chat is a mirror.
//!
//! Parsing is a pure function, linear in the input, with no guessing: a line
//! that starts like a tag but is malformed is reported as such (the caller
//! counts and ignores it), never repaired.

use std::fmt;

/// The tag inside the brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tag {
    Status,
    Request,
    Done,
    Escalate,
    Acknowledged,
    Approved,
    Denied,
    Escalated,
    Expired,
}

impl Tag {
    const ALL: [(Tag, &'static str); 9] = [
        (Tag::Status, "STATUS"),
        (Tag::Request, "REQUEST"),
        (Tag::Done, "DONE"),
        (Tag::Escalate, "ESCALATE"),
        (Tag::Acknowledged, "ACKNOWLEDGED"),
        (Tag::Approved, "APPROVED"),
        (Tag::Denied, "DENIED"),
        (Tag::Escalated, "ESCALATED"),
        (Tag::Expired, "EXPIRED"),
    ];

    pub fn as_str(self) -> &'static str {
        Tag::ALL
            .iter()
            .find(|(t, _)| *t == self)
            .map(|(_, s)| *s)
            .unwrap_or("?")
    }
}

/// One parsed protocol line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub tag: Tag,
    /// The word after the colon: `run_tests`, `investigation`, `scope_expansion`.
    pub action: String,
    /// `run:<id>`, required on executor lines.
    pub run: Option<u64>,
    /// `req:<id>`, on Eagle's answers.
    pub request: Option<u64>,
    /// The rest of the line.
    pub body: String,
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}: {}]", self.tag.as_str(), self.action)?;
        if let Some(run) = self.run {
            write!(f, " run:{run}")?;
        }
        if let Some(request) = self.request {
            write!(f, " req:{request}")?;
        }
        if !self.body.is_empty() {
            write!(f, " {}", self.body)?;
        }
        Ok(())
    }
}

impl Tag {
    /// Whether workers may write this tag (the others are Eagle's answers).
    pub fn is_worker_tag(self) -> bool {
        matches!(
            self,
            Tag::Status | Tag::Request | Tag::Done | Tag::Escalate | Tag::Acknowledged
        )
    }
}

/// Why a line that looks like a protocol line is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("no closing ']'")]
    Unclosed,
    #[error("no ':' between the tag and the action")]
    NoColon,
    #[error("unknown tag {0:?}")]
    UnknownTag(String),
    #[error("the action {0:?} is not lower case letters, digits and '_'")]
    BadAction(String),
    #[error("{0:?} is not a valid id")]
    BadId(String),
}

const MAX_ACTION_CHARS: usize = 64;

/// Parses one line. `None`: not a protocol line at all (does not start with
/// `[` followed by an upper-case tag). `Some(Err)`: looks like one, is not.
pub fn parse_line(line: &str) -> Option<Result<Line, Malformed>> {
    let line = line.trim();
    let inner = line.strip_prefix('[')?;
    if !inner.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    Some(parse_tagged(inner))
}

fn parse_tagged(inner: &str) -> Result<Line, Malformed> {
    let close = inner.find(']').ok_or(Malformed::Unclosed)?;
    let head = &inner[..close];
    let (tag_text, action) = head.split_once(':').ok_or(Malformed::NoColon)?;
    let tag = Tag::ALL
        .iter()
        .find(|(_, name)| *name == tag_text.trim())
        .map(|(tag, _)| *tag)
        .ok_or_else(|| Malformed::UnknownTag(tag_text.trim().to_string()))?;
    let action = action.trim();
    let action_ok = !action.is_empty()
        && action.len() <= MAX_ACTION_CHARS
        && action
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !action_ok {
        return Err(Malformed::BadAction(action.to_string()));
    }
    let mut rest = inner[close + 1..].trim_start();
    let mut run = None;
    let mut request = None;
    loop {
        let (word, after) = match rest.split_once(char::is_whitespace) {
            Some((word, after)) => (word, after.trim_start()),
            None => (rest, ""),
        };
        if let Some(id) = word.strip_prefix("run:") {
            if run.is_some() {
                break;
            }
            run = Some(parse_id(id)?);
        } else if let Some(id) = word.strip_prefix("req:") {
            if request.is_some() {
                break;
            }
            request = Some(parse_id(id)?);
        } else {
            break;
        }
        rest = after;
    }
    Ok(Line {
        tag,
        action: action.to_string(),
        run,
        request,
        body: rest.trim_end().to_string(),
    })
}

fn parse_id(text: &str) -> Result<u64, Malformed> {
    text.parse::<u64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| Malformed::BadId(text.to_string()))
}

/// Parses every line of a message: the protocol lines, and how many lines
/// looked like protocol lines but were malformed.
pub fn parse_message(content: &str) -> (Vec<Line>, usize) {
    let mut lines = Vec::new();
    let mut malformed = 0;
    for line in content.lines() {
        match parse_line(line) {
            Some(Ok(parsed)) => lines.push(parsed),
            Some(Err(_)) => malformed += 1,
            None => {}
        }
    }
    (lines, malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(line: &str) -> String {
        match parse_line(line) {
            None => "none".into(),
            Some(Ok(l)) => format!(
                "{:?} {} run={:?} req={:?} body={:?}",
                l.tag, l.action, l.run, l.request, l.body
            ),
            Some(Err(e)) => format!("malformed: {e}"),
        }
    }

    #[test]
    fn table() {
        let cases = [
            (
                "[STATUS: investigation] run:42 Analysing bug GID 123456...",
                "Status investigation run=Some(42) req=None body=\"Analysing bug GID 123456...\"",
            ),
            (
                "[REQUEST: run_tests] run:42 Scheme: macOS UI Tests CI",
                "Request run_tests run=Some(42) req=None body=\"Scheme: macOS UI Tests CI\"",
            ),
            (
                "[ESCALATE: scope_expansion] run:42 Found unrelated issue",
                "Escalate scope_expansion run=Some(42) req=None body=\"Found unrelated issue\"",
            ),
            (
                "[APPROVED: run_tests] run:42 req:7 (policy: default-approval)",
                "Approved run_tests run=Some(42) req=Some(7) body=\"(policy: default-approval)\"",
            ),
            (
                "  [DONE: pr_ready] run:3  ",
                "Done pr_ready run=Some(3) req=None body=\"\"",
            ),
            (
                "[REQUEST: merge_pr]",
                "Request merge_pr run=None req=None body=\"\"",
            ),
            (
                "[REQUEST: merge_pr] PR #1 run:4",
                "Request merge_pr run=None req=None body=\"PR #1 run:4\"",
            ),
            (
                "[REQUEST: Merge PR] run:1",
                "malformed: the action \"Merge PR\" is not lower case letters, digits and '_'",
            ),
            (
                "[REQUEST run_tests] run:1",
                "malformed: no ':' between the tag and the action",
            ),
            ("[REQUEST: run_tests run:1", "malformed: no closing ']'"),
            (
                "[PLEASE: run_tests] run:1",
                "malformed: unknown tag \"PLEASE\"",
            ),
            (
                "[REQUEST: run_tests] run:abc",
                "malformed: \"abc\" is not a valid id",
            ),
            (
                "[REQUEST: run_tests] run:0",
                "malformed: \"0\" is not a valid id",
            ),
            (
                "[REQUEST: run_tests] run:99999999999999999999999",
                "malformed: \"99999999999999999999999\" is not a valid id",
            ),
            ("[link](http://x)", "none"),
            ("plain text", "none"),
            ("", "none"),
            ("[", "none"),
        ];
        for (input, want) in cases {
            assert_eq!(show(input), want, "input: {input:?}");
        }
    }

    #[test]
    fn messages_count_malformed_lines() {
        let (lines, malformed) =
            parse_message("[STATUS: a] run:1 x\nhello\n[REQUEST: b run:1\n[DONE: c] run:1");
        assert_eq!(lines.len(), 2);
        assert_eq!(malformed, 1);
        assert_eq!(lines[1].to_string(), "[DONE: c] run:1");
    }

    #[test]
    fn never_panics() {
        let alphabet: Vec<char> = "[]: runeq0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_ж🦅\n"
            .chars()
            .collect();
        let mut rng = fastrand::Rng::with_seed(42);
        for _ in 0..20_000 {
            let len = rng.usize(0..40);
            let text: String = (0..len)
                .map(|_| alphabet[rng.usize(..alphabet.len())])
                .collect();
            let _ = parse_message(&text);
        }
    }
}
