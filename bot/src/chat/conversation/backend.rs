//! The language backends' HTTP APIs: Anthropic's Messages API and the
//! OpenAI-compatible chat completions that OpenAI, llama.cpp's server, vLLM
//! and Ollama serve. One call is one turn: the conversation so far and the
//! tools in, the model's text and tool calls out, with the tokens it used.
//!
//! The only code that knows those wire formats. One attempt per call, never
//! a retry here: a 429's `retry-after` is handed up, so the loop pauses the
//! backend instead of storming it.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::profile::{BackendKind, ConversationSettings};

/// Anthropic's API version header.
const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The longest answer body read.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// The longest wait a `retry-after` may ask for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// A tool the model may call: a name, what it does, its input's JSON schema.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub schema: Value,
}

/// One tool call the model made.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// What a tool answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub id: String,
    pub content: String,
    pub is_error: bool,
}

/// One message of the conversation, independent of the wire format.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    User(String),
    Assistant { text: String, calls: Vec<ToolCall> },
    Results(Vec<ToolResult>),
}

/// The model's turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Why a call gave no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("rate-limited (HTTP 429)")]
    RateLimited { retry_after: Option<Duration> },
    #[error("HTTP {status}: {message}")]
    Status { status: u16, message: String },
    #[error("an answer that is not the API's JSON: {0}")]
    Garbage(String),
    #[error("cannot reach it: {0}")]
    Network(String),
}

/// A configured backend.
#[derive(Debug, Clone)]
pub struct Backend {
    kind: BackendKind,
    url: String,
    model: String,
    key: Option<SecretString>,
    max_tokens: u32,
    timeout: Duration,
    http: reqwest::Client,
}

impl Backend {
    pub fn new(settings: &ConversationSettings) -> Result<Backend, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(concat!("eagle/", env!("CARGO_PKG_VERSION")))
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Backend {
            kind: settings.backend,
            url: endpoint(settings.backend, &settings.url),
            model: settings.model.clone(),
            key: settings.api_key.clone(),
            max_tokens: settings.max_tokens,
            timeout: settings.timeout,
            http,
        })
    }

    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// One turn of the model.
    pub async fn turn(
        &self,
        system: &str,
        turns: &[Turn],
        tools: &[ToolSpec],
    ) -> Result<Reply, BackendError> {
        let body = match self.kind {
            BackendKind::Anthropic => {
                anthropic_body(&self.model, self.max_tokens, system, turns, tools)
            }
            BackendKind::OpenAi => openai_body(&self.model, self.max_tokens, system, turns, tools),
        };
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        match (self.kind, &self.key) {
            (BackendKind::Anthropic, key) => {
                headers.insert(
                    "anthropic-version",
                    HeaderValue::from_static(ANTHROPIC_VERSION),
                );
                if let Some(key) = key {
                    let mut value = HeaderValue::from_str(key.expose_secret()).map_err(|_| {
                        BackendError::Network("the API key is not a header value".into())
                    })?;
                    value.set_sensitive(true);
                    headers.insert("x-api-key", value);
                }
            }
            (BackendKind::OpenAi, Some(key)) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret()))
                    .map_err(|_| {
                    BackendError::Network("the API key is not a header value".into())
                })?;
                value.set_sensitive(true);
                headers.insert(reqwest::header::AUTHORIZATION, value);
            }
            (BackendKind::OpenAi, None) => {}
        }
        let call = async {
            let response = self
                .http
                .post(&self.url)
                .headers(headers)
                .body(body.to_string())
                .send()
                .await
                .map_err(|e| self.transport_error(&e))?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            let bytes = read_capped(response)
                .await
                .map_err(|e| self.transport_error(&e))?;
            if status.as_u16() == 429 {
                return Err(BackendError::RateLimited { retry_after });
            }
            if !status.is_success() {
                return Err(BackendError::Status {
                    status: status.as_u16(),
                    message: error_message(&bytes),
                });
            }
            let value: Value = serde_json::from_slice(&bytes)
                .map_err(|e| BackendError::Garbage(format!("not JSON ({e})")))?;
            match self.kind {
                BackendKind::Anthropic => anthropic_reply(&value),
                BackendKind::OpenAi => openai_reply(&value),
            }
        };
        // The client's timeout covers the request; this bounds the whole turn.
        match tokio::time::timeout(self.timeout + Duration::from_millis(250), call).await {
            Ok(result) => result,
            Err(_) => Err(BackendError::Timeout(self.timeout)),
        }
    }

    fn transport_error(&self, error: &reqwest::Error) -> BackendError {
        if error.is_timeout() {
            BackendError::Timeout(self.timeout)
        } else {
            // Without the URL: it is the profile's, and says nothing new.
            BackendError::Network(error.without_url_ref().to_string())
        }
    }
}

