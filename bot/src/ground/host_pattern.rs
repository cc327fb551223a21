//! One entry of an egress allow list: a plain type below both the
//! configuration that lists hosts and the egress proxy that matches them.

use std::fmt;

/// The methods a host may be limited to (`pypi.org:443 GET HEAD`).
pub const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// One entry of `allow_hosts`: `host`, `host:port`, `*.domain[:port]`, an
/// IP address, or `[v6]:port`. Without a port, any port. Method words
/// after it (`pypi.org:443 GET HEAD`) limit the requests to those methods:
/// the egress proxy then reads every request (terminating TLS with Eagle's
/// own certificate authority) and refuses the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lower case; `*.example.com` matches every name below `example.com`.
    pub host: String,
    pub port: Option<u16>,
    /// `None`: any method (the connection is not read); else only these
    /// (upper case, each once, in [`METHODS`]' order).
    pub methods: Option<Vec<&'static str>>,
}

impl HostPattern {
    /// A pattern for `host` and `port`, any method.
    pub fn new(host: impl Into<String>, port: Option<u16>) -> HostPattern {
        HostPattern {
            host: host.into(),
            port,
            methods: None,
        }
    }

    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let whole = text.trim();
        let mut words = whole.split_whitespace();
        let text = words.next().unwrap_or_default();
        let methods = methods(whole, words)?;
        let mut pattern = HostPattern::parse_host(text)?;
        pattern.methods = methods;
        Ok(pattern)
    }

    fn parse_host(text: &str) -> Result<HostPattern, String> {
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (v6, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("{text:?}: an IPv6 address needs its closing ']'"))?;
            if v6.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(format!("{text:?}: {v6:?} is not an IPv6 address"));
            }
            match after {
                "" => (v6.to_string(), None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (v6.to_string(), Some(port)),
                    None => return Err(format!("{text:?}: expected ':port' after ']'")),
                },
            }
        } else {
            match text.rsplit_once(':') {
                Some((host, port)) => (host.to_string(), Some(port)),
                None => (text.to_string(), None),
            }
        };
        let port = match port {
            None => None,
            Some(port) => Some(
                port.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("{text:?}: {port:?} is not a port (1..=65535)"))?,
            ),
        };
        let host = host.to_ascii_lowercase();
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let is_ip = name.parse::<std::net::IpAddr>().is_ok();
        let valid_name = !name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    && !label.starts_with('-')
            });
        let acceptable = match (is_ip, host.starts_with("*.")) {
            (true, wildcard) => !wildcard,
            (false, _) => valid_name,
        };
        if !acceptable {
            return Err(format!(
                "{text:?} is not a host name, \"*.domain\" or an IP address (with an optional :port)"
            ));
        }
        Ok(HostPattern::new(host, port))
    }

    /// Whether `method` may be sent to this pattern's hosts.
    pub fn allows_method(&self, method: &str) -> bool {
        self.methods
            .as_ref()
            .is_none_or(|list| list.contains(&method))
    }

    /// Whether `host:port` is this pattern's (names compared without case;
    /// an IP address only as itself).
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&host);
        match self.host.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|below| below.ends_with('.') && below.len() > 1),
            None => host == self.host,
        }
    }
}

/// The method words after a host, if any: known methods only, each once.
fn methods<'a>(
    whole: &str,
    words: impl Iterator<Item = &'a str>,
) -> Result<Option<Vec<&'static str>>, String> {
    let mut found = Vec::new();
    for word in words {
        let Some(known) = METHODS.iter().find(|m| m.eq_ignore_ascii_case(word)) else {
            return Err(format!(
                "{whole:?}: {word:?} is not an HTTP method a host may be limited to ({})",
                METHODS.join(", ")
            ));
        };
        if !found.contains(known) {
            found.push(*known);
        }
    }
    if found.is_empty() {
        return Ok(None);
    }
    found.sort_by_key(|m| METHODS.iter().position(|k| k == m));
    Ok(Some(found))
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v6 = self.host.contains(':');
        match (self.port, v6) {
            (Some(port), true) => write!(f, "[{}]:{port}", self.host)?,
            (Some(port), false) => write!(f, "{}:{port}", self.host)?,
            (None, _) => f.write_str(&self.host)?,
        }
        for method in self.methods.iter().flatten() {
            write!(f, " {method}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host, its port and its methods.
    type Parsed<'a> = (&'a str, Option<u16>, Option<&'a [&'a str]>);

    #[test]
    fn method_words_limit_a_host() {
        let cases: &[(&str, Result<Parsed<'_>, &str>)] = &[
            ("pypi.org", Ok(("pypi.org", None, None))),
            (
                "pypi.org:443 GET",
                Ok(("pypi.org", Some(443), Some(&["GET"]))),
            ),
            (
                "  files.pypi.org:443   head get GET ",
                Ok(("files.pypi.org", Some(443), Some(&["GET", "HEAD"]))),
            ),
            ("*.pypi.org GET", Ok(("*.pypi.org", None, Some(&["GET"])))),
            ("[::1]:80 POST", Ok(("::1", Some(80), Some(&["POST"])))),
            ("pypi.org:443 FETCH", Err("\"FETCH\" is not an HTTP method")),
            (
                "pypi.org:443 CONNECT",
                Err("\"CONNECT\" is not an HTTP method"),
            ),
            (
                "pypi.org GET,HEAD",
                Err("\"GET,HEAD\" is not an HTTP method"),
            ),
            ("GET", Ok(("get", None, None))),
            ("", Err("not a host name")),
        ];
        for (text, want) in cases {
            match (HostPattern::parse(text), want) {
                (Ok(got), Ok((host, port, methods))) => {
                    assert_eq!(got.host, *host, "{text:?}");
                    assert_eq!(got.port, *port, "{text:?}");
                    assert_eq!(got.methods.as_deref(), *methods, "{text:?}");
                }
                (Err(why), Err(says)) => assert!(why.contains(says), "{text:?}: {why}"),
                (got, want) => panic!("{text:?}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn a_limited_host_shows_and_allows_its_methods() {
        let p = HostPattern::parse("pypi.org:443 HEAD GET").unwrap();
        assert_eq!(p.to_string(), "pypi.org:443 GET HEAD");
        assert!(p.allows_method("GET") && p.allows_method("HEAD"));
        assert!(!p.allows_method("POST") && !p.allows_method("get"));
        assert!(
            HostPattern::parse("pypi.org")
                .unwrap()
                .allows_method("POST")
        );
        assert_eq!(HostPattern::parse(&p.to_string()).unwrap(), p);
    }
}
