//! A strict fake of the two language-model APIs Eagle's conversation
//! backend speaks, on one port: Anthropic's Messages API (`POST
//! /v1/messages`, as <https://docs.anthropic.com/en/api/messages> describes
//! it: `x-api-key`, `anthropic-version`, `model`, `max_tokens`, alternating
//! `messages` whose `tool_result` blocks answer the `tool_use` blocks of the
//! turn before, `tools` with an `input_schema`) and OpenAI's Chat Completions
//! (`POST /v1/chat/completions`: a bearer key, `model`, `messages` with
//! `system`/`user`/`assistant`/`tool` roles, a `tool` message for each
//! `tool_calls` entry of the assistant message before it, `tools` of type
//! `function`). Anything else is a violation, answered with the API's own
//! error shape.
//!
//! The "model" is a script: each [`Rule`] matches a question by a word in it
//! and plays its steps, one per assistant turn: call a tool, or say a text
//! whose `{/json/pointer}` placeholders are filled from the last tool result
//! (so an answer can only carry ids that Eagle's tools gave it). Faults
//! ([`LlmFault`]) replace the next answers: a hang, a 500, a 429 with
//! `retry-after`, a body that is not JSON.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use serde_json::{Value, json};

use crate::common::http::{Incoming, Reply, bearer, bind, serve};
use crate::common::hub::Hub;
use crate::common::journal::{
    CheckOnDrop, Journal, Journaled, RecordedRequest, assert_no_violations,
};

/// One step of a scripted answer.
#[derive(Debug, Clone)]
pub enum Step {
    /// Call a tool with this input.
    Call { tool: String, input: Value },
    /// Say this text; `{/pointer}` is replaced by that field of the last
    /// tool result (parsed as JSON), `{result}` by the whole result.
    Say(String),
}

/// A scripted answer for questions that contain `when` (case-insensitive).
#[derive(Debug, Clone)]
pub struct Rule {
    pub when: String,
    pub steps: Vec<Step>,
}

/// A fault for the next answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmFault {
    /// Accept the request and never answer.
    Hang,
    /// HTTP 500 with the API's error body.
    ServerError,
    /// HTTP 429 with `retry-after: <secs>`.
    RateLimited { retry_after_secs: u64 },
    /// HTTP 200 with a body that is not JSON.
    Garbage,
}

/// What one call to the fake carried.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCall {
    /// `anthropic` or `openai`.
    pub api: &'static str,
    /// The system prompt.
    pub system: String,
    /// The question (the first user message).
    pub question: String,
    /// The tool names offered.
    pub tools: Vec<String>,
    /// Tool results the request carried, in order.
    pub tool_results: Vec<String>,
}

struct State {
    key: Option<String>,
    rules: Vec<Rule>,
    faults: Vec<(LlmFault, usize)>,
    calls: Vec<LlmCall>,
    journal: Journal,
}

impl Journaled for State {
    fn journal(&self) -> &Journal {
        &self.journal
    }
}

/// The fake; cheap to clone.
#[derive(Clone)]
pub struct FakeLlm {
    hub: Arc<Hub<State>>,
    _check: Arc<CheckOnDrop<State>>,
}

