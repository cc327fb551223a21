//! The model API's gate: the worker holds a placeholder key, never the
//! real one; the proxy lets through only the calls its kind of worker
//! needs, each carrying the placeholder, and sends them on with the real
//! key. A prompt-injected agent can then neither read the key nor use the
//! model host for anything else: uploads (`/v1/files`), batches, admin
//! calls, or calls with a key of its own (an attacker's account on the same
//! host) are refused.
//!
//! The rule ([`ModelGate::check`]) is pure; [`super::inspect`] applies it
//! to each request it reads.

use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret as _, SecretString};

use super::head::Host;

/// What a worker holds instead of the model key: enough for its CLI to
/// start, worth nothing anywhere.
pub const PLACEHOLDER: &str = "eagle-placeholder-key";

const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// How the model API takes its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `x-api-key: KEY` (`ANTHROPIC_API_KEY`).
    ApiKey,
    /// `Authorization: Bearer KEY` (`ANTHROPIC_AUTH_TOKEN`).
    Bearer,
}

/// One call the gate forwards: a method and a path (a query may follow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: &'static str,
    pub path: String,
}

/// The model API of one kind of worker, and the key it is reached with.
pub struct ModelGate {
    host: Host,
    port: u16,
    tls: bool,
    calls: Vec<Call>,
    header: KeyHeader,
    /// The real key, as a header value marked sensitive.
    key: HeaderValue,
}

