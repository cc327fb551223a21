//! The head of what a worker sends its proxy: read within a size limit,
//! parsed by `httparse`, and turned into where it wants to go: a `CONNECT
//! host:port` tunnel, or a plain-HTTP request by absolute URI
//! (`GET http://host:port/path`), rewritten for the origin server.
//!
//! Everything here is pure but [`read`]; nothing panics on any input.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use tokio::io::{AsyncRead, AsyncReadExt};

/// The most headers a request may carry.
pub(super) const MAX_HEADERS: usize = 64;
/// The longest host name (RFC 1035) and label.
const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;

/// Headers that concern one hop only; never forwarded (RFC 9110 §7.6.1).
pub(super) const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// A host as the proxy judges it: a name (lower case, ASCII, no trailing
/// dot) or an IP literal, matched as itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl fmt::Display for Host {
    /// The host as the allow list sees it: the name, or the address without
    /// brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

impl Host {
    /// `host:port` as a person reads it (`[::1]:443` for IPv6).
    pub fn with_port(&self, port: u16) -> String {
        match self {
            Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
            host => format!("{host}:{port}"),
        }
    }
}

/// Where a request wants to go, and what to send there first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A tunnel: the proxy answers `200` and then relays bytes both ways.
    Connect { host: Host, port: u16 },
    /// A plain-HTTP request: `head` is the request head rewritten for the
    /// origin server (origin-form target, its own `Host`, no hop-by-hop
    /// headers, `Connection: close`).
    Forward {
        host: Host,
        port: u16,
        head: Vec<u8>,
    },
}

impl Target {
    pub fn host(&self) -> &Host {
        match self {
            Target::Connect { host, .. } | Target::Forward { host, .. } => host,
        }
    }

    pub fn port(&self) -> u16 {
        match self {
            Target::Connect { port, .. } | Target::Forward { port, .. } => *port,
        }
    }
}

/// Why a request head is not taken, with the status it is answered with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// The worker closed before sending a whole head: nothing to answer.
    #[error("closed before a whole request head")]
    Closed,
    #[error("the request head is over {0} bytes")]
    TooLarge(usize),
    #[error("the request has more than {MAX_HEADERS} headers")]
    TooManyHeaders,
    #[error("{0}")]
    Bad(String),
}

impl HeadError {
    /// The status and reason phrase the worker is answered with.
    pub fn status(&self) -> (u16, &'static str) {
        match self {
            HeadError::Closed | HeadError::Bad(_) => (400, "Bad Request"),
            HeadError::TooLarge(_) | HeadError::TooManyHeaders => {
                (431, "Request Header Fields Too Large")
            }
        }
    }
}

fn bad(why: impl Into<String>) -> HeadError {
    HeadError::Bad(why.into())
}

/// Reads from `reader` until a whole request head has arrived, at most
/// `max` bytes of it. Returns the bytes read (they may go past the head: a
/// client may send its first bytes for the tunnel at once) and the head's
/// length.
pub async fn read<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<(Vec<u8>, usize), HeadError> {
    let mut buf = Vec::with_capacity(4096.min(max));
    let mut chunk = [0u8; 4096];
    loop {
        let n = reader
            .read(&mut chunk)
            .await
            .map_err(|_| HeadError::Closed)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match httparse::Request::new(&mut headers).parse(&buf) {
            Ok(httparse::Status::Complete(len)) if len <= max => return Ok((buf, len)),
            Ok(httparse::Status::Complete(_)) => return Err(HeadError::TooLarge(max)),
            Ok(httparse::Status::Partial) if buf.len() >= max => {
                return Err(HeadError::TooLarge(max));
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyHeaders),
            Err(error) => return Err(bad(format!("not an HTTP request ({error})"))),
        }
    }
}

/// Where the complete head `bytes` wants to go.
pub fn target(bytes: &[u8]) -> Result<Target, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(bad("an incomplete request head")),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyHeaders),
        Err(error) => return Err(bad(format!("not an HTTP request ({error})"))),
    }
    let method = request.method.unwrap_or_default();
    let path = request.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = authority(path)?;
        return Ok(Target::Connect { host, port });
    }
    let (host, port, origin) = absolute_uri(path)?;
    let head = rewrite(&request, method, &origin, &host.with_port(port), port);
    Ok(Target::Forward { host, port, head })
}