impl FakeLlm {
    /// Starts the fake on 127.0.0.1; `key` is the API key it accepts (none:
    /// a local server that asks for none, OpenAI-compatible only).
    pub async fn start(key: Option<&str>) -> FakeLlm {
        let listener = bind("language backend").await;
        let addr = listener.local_addr().expect("local addr");
        let hub = Arc::new(Hub::new(
            State {
                key: key.map(str::to_string),
                rules: Vec::new(),
                faults: Vec::new(),
                calls: Vec::new(),
                journal: Journal::default(),
            },
            addr,
        ));
        serve(listener, Arc::clone(&hub), handle);
        FakeLlm {
            _check: Arc::new(CheckOnDrop {
                hub: Arc::clone(&hub),
                fake: "language backend",
            }),
            hub,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.hub.url()
    }

    /// Adds a scripted answer (the first matching rule wins).
    pub fn rule(&self, when: &str, steps: Vec<Step>) {
        self.hub.mutate(|s| {
            s.rules.push(Rule {
                when: when.to_lowercase(),
                steps,
            })
        });
    }

    /// The next `times` answers get `fault`.
    pub fn inject(&self, fault: LlmFault, times: usize) {
        self.hub.mutate(|s| s.faults.push((fault, times)));
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<LlmCall> {
        self.hub.read().calls.clone()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.hub.read().journal.requests.clone()
    }

    /// Waits until `check` holds on the calls; false after `timeout`.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&[LlmCall]) -> bool,
    ) -> bool {
        let hub = Arc::clone(&self.hub);
        self.hub
            .wait_until(timeout, || check(&hub.read().calls))
            .await
    }

    /// The violations seen so far.
    pub fn violations(&self) -> Vec<String> {
        self.hub.read().journal.violations.clone()
    }

    /// Panics if there were violations.
    pub fn assert_clean(&self) {
        assert_no_violations("language backend", &self.violations());
    }
}

async fn handle(hub: Arc<Hub<State>>, request: Request) -> Response {
    let mut incoming = Incoming::read(request).await;
    incoming.index = hub.mutate(|s| {
        s.journal
            .begin(&incoming.method, &incoming.path, &incoming.query)
    });
    let reply = hub.mutate(|s| answer(s, &incoming));
    let status = reply.status();
    hub.mutate(|s| s.journal.finish(incoming.index, status, false));
    reply.into_response().await
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    Anthropic,
    OpenAi,
}

fn error(api: Api, status: u16, kind: &str, message: &str) -> Reply {
    match api {
        Api::Anthropic => Reply::json(
            status,
            json!({"type": "error", "error": {"type": kind, "message": message}}),
        ),
        Api::OpenAi => Reply::json(
            status,
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
        ),
    }
}

fn answer(state: &mut State, incoming: &Incoming) -> Reply {
    let api = match (incoming.method.as_str(), incoming.path.as_str()) {
        ("POST", "/v1/messages") => Api::Anthropic,
        ("POST", "/v1/chat/completions") => Api::OpenAi,
        _ => {
            state
                .journal
                .violation(format!("{}: no such endpoint", incoming.what()));
            return Reply::json(404, json!({"error": {"message": "not found"}}));
        }
    };
    // Authentication first, as both APIs do.
    let authorised = match (api, &state.key) {
        (Api::Anthropic, Some(key)) => incoming.header("x-api-key") == Some(key.as_str()),
        (Api::Anthropic, None) => true,
        (Api::OpenAi, Some(key)) => bearer(&incoming.headers)
            .is_some_and(|(scheme, token)| scheme == "Bearer" && &token == key),
        (Api::OpenAi, None) => true,
    };
    if !authorised {
        state
            .journal
            .violation(format!("{}: a missing or wrong API key", incoming.what()));
        return error(api, 401, "authentication_error", "invalid x-api-key");
    }
    let mut problems = Vec::new();
    if !incoming
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/json"))
    {
        problems.push("content-type is not application/json".to_string());
    }
    if api == Api::Anthropic && incoming.header("anthropic-version").is_none() {
        problems.push("no anthropic-version header".to_string());
    }
    let body: Value = match serde_json::from_slice(&incoming.body) {
        Ok(v) => v,
        Err(e) => {
            problems.push(format!("the body is not JSON: {e}"));
            Value::Null
        }
    };
    let parsed = match api {
        Api::Anthropic => read_anthropic(&body, &mut problems),
        Api::OpenAi => read_openai(&body, &mut problems),
    };
    if !problems.is_empty() {
        let text = problems.join("; ");
        state
            .journal
            .violation(format!("{}: {text}", incoming.what()));
        return error(api, 400, "invalid_request_error", &text);
    }
    state.calls.push(parsed.call.clone());
    if let Some(fault) = take_fault(&mut state.faults) {
        return match fault {
            LlmFault::Hang => Reply::Hang,
            LlmFault::ServerError => error(api, 500, "api_error", "Internal server error"),
            LlmFault::RateLimited { retry_after_secs } => {
                let mut reply = error(
                    api,
                    429,
                    "rate_limit_error",
                    "Number of requests has exceeded your rate limit",
                );
                reply.add_headers(vec![("retry-after", retry_after_secs.to_string())]);
                reply
            }
            LlmFault::Garbage => Reply::Text {
                status: 200,
                content_type: "text/html",
                body: "<html><body>502 Bad Gateway</body></html>".into(),
            },
        };
    }
    let question = parsed.call.question.to_lowercase();
    let steps = state
        .rules
        .iter()
        .find(|r| question.contains(&r.when))
        .map(|r| r.steps.clone())
        .unwrap_or_else(|| vec![Step::Say("I do not know.".into())]);
    let step = steps
        .get(parsed.assistant_turns)
        .cloned()
        .unwrap_or_else(|| Step::Say("That is all I know.".into()));
    let input_tokens = (body.to_string().chars().count() / 4) as u64;
    let model = body["model"].as_str().unwrap_or_default().to_string();
    let n = state.journal.requests.len();
    match step {
        Step::Call { tool, input } => {
            let id = format!("call_{n}");
            let output_tokens = 10 + (input.to_string().len() / 4) as u64;
            match api {
                Api::Anthropic => Reply::json(
                    200,
                    json!({
                        "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
                        "content": [{"type": "tool_use", "id": id, "name": tool, "input": input}],
                        "stop_reason": "tool_use", "stop_sequence": null,
                        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
                    }),
                ),
                Api::OpenAi => Reply::json(
                    200,
                    json!({
                        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1_700_000_000 + n,
                        "model": model,
                        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                            "role": "assistant", "content": null,
                            "tool_calls": [{"id": id, "type": "function",
                                "function": {"name": tool, "arguments": input.to_string()}}],
                        }}],
                        "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                                  "total_tokens": input_tokens + output_tokens},
                    }),
                ),
            }
        }
        Step::Say(template) => {
            let text = fill(
                &template,
                parsed.call.tool_results.last().map(String::as_str),
            );
            let output_tokens = (text.chars().count() / 4 + 1) as u64;
            match api {
                Api::Anthropic => Reply::json(
                    200,
                    json!({
                        "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
                        "content": [{"type": "text", "text": text}],
                        "stop_reason": "end_turn", "stop_sequence": null,
                        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
                    }),
                ),
                Api::OpenAi => Reply::json(
                    200,
                    json!({
                        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1_700_000_000 + n,
                        "model": model,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                                  "total_tokens": input_tokens + output_tokens},
                    }),
                ),
            }
        }
    }
}

