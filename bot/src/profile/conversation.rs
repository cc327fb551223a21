//! `[conversation]` (the optional language backend Eagle answers questions
//! with) and `[digest]` (the owner's daily summary): read and checked once,
//! here.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

use super::ProfileError;
use super::field::{Origins, duration};

/// The longest persona file read as the system prompt.
pub const MAX_PERSONA_BYTES: u64 = 32 * 1024;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConversation {
    pub backend: Option<String>,
    pub url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub timeout: Option<String>,
    pub max_tokens: Option<i64>,
    pub max_answer_chars: Option<i64>,
    pub max_tool_rounds: Option<i64>,
    pub user_tokens_per_day: Option<i64>,
    pub tokens_per_day: Option<i64>,
    pub cost_per_day_usd: Option<f64>,
    pub input_usd_per_mtok: Option<f64>,
    pub output_usd_per_mtok: Option<f64>,
    pub confirm_within: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDigest {
    pub at: Option<String>,
    pub utc_offset: Option<String>,
    pub channel: Option<String>,
    pub topic: Option<String>,
}

/// Which HTTP API the backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// Anthropic's Messages API (`POST /v1/messages`).
    Anthropic,
    /// An OpenAI-compatible chat-completions endpoint (`POST /v1/chat/completions`):
    /// OpenAI, llama.cpp's server, vLLM, Ollama.
    OpenAi,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Anthropic => "anthropic",
            BackendKind::OpenAi => "openai",
        }
    }
}

/// The language backend and its limits (`[conversation]`).
#[derive(Debug, Clone)]
pub struct ConversationSettings {
    pub backend: BackendKind,
    /// The API's base URL (`https://api.anthropic.com`, `http://127.0.0.1:8080`).
    pub url: url::Url,
    pub model: String,
    /// From `api_key_env`; a local OpenAI-compatible server may need none.
    pub api_key: Option<SecretString>,
    /// One call to the backend, from the request to the whole answer.
    pub timeout: Duration,
    /// The most the model may write in one turn.
    pub max_tokens: u32,
    /// The longest answer posted; longer is cut.
    pub max_answer_chars: usize,
    /// Tool calls the model may make for one question before it must answer.
    pub max_tool_rounds: u32,
    /// Tokens (in and out) one person's questions may use per UTC day.
    pub user_tokens_per_day: u64,
    /// Tokens all questions may use per UTC day.
    pub tokens_per_day: u64,
    /// What all questions may cost per UTC day, in US dollars.
    pub cost_per_day_usd: f64,
    pub input_usd_per_mtok: f64,
    pub output_usd_per_mtok: f64,
    /// How long a proposed task waits for its asker's `!confirm`.
    pub confirm_within: Duration,
    /// The persona (the profile's `*.soul.md`), the system prompt's first part.
    pub persona: Option<String>,
}

impl ConversationSettings {
    /// What a call with these token counts cost.
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input_usd_per_mtok
            + output_tokens as f64 * self.output_usd_per_mtok)
            / 1_000_000.0
    }
}

/// The owner's daily digest (`[digest]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestSettings {
    /// Minutes after local midnight.
    pub at_minute: u32,
    /// The local time's offset from UTC, in minutes.
    pub utc_offset_minutes: i32,
    pub channel: String,
    pub topic: String,
}