/// `host:port` of a CONNECT: a name, an IPv4 address or a bracketed IPv6
/// address, and a port (required).
pub fn authority(text: &str) -> Result<(Host, u16), HeadError> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (ip, port) = rest
            .split_once("]:")
            .ok_or_else(|| bad("CONNECT needs host:port ([address]:port for IPv6)"))?;
        let ip: Ipv6Addr = ip
            .parse()
            .map_err(|_| bad(format!("{:?} is not an IPv6 address", short(ip))))?;
        (Host::Ip(IpAddr::V6(ip)), port)
    } else {
        let (name, port) = text
            .rsplit_once(':')
            .ok_or_else(|| bad("CONNECT needs host:port"))?;
        (host_of(name)?, port)
    };
    Ok((host, port_of(port)?))
}

/// The host, port and origin-form target (`/path?query`) of an absolute
/// `http://` URI.
fn absolute_uri(text: &str) -> Result<(Host, u16, String), HeadError> {
    let scheme_end = text.find("://").unwrap_or(0);
    let scheme = &text[..scheme_end];
    if scheme.eq_ignore_ascii_case("https") {
        return Err(bad("https goes through CONNECT (set HTTPS_PROXY)"));
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(bad(
            "this is a proxy: send CONNECT host:port, or an absolute http:// URI",
        ));
    }
    let url =
        url::Url::parse(text).map_err(|e| bad(format!("{:?} is not a URL ({e})", short(text))))?;
    let host = match url.host() {
        Some(url::Host::Domain(name)) => host_of(name)?,
        Some(url::Host::Ipv4(ip)) => Host::Ip(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Host::Ip(IpAddr::V6(ip)),
        None => return Err(bad("the URL names no host")),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    if port == 0 {
        return Err(bad("port 0 is not a port"));
    }
    let mut origin = url.path().to_string();
    if let Some(query) = url.query() {
        origin.push('?');
        origin.push_str(query);
    }
    Ok((host, port, origin))
}

/// A host name or an IPv4 literal (IPv6 comes bracketed), normalised.
fn host_of(text: &str) -> Result<Host, HeadError> {
    if let Ok(ip) = text.parse::<Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(ip)));
    }
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= MAX_LABEL
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !valid {
        return Err(bad(format!(
            "{:?} is not a host name (IDN names go as punycode)",
            short(text)
        )));
    }
    Ok(Host::Name(name))
}

fn port_of(text: &str) -> Result<u16, HeadError> {
    match text.parse::<u16>() {
        Ok(port) if port > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(port),
        _ => Err(bad(format!("{:?} is not a port", short(text)))),
    }
}

