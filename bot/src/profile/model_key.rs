//! The model key of a confined Claude Code worker: Eagle keeps it, the
//! worker gets a placeholder in its place, and the worker's egress proxy
//! puts the real key into each call of the model API it lets through.
//!
//! Read from Eagle's environment once, when the profile is validated:
//! `ANTHROPIC_API_KEY`, else `ANTHROPIC_AUTH_TOKEN`. Listing either in
//! `runner.worker_env` is not needed, and changes nothing: a confined
//! worker gets the placeholder under the name the key was found by, and
//! never the other. An unconfined worker (`mode = "off"`) has nothing
//! between it and the network to set the key for it: it gets the key it
//! is given in `worker_env`, as before.

use std::collections::BTreeMap;

use secrecy::SecretString;

use super::WorkerEnv;

/// What a worker holds instead of the model key: enough for its CLI to
/// start, worth nothing anywhere.
pub const PLACEHOLDER_KEY: &str = "eagle-placeholder-key";

/// Where the key is read from, in order: the name and how the model API
/// takes it.
const KEY_NAMES: [&str; 2] = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"];

/// Claude Code's model API unless the worker is given another.
const ANTHROPIC_URL: &str = "https://api.anthropic.com";

/// The model API of a confined Claude Code worker, and its key. `Debug`
/// shows no key.
#[derive(Clone)]
pub struct ModelAccess {
    /// `ANTHROPIC_BASE_URL` as the worker is given it, else Anthropic's.
    pub url: url::Url,
    /// The variable the key was read from (and the worker's placeholder is
    /// set in): `ANTHROPIC_API_KEY` (sent as `x-api-key`) or
    /// `ANTHROPIC_AUTH_TOKEN` (`Authorization: Bearer`).
    pub name: &'static str,
    pub key: SecretString,
}

impl std::fmt::Debug for ModelAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelAccess")
            .field("url", &self.url.as_str())
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ModelAccess {
    /// Whether the key goes as `Authorization: Bearer` (else `x-api-key`).
    pub fn bearer(&self) -> bool {
        self.name == "ANTHROPIC_AUTH_TOKEN"
    }
}

/// The model key found in Eagle's environment `env` for a worker whose
/// model API is at `model_url` (else Anthropic's); with it, `worker`'s
/// share of the environment holds the placeholder in its place, and
/// neither model-key variable's value. `Ok(None)`: no key is set.
pub(super) fn hold_back(
    model_url: Option<&str>,
    env: &BTreeMap<String, String>,
    worker: &mut WorkerEnv,
) -> Result<Option<ModelAccess>, String> {
    let Some((name, key)) = KEY_NAMES.iter().find_map(|name| {
        let value = env.get(*name)?.trim();
        (!value.is_empty()).then(|| (*name, SecretString::from(value.to_string())))
    }) else {
        return Ok(None);
    };
    let text = model_url.unwrap_or(ANTHROPIC_URL);
    let url = url::Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| format!("ANTHROPIC_BASE_URL {text:?} is not an http(s) URL"))?;
    worker.replace(&KEY_NAMES, name, PLACEHOLDER_KEY);
    Ok(Some(ModelAccess { url, name, key }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret as _;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn values(worker: &WorkerEnv) -> Vec<(String, String)> {
        worker
            .values()
            .iter()
            .map(|(k, v)| (k.clone(), v.expose_secret().to_string()))
            .collect()
    }

    #[test]
    fn the_worker_gets_the_placeholder_and_eagle_keeps_the_key() {
        let e = env(&[
            ("ANTHROPIC_API_KEY", "sk-real"),
            ("ANTHROPIC_AUTH_TOKEN", "tok-real"),
            ("OTHER", "x"),
        ]);
        let mut worker = WorkerEnv::resolve(
            vec!["ANTHROPIC_AUTH_TOKEN".into(), "OTHER".into()],
            None,
            &e,
        );
        let access = hold_back(None, &e, &mut worker).unwrap().unwrap();
        assert_eq!(access.name, "ANTHROPIC_API_KEY");
        assert_eq!(access.key.expose_secret(), "sk-real");
        assert_eq!(access.url.as_str(), "https://api.anthropic.com/");
        assert!(!access.bearer());
        assert_eq!(
            values(&worker),
            vec![
                ("OTHER".to_string(), "x".to_string()),
                ("ANTHROPIC_API_KEY".to_string(), PLACEHOLDER_KEY.to_string()),
            ]
        );
        assert!(!format!("{access:?}").contains("sk-real"));
    }

    #[test]
    fn an_auth_token_is_held_back_the_same_way() {
        let e = env(&[
            ("ANTHROPIC_AUTH_TOKEN", "tok-real"),
            ("ANTHROPIC_API_KEY", " "),
        ]);
        let mut worker = WorkerEnv::resolve(vec!["ANTHROPIC_API_KEY".into()], None, &e);
        let access = hold_back(Some("http://127.0.0.1:4010"), &e, &mut worker)
            .unwrap()
            .unwrap();
        assert!(access.bearer());
        assert_eq!(access.url.as_str(), "http://127.0.0.1:4010/");
        assert_eq!(
            values(&worker),
            vec![(
                "ANTHROPIC_AUTH_TOKEN".to_string(),
                PLACEHOLDER_KEY.to_string()
            )]
        );
    }

    #[test]
    fn without_a_key_nothing_changes() {
        let e = env(&[("OTHER", "x")]);
        let mut worker = WorkerEnv::resolve(vec!["OTHER".into()], None, &e);
        assert!(hold_back(None, &e, &mut worker).unwrap().is_none());
        assert_eq!(
            values(&worker),
            vec![("OTHER".to_string(), "x".to_string())]
        );
        let e = env(&[("ANTHROPIC_API_KEY", "sk-real")]);
        let why = hold_back(Some("ftp://x"), &e, &mut worker).unwrap_err();
        assert!(why.contains("not an http(s) URL") && !why.contains("sk-real"));
    }
}
