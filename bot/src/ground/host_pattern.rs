//! One entry of an egress allow list: a plain type below both the
//! configuration that lists hosts and the egress proxy that matches them.

use std::fmt;

/// One entry of `allow_hosts`: `host`, `host:port`, `*.domain[:port]`, an
/// IP address, or `[v6]:port`. Without a port, any port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lower case; `*.example.com` matches every name below `example.com`.
    pub host: String,
    pub port: Option<u16>,
}

impl HostPattern {
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let text = text.trim();
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
        Ok(HostPattern { host, port })
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

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v6 = self.host.contains(':');
        match (self.port, v6) {
            (Some(port), true) => write!(f, "[{}]:{port}", self.host),
            (Some(port), false) => write!(f, "{}:{port}", self.host),
            (None, _) => f.write_str(&self.host),
        }
    }
}