impl std::fmt::Debug for ModelGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelGate")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("calls", &self.calls)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl ModelGate {
    /// The gate of the model API at `base` (its scheme, host, port and
    /// path: the calls' paths are below it), forwarding `calls`
    /// (`("POST", "/v1/messages")`) with `key` in `header`.
    pub fn new(
        base: &url::Url,
        calls: &[(&'static str, &str)],
        header: KeyHeader,
        key: &SecretString,
    ) -> Result<ModelGate, String> {
        let tls = match base.scheme() {
            "https" => true,
            "http" => false,
            other => return Err(format!("the model API's URL is {other}:, not http(s):")),
        };
        let host = match base.host() {
            Some(url::Host::Domain(name)) => {
                Host::Name(name.trim_end_matches('.').to_ascii_lowercase())
            }
            Some(url::Host::Ipv4(ip)) => Host::Ip(ip.into()),
            Some(url::Host::Ipv6(ip)) => Host::Ip(ip.into()),
            None => return Err("the model API's URL names no host".into()),
        };
        let port = base
            .port_or_known_default()
            .ok_or("the model API's URL has no port")?;
        let prefix = base.path().trim_end_matches('/');
        let calls = calls
            .iter()
            .map(|(method, path)| Call {
                method,
                path: format!("{prefix}{path}"),
            })
            .collect();
        let value = match header {
            KeyHeader::ApiKey => key.expose_secret().to_string(),
            KeyHeader::Bearer => format!("Bearer {}", key.expose_secret()),
        };
        // The key is never part of the error.
        let mut key = HeaderValue::from_str(&value)
            .map_err(|_| "the model key has characters a header cannot carry".to_string())?;
        key.set_sensitive(true);
        Ok(ModelGate {
            host,
            port,
            tls,
            calls,
            header,
            key,
        })
    }

    /// Whether requests to `host:port` go through this gate.
    pub fn is(&self, host: &Host, port: u16) -> bool {
        self.host == *host && self.port == port
    }

    /// Whether the model API is reached over TLS (whatever the worker
    /// did: the key never crosses the network in the clear when the URL
    /// says https).
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// Why the request `method target` with `headers` is not forwarded,
    /// if it is not: not one of the calls, or not carrying the
    /// placeholder (and only it) as its key.
    pub fn check(&self, method: &str, target: &str, headers: &HeaderMap) -> Result<(), String> {
        let path = target.split('?').next().unwrap_or_default();
        if !self
            .calls
            .iter()
            .any(|c| c.method == method && c.path == path)
        {
            let calls: Vec<String> = self
                .calls
                .iter()
                .map(|c| format!("{} {}", c.method, c.path))
                .collect();
            return Err(format!(
                "{} {} is not a call of the model API Eagle forwards ({})",
                shown(method),
                shown(path),
                calls.join(", ")
            ));
        }
        let keys: Vec<Option<&str>> = headers
            .get_all(&X_API_KEY)
            .iter()
            .map(|v| v.to_str().ok())
            .chain(headers.get_all(AUTHORIZATION).iter().map(|v| {
                let v = v.to_str().ok()?;
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            }))
            .collect();
        if keys.is_empty() {
            return Err(
                "a call of the model API must carry the placeholder key Eagle gave the worker"
                    .into(),
            );
        }
        if keys.iter().any(|k| *k != Some(PLACEHOLDER)) {
            return Err(
                "a call of the model API carries a key other than the placeholder Eagle gave \
                 the worker: Eagle sets the model key, a key of the worker's own is refused"
                    .into(),
            );
        }
        Ok(())
    }

    /// Puts the real key in place of the placeholder.
    pub fn set_key(&self, headers: &mut HeaderMap) {
        headers.remove(&X_API_KEY);
        headers.remove(AUTHORIZATION);
        let name = match self.header {
            KeyHeader::ApiKey => X_API_KEY,
            KeyHeader::Bearer => AUTHORIZATION,
        };
        headers.insert(name, self.key.clone());
    }
}

/// A piece of what the worker sent, safe to record and show in chat: at
/// most 80 characters, anything but letters, digits and `/._-~` escaped.
pub(super) fn shown(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().take(80) {
        if c.is_ascii_alphanumeric() || "/._-~".contains(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    if text.chars().count() > 80 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALLS: &[(&str, &str)] = &[
        ("POST", "/v1/messages"),
        ("POST", "/v1/messages/count_tokens"),
    ];

    /// A request: method, target, headers.
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

    fn gate(base: &str, header: KeyHeader) -> ModelGate {
        ModelGate::new(
            &url::Url::parse(base).unwrap(),
            CALLS,
            header,
            &SecretString::from("sk-real-key"),
        )
        .unwrap()
    }

    fn headers(list: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in list {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn only_the_calls_with_the_placeholder_pass() {
        let g = gate("https://api.anthropic.com", KeyHeader::ApiKey);
        let p = PLACEHOLDER;
        let bearer = format!("Bearer {p}");
        let ok: &[Case<'_>] = &[
            ("POST", "/v1/messages", &[("x-api-key", p)]),
            ("POST", "/v1/messages?beta=true", &[("x-api-key", p)]),
            (
                "POST",
                "/v1/messages/count_tokens?beta=true",
                &[("x-api-key", p)],
            ),
            ("POST", "/v1/messages", &[("authorization", &bearer)]),
            (
                "POST",
                "/v1/messages",
                &[
                    ("x-api-key", p),
                    ("authorization", "bearer eagle-placeholder-key"),
                ],
            ),
        ];
        for (method, target, list) in ok {
            assert_eq!(
                g.check(method, target, &headers(list)),
                Ok(()),
                "{method} {target} {list:?}"
            );
        }
        let refused: &[(Case<'_>, &str)] = &[
            (
                ("POST", "/v1/files", &[("x-api-key", p)]),
                "POST /v1/files is not a call",
            ),
            (
                ("GET", "/v1/messages", &[("x-api-key", p)]),
                "GET /v1/messages is not",
            ),
            (
                ("POST", "/v1/messages/batches", &[("x-api-key", p)]),
                "not a call",
            ),
            (("POST", "/v1/messages/", &[("x-api-key", p)]), "not a call"),
            (
                ("POST", "/v1/messages/../files", &[("x-api-key", p)]),
                "not a call",
            ),
            (
                ("POST", "/v1/%6Dessages", &[("x-api-key", p)]),
                "/v1/%256Dessages",
            ),
            (("POST", "/V1/MESSAGES", &[("x-api-key", p)]), "not a call"),
            (
                ("POST", "/v1/organizations/me/api_keys", &[("x-api-key", p)]),
                "not a call",
            ),
            (("post", "/v1/messages", &[("x-api-key", p)]), "not a call"),
            (("POST", "/v1/messages", &[]), "must carry the placeholder"),
            (
                ("POST", "/v1/messages", &[("x-api-key", "sk-attacker")]),
                "other than the placeholder",
            ),
            (
                (
                    "POST",
                    "/v1/messages",
                    &[("x-api-key", p), ("x-api-key", "sk-attacker")],
                ),
                "other than",
            ),
            (
                (
                    "POST",
                    "/v1/messages",
                    &[("x-api-key", p), ("authorization", "Bearer sk-attacker")],
                ),
                "other than",
            ),
            (
                ("POST", "/v1/messages", &[("authorization", "Basic eDp5")]),
                "other than",
            ),
            (
                (
                    "POST",
                    "/v1/messages",
                    &[("x-api-key", "eagle-placeholder-key2")],
                ),
                "other than",
            ),
        ];
        for ((method, target, list), says) in refused {
            let why = g.check(method, target, &headers(list)).unwrap_err();
            assert!(why.contains(says), "{method} {target} {list:?}: {why}");
            assert!(
                !why.contains("sk-attacker") && !why.contains("sk-real-key"),
                "{why}"
            );
        }
    }

    #[test]
    fn the_real_key_replaces_the_placeholder_in_the_form_it_takes() {
        let g = gate("https://api.anthropic.com", KeyHeader::ApiKey);
        let mut h = headers(&[
            ("authorization", &format!("Bearer {PLACEHOLDER}")),
            ("anthropic-version", "2023-06-01"),
        ]);
        g.set_key(&mut h);
        assert_eq!(h["x-api-key"], "sk-real-key");
        assert!(h["x-api-key"].is_sensitive());
        assert!(!h.contains_key("authorization"));
        assert_eq!(h["anthropic-version"], "2023-06-01");
        let g = gate("http://127.0.0.1:4010", KeyHeader::Bearer);
        let mut h = headers(&[("x-api-key", PLACEHOLDER)]);
        g.set_key(&mut h);
        assert_eq!(h["authorization"], "Bearer sk-real-key");
        assert!(!h.contains_key("x-api-key"));
        assert!(!format!("{g:?}").contains("sk-real-key"));
    }

    #[test]
    fn the_gate_is_the_base_urls_host_port_and_path() {
        let g = gate("https://API.anthropic.com/", KeyHeader::ApiKey);
        assert!(g.is(&Host::Name("api.anthropic.com".into()), 443));
        assert!(!g.is(&Host::Name("api.anthropic.com".into()), 80));
        assert!(g.tls());
        let g = gate("http://127.0.0.1:4010", KeyHeader::ApiKey);
        assert!(g.is(&Host::Ip("127.0.0.1".parse().unwrap()), 4010) && !g.tls());
        let g = gate("https://gateway.corp/anthropic/", KeyHeader::ApiKey);
        let h = headers(&[("x-api-key", PLACEHOLDER)]);
        assert_eq!(g.check("POST", "/anthropic/v1/messages", &h), Ok(()));
        assert!(g.check("POST", "/v1/messages", &h).is_err());
        let bad = ModelGate::new(
            &url::Url::parse("https://a.example").unwrap(),
            CALLS,
            KeyHeader::ApiKey,
            &SecretString::from("bad\nkey"),
        )
        .unwrap_err();
        assert!(!bad.contains("bad\nkey"), "{bad}");
    }

    #[test]
    fn what_is_shown_is_inert() {
        assert_eq!(shown("/v1/files"), "/v1/files");
        assert_eq!(shown("/x?@**all**"), "/x%3F%40%2A%2Aall%2A%2A");
        assert_eq!(shown(&"a".repeat(100)).chars().count(), 81);
    }
}