/// The request head for the origin server: the origin-form target, the
/// URI's own `Host`, the end-to-end headers as they came, `Connection: close`
/// (one request per tunnel: what follows on the connection goes to the same
/// origin, never elsewhere).
fn rewrite(
    request: &httparse::Request<'_, '_>,
    method: &str,
    origin: &str,
    host: &str,
    port: u16,
) -> Vec<u8> {
    // Headers the client names in `Connection` are hop-by-hop too.
    let named: Vec<String> = request
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| {
            String::from_utf8_lossy(h.value)
                .split(',')
                .map(|s| s.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .collect();
    let host = if port == 80 {
        host.strip_suffix(":80").unwrap_or(host)
    } else {
        host
    };
    let mut out = Vec::with_capacity(512);
    let minor = request.version.unwrap_or(1);
    out.extend_from_slice(
        format!("{method} {origin} HTTP/1.{minor}\r\nHost: {host}\r\n").as_bytes(),
    );
    for header in request.headers.iter() {
        let name = header.name.to_ascii_lowercase();
        if name == "host" || HOP_BY_HOP.contains(&name.as_str()) || named.contains(&name) {
            continue;
        }
        out.extend_from_slice(header.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(header.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// A short, printable piece of what the worker sent, for an error.
fn short(text: &str) -> String {
    text.chars()
        .take(80)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// A whole response the proxy itself gives: a status, a short plain-text
/// reason, and the end of the connection.
pub fn reply(status: u16, phrase: &str, reason: &str) -> Vec<u8> {
    let body = format!("eagle egress: {reason}\n");
    format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> Host {
        Host::Name(n.into())
    }

    type Case = (&'static str, Result<(Host, u16), ()>);

    #[test]
    fn connect_targets() {
        let cases: &[Case] = &[
            (
                "api.anthropic.com:443",
                Ok((name("api.anthropic.com"), 443)),
            ),
            ("API.Example.COM.:8443", Ok((name("api.example.com"), 8443))),
            (
                "127.0.0.1:3128",
                Ok((Host::Ip("127.0.0.1".parse().unwrap()), 3128)),
            ),
            ("[::1]:443", Ok((Host::Ip("::1".parse().unwrap()), 443))),
            (
                "under_score.example:1",
                Ok((name("under_score.example"), 1)),
            ),
            ("example.com", Err(())),
            ("example.com:", Err(())),
            ("example.com:0", Err(())),
            ("example.com:65536", Err(())),
            ("example.com:+443", Err(())),
            (":443", Err(())),
            ("[::1]443", Err(())),
            ("[fe80::1%eth0]:443", Err(())),
            ("ex ample.com:443", Err(())),
            ("exa$mple.com:443", Err(())),
            ("a..b:443", Err(())),
            ("bücher.example:443", Err(())),
            ("user@example.com:443", Err(())),
        ];
        for (text, want) in cases {
            let got = authority(text).map_err(|_| ());
            assert_eq!(&got, want, "{text}");
        }
        let long = format!("{}.example:443", "a".repeat(64));
        assert!(authority(&long).is_err());
        let longest = format!("{}:443", vec!["a".repeat(63); 5].join("."));
        assert!(authority(&longest).is_err(), "over 253 characters");
    }

    #[test]
    fn a_connect_head_is_a_tunnel() {
        let head = b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n";
        assert_eq!(
            target(head).unwrap(),
            Target::Connect {
                host: name("api.example.com"),
                port: 443
            }
        );
    }

    #[test]
    fn an_absolute_uri_is_rewritten_for_the_origin() {
        let head = b"POST http://Fake.Example:8080/v1/messages?beta=1 HTTP/1.1\r\n\
            Host: elsewhere.example\r\nProxy-Connection: keep-alive\r\n\
            Proxy-Authorization: Basic eDp5\r\nConnection: keep-alive, X-Hop\r\n\
            X-Hop: 1\r\nContent-Length: 2\r\nX-Api-Key: k\r\n\r\n";
        let Target::Forward { host, port, head } = target(head).unwrap() else {
            panic!("not a forward");
        };
        assert_eq!((host, port), (name("fake.example"), 8080));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "POST /v1/messages?beta=1 HTTP/1.1\r\nHost: fake.example:8080\r\n\
             Content-Length: 2\r\nX-Api-Key: k\r\nConnection: close\r\n\r\n"
        );
        let Target::Forward { head, port, .. } =
            target(b"GET http://10.1.2.3 HTTP/1.0\r\n\r\n").unwrap()
        else {
            panic!("not a forward");
        };
        assert_eq!(port, 80);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET / HTTP/1.0\r\nHost: 10.1.2.3\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn what_is_not_a_proxy_request_is_refused() {
        let cases: &[&[u8]] = &[
            b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET https://example.com/ HTTP/1.1\r\n\r\n",
            b"GET ftp://example.com/ HTTP/1.1\r\n\r\n",
            b"GET http:// HTTP/1.1\r\n\r\n",
            b"GET http://exa%20mple.com/ HTTP/1.1\r\n\r\n",
            b"GET http://example.com:0/ HTTP/1.1\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
            b"HELLO\r\n\r\n",
            b"",
        ];
        for head in cases {
            assert!(target(head).is_err(), "{:?}", String::from_utf8_lossy(head));
        }
    }

    #[tokio::test]
    async fn a_head_is_read_to_its_end_and_no_further_than_the_limit() {
        let bytes = b"CONNECT a.example:443 HTTP/1.1\r\n\r\n\x16\x03\x01";
        let (buf, len) = read(&mut &bytes[..], 1024).await.unwrap();
        assert_eq!(&buf[len..], b"\x16\x03\x01");
        let huge = format!(
            "GET http://a.example/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "y".repeat(5000)
        );
        assert_eq!(
            read(&mut huge.as_bytes(), 1024).await,
            Err(HeadError::TooLarge(1024))
        );
        let many: String = std::iter::once("GET http://a.example/ HTTP/1.1\r\n".to_string())
            .chain((0..100).map(|i| format!("X-{i}: 1\r\n")))
            .chain(["\r\n".to_string()])
            .collect();
        assert_eq!(
            read(&mut many.as_bytes(), 16 * 1024).await,
            Err(HeadError::TooManyHeaders)
        );
        assert_eq!(
            read(&mut &b"CONNECT a.example:443 HTTP/1.1\r\n"[..], 1024).await,
            Err(HeadError::Closed)
        );
        assert!(matches!(
            read(&mut &b"\0\0\0\0\r\n\r\n"[..], 1024).await,
            Err(HeadError::Bad(_))
        ));
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = fastrand::Rng::with_seed(13);
        for _ in 0..5_000 {
            let len = rng.usize(0..200);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            if rng.bool() {
                bytes.splice(0..0, b"CONNECT ".iter().copied());
            } else if rng.bool() {
                bytes.splice(0..0, b"GET http://".iter().copied());
            }
            bytes.extend_from_slice(b"\r\n\r\n");
            let _ = target(&bytes);
            if let Ok(text) = std::str::from_utf8(&bytes) {
                let _ = authority(text);
            }
        }
    }
}
