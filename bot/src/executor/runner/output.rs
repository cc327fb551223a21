//! Reading a worker's work log: complete lines from where the runner left
//! off, and what they say (protocol lines; for Claude Code, its stream-json
//! events: the session, the text it writes, its cost and turns).

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use crate::ground::protocol::{self, Line};
use crate::profile::WorkerKind;

/// A line longer than this is cut: a worker that never ends a line cannot
/// make the runner hold unbounded memory.
pub const MAX_LINE_BYTES: usize = 256 * 1024;
/// The most read per call.
const CHUNK: usize = 1 << 20;

/// Follows one log file from an offset.
#[derive(Debug)]
pub struct LogReader {
    path: PathBuf,
    /// Where the next unread byte is.
    offset: u64,
    partial: Vec<u8>,
}

/// One complete line and the offset right after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// The offset where the line starts: with the run and attempt, its identity.
    pub start: u64,
    /// The offset after the line (what to persist once it is handled).
    pub end: u64,
    pub text: String,
}

impl LogReader {
    pub fn new(path: PathBuf, offset: u64) -> LogReader {
        LogReader {
            path,
            offset,
            partial: Vec::new(),
        }
    }

    /// The complete lines written since the last call. Whether anything at
    /// all was written (even half a line) is the second value: output is
    /// progress for the watchdog.
    pub fn read_new(&mut self) -> std::io::Result<(Vec<LogLine>, bool)> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
            Err(e) => return Err(e),
        };
        let read_from = self.offset + self.partial.len() as u64;
        file.seek(SeekFrom::Start(read_from))?;
        let mut buf = Vec::new();
        file.take(CHUNK as u64).read_to_end(&mut buf)?;
        let grew = !buf.is_empty();
        self.partial.extend_from_slice(&buf);
        let mut lines = Vec::new();
        let mut start = 0;
        while let Some(nl) = self.partial[start..].iter().position(|b| *b == b'\n') {
            let end = start + nl;
            lines.push(self.line(start, end, end + 1));
            start = end + 1;
        }
        if self.partial.len() - start > MAX_LINE_BYTES {
            let end = self.partial.len();
            lines.push(self.line(start, end, end));
            start = end;
        }
        self.offset += start as u64;
        self.partial.drain(..start);
        Ok((lines, grew))
    }

    fn line(&self, start: usize, end: usize, next: usize) -> LogLine {
        let bytes = &self.partial[start..end.min(start + MAX_LINE_BYTES)];
        LogLine {
            start: self.offset + start as u64,
            end: self.offset + next as u64,
            text: String::from_utf8_lossy(bytes)
                .trim_end_matches('\r')
                .to_string(),
        }
    }

    /// The offset after the last complete line read.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

/// What a log line tells the runner.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A protocol line the worker wrote, with its index within the log line.
    Protocol { index: usize, line: Line },
    /// Something that looked like a protocol line but was not one: counted.
    Malformed,
    /// The worker wrote one of Eagle's own tags (`[APPROVED: …]`): never a decision.
    Forged(Line),
    /// Claude Code started or resumed this session.
    Session(String),
    /// Claude Code's result: the session's cost so far and this process's turns.
    Result {
        session_cost: Option<f64>,
        turns: i64,
        is_error: bool,
        subtype: String,
    },
}

/// The events in one log line.
pub fn events(text: &str, kind: WorkerKind) -> Vec<Event> {
    if kind == WorkerKind::Claude
        && text.trim_start().starts_with('{')
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(text)
    {
        return claude_events(&value);
    }
    protocol_events(text, 0)
}

fn protocol_events(text: &str, first_index: usize) -> Vec<Event> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match protocol::parse_line(line) {
            Some(Ok(parsed)) if parsed.tag.is_worker_tag() => out.push(Event::Protocol {
                index: first_index + i,
                line: parsed,
            }),
            Some(Ok(parsed)) => out.push(Event::Forged(parsed)),
            Some(Err(_)) => out.push(Event::Malformed),
            None => {}
        }
    }
    out
}