pub(super) fn conversation(
    raw: RawConversation,
    origins: &Origins<'_>,
    persona: Option<&super::Persona>,
    env: &BTreeMap<String, String>,
) -> Result<Option<ConversationSettings>, ProfileError> {
    let backend = match raw.backend.as_deref().map(str::trim) {
        None | Some("" | "none") => return Ok(None),
        Some("anthropic") => BackendKind::Anthropic,
        Some("openai" | "openai-compatible") => BackendKind::OpenAi,
        Some(other) => {
            return Err(origins.error(
                "conversation.backend",
                None,
                format!("{other:?} is not a backend: use anthropic, openai (any OpenAI-compatible server) or none"),
            ));
        }
    };
    let default_url = match backend {
        BackendKind::Anthropic => "https://api.anthropic.com",
        BackendKind::OpenAi => "https://api.openai.com",
    };
    let text = raw.url.as_deref().map(str::trim).unwrap_or(default_url);
    let url = url::Url::parse(text).map_err(|e| {
        origins.error(
            "conversation.url",
            None,
            format!("{text:?} is not a URL ({e})"),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(origins.error(
            "conversation.url",
            None,
            format!("{text:?} is not an http(s) URL"),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(origins.error(
            "conversation.url",
            None,
            "holds credentials: give the key through api_key_env",
        ));
    }
    let model = raw.model.as_deref().map(str::trim).unwrap_or_default();
    if model.is_empty() {
        return Err(origins.error(
            "conversation.model",
            None,
            "is missing: the model the backend answers with",
        ));
    }
    let default_env = match backend {
        BackendKind::Anthropic => Some("ANTHROPIC_API_KEY"),
        BackendKind::OpenAi => None,
    };
    let key_env = raw
        .api_key_env
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .or(default_env);
    let api_key = match key_env {
        None => None,
        Some(var) => match env.get(var).map(|v| v.trim()) {
            Some(value) if !value.is_empty() => Some(SecretString::from(value.to_string())),
            _ => {
                return Err(origins.error(
                    "conversation.api_key_env",
                    None,
                    format!("the key is not set: put it in the environment variable {var}"),
                ));
            }
        },
    };
    let timeout = duration(raw.timeout.as_deref(), Duration::from_secs(30))
        .map_err(|why| origins.error("conversation.timeout", None, why))?;
    if timeout.is_zero() || timeout > Duration::from_secs(600) {
        return Err(origins.error(
            "conversation.timeout",
            None,
            "must be between 1 s and 10 min",
        ));
    }
    let count = |key: &str, value: Option<i64>, default: i64, max: i64| {
        let v = value.unwrap_or(default);
        if v < 1 || v > max {
            Err(origins.error(key, None, format!("must be between 1 and {max}")))
        } else {
            Ok(v)
        }
    };
    let price = |key: &str, value: Option<f64>, default: f64| {
        let v = value.unwrap_or(default);
        if !v.is_finite() || v < 0.0 {
            Err(origins.error(key, None, "must be a number of dollars, zero or more"))
        } else {
            Ok(v)
        }
    };
    let persona = match persona {
        None => None,
        Some(super::Persona::File(path)) => {
            Some(read_persona(path).map_err(|why| origins.error("persona", None, why))?)
        }
        Some(super::Persona::BuiltIn { text, .. }) => Some((*text).to_string()),
    };
    Ok(Some(ConversationSettings {
        backend,
        url,
        model: model.to_string(),
        api_key,
        timeout,
        max_tokens: count("conversation.max_tokens", raw.max_tokens, 1024, 64_000)? as u32,
        max_answer_chars: count(
            "conversation.max_answer_chars",
            raw.max_answer_chars,
            3000,
            20_000,
        )? as usize,
        max_tool_rounds: count("conversation.max_tool_rounds", raw.max_tool_rounds, 6, 20)? as u32,
        user_tokens_per_day: count(
            "conversation.user_tokens_per_day",
            raw.user_tokens_per_day,
            100_000,
            i64::MAX,
        )? as u64,
        tokens_per_day: count(
            "conversation.tokens_per_day",
            raw.tokens_per_day,
            1_000_000,
            i64::MAX,
        )? as u64,
        cost_per_day_usd: price("conversation.cost_per_day_usd", raw.cost_per_day_usd, 5.0)?,
        input_usd_per_mtok: price(
            "conversation.input_usd_per_mtok",
            raw.input_usd_per_mtok,
            3.0,
        )?,
        output_usd_per_mtok: price(
            "conversation.output_usd_per_mtok",
            raw.output_usd_per_mtok,
            15.0,
        )?,
        confirm_within: duration(
            raw.confirm_within.as_deref(),
            Duration::from_secs(24 * 3600),
        )
        .map_err(|why| origins.error("conversation.confirm_within", None, why))?,
        persona,
    }))
}

fn read_persona(path: &Path) -> Result<String, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.len() > MAX_PERSONA_BYTES {
        return Err(format!(
            "{} is {} bytes; a persona is at most {MAX_PERSONA_BYTES}",
            path.display(),
            meta.len()
        ));
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

pub(super) fn digest(
    raw: Option<RawDigest>,
    origins: &Origins<'_>,
    executor_channel: &str,
) -> Result<Option<DigestSettings>, ProfileError> {
    let Some(raw) = raw else { return Ok(None) };
    let Some(at) = raw.at.as_deref().map(str::trim).filter(|a| !a.is_empty()) else {
        return Err(origins.error(
            "digest.at",
            None,
            "is missing: the local time of the daily digest, as HH:MM",
        ));
    };
    let at_minute = hh_mm(at).filter(|m| *m < 24 * 60).ok_or_else(|| {
        origins.error("digest.at", None, format!("{at:?} is not a time as HH:MM"))
    })?;
    let utc_offset_minutes = match raw.utc_offset.as_deref().map(str::trim) {
        None | Some("" | "Z" | "UTC") => 0,
        Some(text) => {
            let (sign, rest) = match text.as_bytes().first() {
                Some(b'+') => (1, &text[1..]),
                Some(b'-') => (-1, &text[1..]),
                _ => (0, text),
            };
            match hh_mm(rest).filter(|m| sign != 0 && *m <= 14 * 60) {
                Some(m) => sign * m as i32,
                None => {
                    return Err(origins.error(
                        "digest.utc_offset",
                        None,
                        format!("{text:?} is not an offset such as +03:00 or -05:30"),
                    ));
                }
            }
        }
    };
    let channel = raw
        .channel
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| executor_channel.to_string());
    let topic = raw
        .topic
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "digest".into());
    Ok(Some(DigestSettings {
        at_minute,
        utc_offset_minutes,
        channel,
        topic,
    }))
}

fn hh_mm(text: &str) -> Option<u32> {
    let (h, m) = text.split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (m < 60).then_some(h * 60 + m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_times_and_offsets() {
        assert_eq!(hh_mm("09:30"), Some(570));
        assert_eq!(hh_mm("9:05"), Some(545));
        assert_eq!(hh_mm("9:5"), None);
        assert_eq!(hh_mm("x:00"), None);
        assert_eq!(hh_mm("10:60"), None);
    }
}