fn take_fault(faults: &mut Vec<(LlmFault, usize)>) -> Option<LlmFault> {
    let first = faults.first_mut()?;
    first.1 -= 1;
    let fault = first.0;
    if first.1 == 0 {
        faults.remove(0);
    }
    Some(fault)
}

/// `{/pointer}` from the last tool result's JSON, `{result}` the whole of it.
fn fill(template: &str, result: Option<&str>) -> String {
    let value: Value = result
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or(Value::Null);
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &rest[start + 1..start + end];
        if name == "result" {
            out.push_str(result.unwrap_or(""));
        } else if name.starts_with('/') {
            match value.pointer(name) {
                Some(Value::String(s)) => out.push_str(s),
                Some(Value::Null) | None => out.push('?'),
                Some(other) => out.push_str(&other.to_string()),
            }
        } else {
            out.push_str(&rest[start..start + end + 1]);
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out
}

struct Parsed {
    call: LlmCall,
    assistant_turns: usize,
}

fn tool_names(tools: &Value, api: Api, problems: &mut Vec<String>) -> Vec<String> {
    let Some(list) = tools.as_array() else {
        if !tools.is_null() {
            problems.push("tools is not an array".into());
        }
        return Vec::new();
    };
    let mut names = Vec::new();
    for tool in list {
        let (name, schema) = match api {
            Api::Anthropic => (&tool["name"], &tool["input_schema"]),
            Api::OpenAi => {
                if tool["type"] != "function" {
                    problems.push("a tool whose type is not function".into());
                }
                (&tool["function"]["name"], &tool["function"]["parameters"])
            }
        };
        match name.as_str() {
            Some(n)
                if !n.is_empty()
                    && n.len() <= 64
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
            {
                names.push(n.to_string())
            }
            _ => problems.push(format!(
                "a tool name that is not ^[a-zA-Z0-9_-]{{1,64}}$: {name}"
            )),
        }
        if schema["type"] != "object" && !(api == Api::OpenAi && schema.is_null()) {
            problems.push(format!("tool {name}: its schema is not of type object"));
        }
    }
    names
}

fn common_fields(body: &Value, problems: &mut Vec<String>) {
    if body["model"].as_str().is_none_or(str::is_empty) {
        problems.push("model is missing".into());
    }
}

fn read_anthropic(body: &Value, problems: &mut Vec<String>) -> Parsed {
    common_fields(body, problems);
    if body["max_tokens"].as_u64().is_none_or(|n| n < 1) {
        problems.push("max_tokens is missing or below 1".into());
    }
    let system = match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => {
            problems.push("system is neither a string nor text blocks".into());
            String::new()
        }
    };
    let tools = tool_names(&body["tools"], Api::Anthropic, problems);
    let mut question = String::new();
    let mut results = Vec::new();
    let mut assistant_turns = 0;
    let mut open_calls: Vec<String> = Vec::new();
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        problems.push("messages is missing or empty".into());
        return Parsed {
            call: LlmCall {
                api: "anthropic",
                system,
                question,
                tools,
                tool_results: results,
            },
            assistant_turns,
        };
    };
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if role != want {
            problems.push(format!(
                "messages[{i}] is {role:?}; the roles alternate, starting with user"
            ));
        }
        let blocks: Vec<Value> = match &message["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            _ => {
                problems.push(format!(
                    "messages[{i}].content is neither a string nor blocks"
                ));
                Vec::new()
            }
        };
        let mut answered = Vec::new();
        for block in &blocks {
            match block["type"].as_str() {
                Some("text") => {
                    if role == "user" && question.is_empty() {
                        question = block["text"].as_str().unwrap_or_default().to_string();
                    }
                }
                Some("tool_use") if role == "assistant" => {
                    match block["id"].as_str() {
                        Some(id) => open_calls.push(id.to_string()),
                        None => problems.push(format!("messages[{i}]: a tool_use without an id")),
                    }
                    if !block["input"].is_object() {
                        problems.push(format!(
                            "messages[{i}]: a tool_use whose input is not an object"
                        ));
                    }
                }
                Some("tool_result") if role == "user" => {
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    if !open_calls.iter().any(|c| c == id) {
                        problems.push(format!("messages[{i}]: a tool_result for {id:?}, which the turn before did not call"));
                    }
                    answered.push(id.to_string());
                    let content = match &block["content"] {
                        Value::String(s) => s.clone(),
                        Value::Array(a) => a
                            .iter()
                            .filter_map(|b| b["text"].as_str())
                            .collect::<Vec<_>>()
                            .join(""),
                        _ => String::new(),
                    };
                    results.push(content);
                }
                other => problems.push(format!(
                    "messages[{i}]: a {other:?} block in a {role} message"
                )),
            }
        }
        if role == "assistant" {
            assistant_turns += 1;
        } else {
            for id in open_calls.drain(..) {
                if !answered.contains(&id) {
                    problems.push(format!("messages[{i}]: tool_use {id:?} has no tool_result"));
                }
            }
        }
    }
    if messages.last().and_then(|m| m["role"].as_str()) != Some("user") {
        problems.push("the last message is not the user's".into());
    }
    Parsed {
        call: LlmCall {
            api: "anthropic",
            system,
            question,
            tools,
            tool_results: results,
        },
        assistant_turns,
    }
}