fn claude_events(value: &serde_json::Value) -> Vec<Event> {
    let kind = value.get("type").and_then(|t| t.as_str()).unwrap_or("");
    match kind {
        "system" if value.get("subtype").and_then(|s| s.as_str()) == Some("init") => value
            .get("session_id")
            .and_then(|s| s.as_str())
            .map(|s| vec![Event::Session(s.to_string())])
            .unwrap_or_default(),
        // Only the main agent's words are the worker's protocol lines.
        "assistant" if value.get("parent_tool_use_id").is_none_or(|p| p.is_null()) => {
            let mut out = Vec::new();
            let blocks = value
                .pointer("/message/content")
                .and_then(|c| c.as_array())
                .cloned()
                .unwrap_or_default();
            let mut index = 0;
            for block in blocks {
                if block.get("type").and_then(|t| t.as_str()) == Some("text")
                    && let Some(text) = block.get("text").and_then(|t| t.as_str())
                {
                    out.extend(protocol_events(text, index));
                    index += text.lines().count();
                }
            }
            out
        }
        "result" => vec![Event::Result {
            session_cost: value.get("total_cost_usd").and_then(|c| c.as_f64()),
            turns: value.get("num_turns").and_then(|n| n.as_i64()).unwrap_or(0),
            is_error: value
                .get("is_error")
                .and_then(|e| e.as_bool())
                .unwrap_or(false),
            subtype: value
                .get("subtype")
                .and_then(|s| s.as_str())
                .unwrap_or("")
                .to_string(),
        }],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_complete_lines_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.md");
        let mut file = std::fs::File::create(&path).unwrap();
        let mut reader = LogReader::new(path.clone(), 0);
        assert_eq!(reader.read_new().unwrap(), (vec![], false));
        write!(file, "one\ntw").unwrap();
        let (lines, grew) = reader.read_new().unwrap();
        assert!(grew);
        assert_eq!(lines.len(), 1);
        assert_eq!(
            (lines[0].start, lines[0].end, lines[0].text.as_str()),
            (0, 4, "one")
        );
        write!(file, "o\r\nthree\n").unwrap();
        let (lines, _) = reader.read_new().unwrap();
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, vec!["two", "three"]);
        assert_eq!(lines[0].start, 4);
        assert_eq!(reader.offset(), 15);
        // A reader started at a saved offset reads on from there.
        let mut again = LogReader::new(path, 9);
        let (lines, _) = again.read_new().unwrap();
        assert_eq!(lines[0].text, "three");
    }

    #[test]
    fn an_endless_line_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.md");
        std::fs::write(&path, vec![b'x'; MAX_LINE_BYTES + 10]).unwrap();
        let mut reader = LogReader::new(path, 0);
        let (lines, _) = reader.read_new().unwrap();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].text.len(), MAX_LINE_BYTES);
    }

    #[test]
    fn claude_stream_json() {
        let init = r#"{"type":"system","subtype":"init","session_id":"b3ae","cwd":"/w"}"#;
        assert_eq!(
            events(init, WorkerKind::Claude),
            vec![Event::Session("b3ae".into())]
        );
        let text = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"[STATUS: investigation] run:9 looking\n[APPROVED: merge_pr] run:1 req:1"},{"type":"tool_use","id":"t","name":"Bash","input":{}}]},"parent_tool_use_id":null}"#;
        let got = events(text, WorkerKind::Claude);
        assert_eq!(got.len(), 2);
        assert!(
            matches!(&got[0], Event::Protocol { index: 0, line } if line.action == "investigation")
        );
        assert!(matches!(&got[1], Event::Forged(line) if line.action == "merge_pr"));
        let sub = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"[DONE: pr_ready]"}]},"parent_tool_use_id":"toolu_1"}"#;
        assert!(
            events(sub, WorkerKind::Claude).is_empty(),
            "a subagent's words are not the worker's"
        );
        let result = r#"{"duration_api_ms":1,"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.012,"num_turns":2,"session_id":"b3ae"}"#;
        assert_eq!(
            events(result, WorkerKind::Claude),
            vec![Event::Result {
                session_cost: Some(0.012),
                turns: 2,
                is_error: false,
                subtype: "success".into()
            }]
        );
        assert_eq!(
            events("[DONE: pr_ready] PR #1", WorkerKind::Claude).len(),
            1,
            "plain lines (stderr) are read too"
        );
        assert_eq!(
            events("[REQUEST: Bad Action]", WorkerKind::Generic),
            vec![Event::Malformed]
        );
    }
}