trait WithoutUrl {
    fn without_url_ref(&self) -> String;
}

impl WithoutUrl for reqwest::Error {
    fn without_url_ref(&self) -> String {
        let mut text = self.to_string();
        if let Some(url) = self.url() {
            text = text.replace(url.as_str(), "the backend");
        }
        text
    }
}

async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_BODY.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if room <= chunk.len() {
            break;
        }
    }
    Ok(body)
}

/// The API's own error message, if it sent one (both APIs: `error.message`).
fn error_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .map(|m| crate::ground::text::one_line(&m, 200))
        .unwrap_or_else(|| "no error message".into())
}

fn parse_retry_after(text: &str) -> Option<Duration> {
    let text = text.trim();
    let wait = match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => Duration::from_secs_f64(secs),
        _ => {
            let at = httpdate_seconds(text)?;
            let now = chrono::Utc::now().timestamp();
            Duration::from_secs(u64::try_from(at - now).unwrap_or(0))
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`) as UNIX seconds.
fn httpdate_seconds(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc2822(text)
        .ok()
        .map(|t| t.timestamp())
}

fn endpoint(kind: BackendKind, url: &url::Url) -> String {
    let base = url.as_str().trim_end_matches('/');
    match kind {
        BackendKind::Anthropic if base.ends_with("/v1") => format!("{base}/messages"),
        BackendKind::Anthropic => format!("{base}/v1/messages"),
        // OpenAI-compatible servers are often named by their `/v1` base.
        BackendKind::OpenAi if base.ends_with("/v1") => format!("{base}/chat/completions"),
        BackendKind::OpenAi => format!("{base}/v1/chat/completions"),
    }
}

fn anthropic_body(
    model: &str,
    max_tokens: u32,
    system: &str,
    turns: &[Turn],
    tools: &[ToolSpec],
) -> Value {
    let messages: Vec<Value> = turns
        .iter()
        .map(|turn| match turn {
            Turn::User(text) => json!({"role": "user", "content": text}),
            Turn::Assistant { text, calls } => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                for call in calls {
                    content.push(json!({
                        "type": "tool_use", "id": call.id, "name": call.name, "input": call.input
                    }));
                }
                json!({"role": "assistant", "content": content})
            }
            Turn::Results(results) => json!({
                "role": "user",
                "content": results.iter().map(|r| json!({
                    "type": "tool_result",
                    "tool_use_id": r.id,
                    "content": r.content,
                    "is_error": r.is_error,
                })).collect::<Vec<_>>(),
            }),
        })
        .collect();
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.schema}))
        .collect();
    json!({
        "model": model,
        "max_tokens": max_tokens,
        "system": system,
        "messages": messages,
        "tools": tools,
    })
}

fn anthropic_reply(value: &Value) -> Result<Reply, BackendError> {
    let garbage = |what: &str| BackendError::Garbage(what.to_string());
    if value["type"] != "message" || value["role"] != "assistant" {
        return Err(garbage("not an assistant message"));
    }
    let content = value["content"]
        .as_array()
        .ok_or_else(|| garbage("no content"))?;
    let mut reply = Reply::default();
    for block in content {
        match block["type"].as_str() {
            Some("text") => {
                let text = block["text"]
                    .as_str()
                    .ok_or_else(|| garbage("a text block without text"))?;
                if !reply.text.is_empty() {
                    reply.text.push('\n');
                }
                reply.text.push_str(text);
            }
            Some("tool_use") => {
                let id = block["id"]
                    .as_str()
                    .ok_or_else(|| garbage("a tool call without an id"))?;
                let name = block["name"]
                    .as_str()
                    .ok_or_else(|| garbage("a tool call without a name"))?;
                reply.calls.push(ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    input: block.get("input").cloned().unwrap_or(Value::Null),
                });
            }
            // Thinking and other blocks carry nothing to post.
            _ => {}
        }
    }
    let usage = &value["usage"];
    reply.input_tokens = usage["input_tokens"]
        .as_u64()
        .ok_or_else(|| garbage("no usage"))?;
    reply.output_tokens = usage["output_tokens"]
        .as_u64()
        .ok_or_else(|| garbage("no usage"))?;
    Ok(reply)
}

fn openai_body(
    model: &str,
    max_tokens: u32,
    system: &str,
    turns: &[Turn],
    tools: &[ToolSpec],
) -> Value {
    let mut messages = vec![json!({"role": "system", "content": system})];
    for turn in turns {
        match turn {
            Turn::User(text) => messages.push(json!({"role": "user", "content": text})),
            Turn::Assistant { text, calls } => {
                let mut message = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    message["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.input.to_string()},
                            })
                        })
                        .collect();
                }
                messages.push(message);
            }
            Turn::Results(results) => {
                for r in results {
                    messages
                        .push(json!({"role": "tool", "tool_call_id": r.id, "content": r.content}));
                }
            }
        }
    }
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.schema},
            })
        })
        .collect();
    json!({
        "model": model,
        "max_tokens": max_tokens,
        "messages": messages,
        "tools": tools,
    })
}

fn openai_reply(value: &Value) -> Result<Reply, BackendError> {
    let garbage = |what: &str| BackendError::Garbage(what.to_string());
    let message = &value["choices"]
        .as_array()
        .and_then(|c| c.first())
        .ok_or_else(|| garbage("no choices"))?["message"];
    if !message.is_object() {
        return Err(garbage("a choice without a message"));
    }
    let mut reply = Reply {
        text: message["content"].as_str().unwrap_or_default().to_string(),
        ..Reply::default()
    };
    if let Some(calls) = message["tool_calls"].as_array() {
        for call in calls {
            let id = call["id"]
                .as_str()
                .ok_or_else(|| garbage("a tool call without an id"))?;
            let function = &call["function"];
            let name = function["name"]
                .as_str()
                .ok_or_else(|| garbage("a tool call without a name"))?;
            // The arguments are a JSON text; a model may write bad JSON.
            let input = function["arguments"]
                .as_str()
                .map(|a| serde_json::from_str(a).unwrap_or(Value::String(a.to_string())))
                .unwrap_or(Value::Null);
            reply.calls.push(ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                input,
            });
        }
    }
    let usage = &value["usage"];
    reply.input_tokens = usage["prompt_tokens"].as_u64().unwrap_or(0);
    reply.output_tokens = usage["completion_tokens"].as_u64().unwrap_or(0);
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_accept_a_base_with_or_without_v1() {
        let url = |s: &str| url::Url::parse(s).unwrap();
        assert_eq!(
            endpoint(BackendKind::OpenAi, &url("http://127.0.0.1:8080/v1")),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert_eq!(
            endpoint(BackendKind::OpenAi, &url("http://127.0.0.1:8080")),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert_eq!(
            endpoint(BackendKind::Anthropic, &url("https://api.anthropic.com/")),
            "https://api.anthropic.com/v1/messages"
        );
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date_is_capped() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn replies_are_read_from_both_formats() {
        let anthropic = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {"id": 2}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5}
        });
        let reply = anthropic_reply(&anthropic).unwrap();
        assert_eq!(reply.text, "Looking.");
        assert_eq!(reply.calls[0].input, json!({"id": 2}));
        assert_eq!((reply.input_tokens, reply.output_tokens), (10, 5));
        let openai = json!({
            "id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "run", "arguments": "{\"id\": 2}"}}]
            }}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
        });
        let reply = openai_reply(&openai).unwrap();
        assert_eq!(reply.calls[0].name, "run");
        assert_eq!(reply.calls[0].input, json!({"id": 2}));
        assert!(anthropic_reply(&json!({"type": "error"})).is_err());
        assert!(openai_reply(&json!({"choices": []})).is_err());
    }
}