fn read_openai(body: &Value, problems: &mut Vec<String>) -> Parsed {
    common_fields(body, problems);
    if let Some(n) = body.get("max_tokens")
        && n.as_u64().is_none_or(|n| n < 1)
    {
        problems.push("max_tokens is not a positive integer".into());
    }
    let tools = tool_names(&body["tools"], Api::OpenAi, problems);
    let mut system = String::new();
    let mut question = String::new();
    let mut results = Vec::new();
    let mut assistant_turns = 0;
    let mut open_calls: Vec<String> = Vec::new();
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        problems.push("messages is missing or empty".into());
        return Parsed {
            call: LlmCall {
                api: "openai",
                system,
                question,
                tools,
                tool_results: results,
            },
            assistant_turns,
        };
    };
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if role != "tool" && !open_calls.is_empty() {
            problems.push(format!(
                "messages[{i}]: tool calls {open_calls:?} were not answered"
            ));
            open_calls.clear();
        }
        match role {
            "system" | "developer" => {
                system.push_str(message["content"].as_str().unwrap_or_default())
            }
            "user" => {
                if !message["content"].is_string() && !message["content"].is_array() {
                    problems.push(format!("messages[{i}]: a user message without content"));
                }
                if question.is_empty() {
                    question = message["content"].as_str().unwrap_or_default().to_string();
                }
            }
            "assistant" => {
                assistant_turns += 1;
                if let Some(calls) = message["tool_calls"].as_array() {
                    for call in calls {
                        if call["type"] != "function" {
                            problems.push(format!(
                                "messages[{i}]: a tool call whose type is not function"
                            ));
                        }
                        if !call["function"]["arguments"].is_string() {
                            problems.push(format!(
                                "messages[{i}]: tool call arguments are not a JSON string"
                            ));
                        }
                        match call["id"].as_str() {
                            Some(id) => open_calls.push(id.to_string()),
                            None => {
                                problems.push(format!("messages[{i}]: a tool call without an id"))
                            }
                        }
                    }
                } else if message["content"].is_null() {
                    problems.push(format!(
                        "messages[{i}]: an assistant message with neither content nor tool calls"
                    ));
                }
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                match open_calls.iter().position(|c| c == id) {
                    Some(at) => {
                        open_calls.remove(at);
                    }
                    None => problems.push(format!(
                        "messages[{i}]: a tool message for {id:?}, which was not called"
                    )),
                }
                results.push(message["content"].as_str().unwrap_or_default().to_string());
            }
            other => problems.push(format!("messages[{i}]: role {other:?}")),
        }
    }
    if !open_calls.is_empty() {
        problems.push(format!("tool calls {open_calls:?} were not answered"));
    }
    Parsed {
        call: LlmCall {
            api: "openai",
            system,
            question,
            tools,
            tool_results: results,
        },
        assistant_turns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_come_from_the_last_result() {
        let result = r#"{"run": 2, "waiting_on": "Alex", "requests": [{"request": 7}]}"#;
        assert_eq!(
            fill(
                "run {/run} waits on {/waiting_on} (req {/requests/0/request}) {x}",
                Some(result)
            ),
            "run 2 waits on Alex (req 7) {x}"
        );
        assert_eq!(fill("{/nothing}", None), "?");
    }

    #[test]
    fn an_unanswered_tool_use_is_a_violation() {
        let mut problems = Vec::new();
        read_anthropic(
            &json!({"model": "m", "max_tokens": 5, "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
                {"role": "user", "content": "no result"}
            ]}),
            &mut problems,
        );
        assert!(
            problems.iter().any(|p| p.contains("has no tool_result")),
            "{problems:?}"
        );
    }
}
