//! Reading a worker's requests to a host instead of tunnelling them: the
//! model API (only its calls, with the placeholder key, sent on with the
//! real one) and hosts limited to some methods (`pypi.org:443 GET`).
//!
//! Inside a CONNECT tunnel the proxy answers the worker's TLS itself, with
//! a certificate of Eagle's authority ([`super::authority`]) that the
//! worker trusts; plain HTTP (by absolute URI, or in a tunnel) is read as
//! it comes. Each request is judged by its [`Rule`]; a refused one is
//! answered `403` with the reason and recorded like every other refusal,
//! an allowed one goes on over one connection to the host (TLS again when
//! the worker used TLS, or when the model API's URL says https), and its
//! answer streams back as it arrives (server-sent events are never held).
//!
//! HTTP/1.1 only, both ways (`hyper`); hop-by-hop headers are dropped,
//! `Host` is always the destination's own, upgrades are not passed on.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{Either, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;

use super::head::Host;
use super::model::{ModelGate, shown};
use super::tunnel::Activity;
use super::{ALLOW_KEY, Ctx, Refusal};

/// The body of an answer: the host's, streamed, or the proxy's own.
type Body = Either<Incoming, Full<Bytes>>;

/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// Headers this proxy handles itself besides the hop-by-hop ones
/// ([`super::head::HOP_BY_HOP`]): `Transfer-Encoding` (hyper frames the
/// body), `Expect` (it answers `100 Continue`), `Host` (the destination's
/// own).
const HANDLED_HERE: [&str; 3] = ["transfer-encoding", "expect", "host"];

/// How the requests to one destination are judged.
pub(super) enum Rule<'a> {
    /// The model API: only its calls, with the placeholder key.
    Model(&'a ModelGate),
    /// A host limited to these methods.
    Methods(Vec<&'static str>),
}

/// Where the requests go: the host as the worker named it, and the
/// addresses the proxy judged for it.
pub(super) struct Dest {
    pub host: Host,
    pub port: u16,
    pub addrs: Vec<SocketAddr>,
}

/// Serves a CONNECT tunnel to `dest` whose requests are read: `early` is
/// what the worker sent past its CONNECT head.
pub(super) async fn tunnel(
    ctx: &Ctx,
    mut stream: UnixStream,
    mut early: Vec<u8>,
    dest: Dest,
    rule: Rule<'_>,
) {
    use tokio::io::AsyncWriteExt as _;
    let shown = dest.host.with_port(dest.port);
    let Some(interception) = ctx.interception.clone() else {
        let reason = format!("{shown} has its requests read, and this proxy cannot read TLS");
        return super::refuse(
            ctx,
            &mut stream,
            &dest.host,
            dest.port,
            Refusal::Refused(reason),
        )
        .await;
    };
    if stream
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .is_err()
    {
        return;
    }
    // TLS or plain HTTP: the first byte says.
    if early.is_empty() {
        let mut first = [0u8; 1];
        match tokio::time::timeout(ctx.limits.head_timeout, stream.read(&mut first)).await {
            Ok(Ok(1)) => early.push(first[0]),
            _ => return,
        }
    }
    let io = Prefixed::new(early, stream);
    if io.prefix[0] != TLS_HANDSHAKE {
        return serve(ctx, io, &dest, rule, false).await;
    }
    let config = match interception.authority.server_config(&dest.host) {
        Ok(config) => config,
        Err(error) => {
            tracing::warn!(client = %ctx.client, %error, "egress: cannot answer TLS");
            return;
        }
    };
    let accept = tokio_rustls::TlsAcceptor::from(config).accept(io);
    match tokio::time::timeout(ctx.limits.head_timeout, accept).await {
        Ok(Ok(tls)) => serve(ctx, tls, &dest, rule, true).await,
        Ok(Err(error)) => {
            tracing::debug!(client = %ctx.client, host = %shown, %error, "egress: the worker's TLS failed");
        }
        Err(_) => {
            tracing::debug!(client = %ctx.client, host = %shown, "egress: the worker's TLS took too long");
        }
    }
}

/// Serves plain-HTTP requests by absolute URI to `dest`, the first of
/// which is in `bytes` (its head, and what followed it).
pub(super) async fn plain(
    ctx: &Ctx,
    stream: UnixStream,
    bytes: Vec<u8>,
    dest: Dest,
    rule: Rule<'_>,
) {
    serve(ctx, Prefixed::new(bytes, stream), &dest, rule, false).await;
}

/// The state of one connection being read.
struct Conn<'a> {
    ctx: &'a Ctx,
    dest: &'a Dest,
    rule: Rule<'a>,
    /// Whether the host is reached over TLS.
    upstream_tls: bool,
    upstream: tokio::sync::Mutex<Option<Upstream>>,
}

/// One connection to the host, reused while it lasts.
struct Upstream {
    sender: SendRequest<Incoming>,
    /// Drives the connection; ended with it.
    _driver: AbortOnDrop,
}

/// A task that ends when its handle goes.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Serves the requests arriving on `io` (TLS answered already when
/// `client_tls`) until the worker or the host is done, or nothing moves
/// for the idle timeout.
async fn serve<IO>(ctx: &Ctx, io: IO, dest: &Dest, rule: Rule<'_>, client_tls: bool)
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let upstream_tls = match &rule {
        Rule::Model(gate) => gate.tls(),
        Rule::Methods(_) => client_tls,
    };
    let conn = Conn {
        ctx,
        dest,
        rule,
        upstream_tls,
        upstream: tokio::sync::Mutex::new(None),
    };
    let activity = Activity::new();
    let io = Watched {
        inner: io,
        activity: &activity,
    };
    let service = hyper::service::service_fn(|request| {
        let conn = &conn;
        async move { Ok::<_, Infallible>(conn.forward(request).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // Between two calls a connection may wait as long as a tunnel may
        // idle: a model call follows the worker's tool calls, and a new
        // connection costs a handshake with the host too.
        .header_read_timeout(ctx.limits.idle_timeout)
        .max_header_size(ctx.limits.max_head_bytes)
        .max_headers(super::head::MAX_HEADERS)
        .keep_alive(true);
    let served = builder.serve_connection(TokioIo::new(io), service);
    let shown = dest.host.with_port(dest.port);
    tokio::select! {
        result = served => {
            if let Err(error) = result {
                tracing::debug!(client = %ctx.client, host = %shown, %error, "egress: a read connection ended");
            }
        }
        () = activity.idle(ctx.limits.idle_timeout) => {
            tracing::debug!(client = %ctx.client, host = %shown, "egress: a read connection was idle; cut");
        }
    }
}

impl Conn<'_> {
    /// One request: judged, then sent on, or answered by the proxy.
    async fn forward(&self, request: Request<Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let dest = self.dest;
        let shown_dest = dest.host.with_port(dest.port);
        if let Some(elsewhere) = self.elsewhere(&parts.uri) {
            return answer(
                StatusCode::MISDIRECTED_REQUEST,
                &format!("this connection goes to {shown_dest} only, not to {elsewhere}"),
            );
        }
        let target = parts
            .uri
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_string();
        let method = parts.method.as_str();
        let judged = match &self.rule {
            Rule::Model(gate) => gate.check(method, &target, &parts.headers),
            Rule::Methods(allowed) if allowed.contains(&method) => Ok(()),
            Rule::Methods(allowed) => Err(format!(
                "{} is not allowed to {shown_dest}: {ALLOW_KEY} allows it {} only",
                shown(method),
                allowed.join(" ")
            )),
        };
        if let Err(reason) = judged {
            super::note_refusal(self.ctx, &dest.host, dest.port, &reason);
            return answer(StatusCode::FORBIDDEN, &reason);
        }
        let mut headers = passed_headers(&parts.headers);
        headers.insert(header::HOST, self.host_header());
        if let Rule::Model(gate) = &self.rule {
            gate.set_key(&mut headers);
        }
        let mut upstream = Request::new(body);
        *upstream.method_mut() = parts.method;
        *upstream.uri_mut() = target.parse().unwrap_or_else(|_| Uri::from_static("/"));
        *upstream.headers_mut() = headers;
        match self.send(upstream).await {
            Ok(mut response) => {
                let kept = passed_headers(response.headers());
                *response.headers_mut() = kept;
                response.map(Either::Left)
            }
            Err((status, reason)) => answer(status, &reason),
        }
    }

    /// Where an absolute URI goes, if that is not this connection's
    /// destination (`None` for an origin-form target).
    fn elsewhere(&self, uri: &Uri) -> Option<String> {
        let host = uri.host()?;
        let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("https") => 443,
            _ => 80,
        });
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let same = host
            .trim_end_matches('.')
            .eq_ignore_ascii_case(&self.dest.host.to_string())
            && port == self.dest.port;
        (!same).then(|| format!("{}:{port}", shown(host)))
    }

    /// `Host` as the destination's: its port left out when it is the
    /// scheme's own.
    fn host_header(&self) -> HeaderValue {
        let dest = self.dest;
        let default = if self.upstream_tls { 443 } else { 80 };
        let text = if dest.port == default {
            match &dest.host {
                Host::Ip(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
                host => host.to_string(),
            }
        } else {
            dest.host.with_port(dest.port)
        };
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
    }

    /// Sends `request` over the connection to the host, opened if there
    /// is none (or it closed). A request the connection did not take (the
    /// host closed it as it was sent) goes once more, on a new one.
    async fn send(
        &self,
        mut request: Request<Incoming>,
    ) -> Result<Response<Incoming>, (StatusCode, String)> {
        let shown = self.dest.host.with_port(self.dest.port);
        let idle = self.ctx.limits.idle_timeout;
        let mut retried = false;
        loop {
            let sent = {
                let mut upstream = self.upstream.lock().await;
                let usable = match upstream.as_mut() {
                    Some(open) => open.sender.ready().await.is_ok(),
                    None => false,
                };
                if !usable {
                    *upstream = None;
                    let mut open = self.open().await?;
                    open.sender
                        .ready()
                        .await
                        .map_err(|e| (StatusCode::BAD_GATEWAY, format!("{shown} closed: {e}")))?;
                    *upstream = Some(open);
                }
                let Some(open) = upstream.as_mut() else {
                    return Err((StatusCode::BAD_GATEWAY, format!("no connection to {shown}")));
                };
                open.sender.try_send_request(request)
            };
            match tokio::time::timeout(idle, sent).await {
                Ok(Ok(response)) => return Ok(response),
                Ok(Err(mut error)) => match error.take_message() {
                    Some(again) if !retried => {
                        retried = true;
                        request = again;
                        *self.upstream.lock().await = None;
                    }
                    _ => {
                        return Err((
                            StatusCode::BAD_GATEWAY,
                            format!("{shown} did not answer: {}", error.error()),
                        ));
                    }
                },
                Err(_) => {
                    return Err((
                        StatusCode::GATEWAY_TIMEOUT,
                        format!("{shown} did not answer within {idle:?}"),
                    ));
                }
            }
        }
    }

    /// A connection to the host: TCP to the judged addresses, then TLS
    /// when the host is reached over TLS.
    async fn open(&self) -> Result<Upstream, (StatusCode, String)> {
        let dest = self.dest;
        let shown = dest.host.with_port(dest.port);
        let limits = &self.ctx.limits;
        let tcp = super::connect(&dest.addrs, &dest.host, dest.port, limits.connect_timeout)
            .await
            .map_err(|refusal| match refusal {
                Refusal::Failed(status, _, reason) => (
                    StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
                    reason,
                ),
                Refusal::Refused(reason) => (StatusCode::FORBIDDEN, reason),
            })?;
        let _ = tcp.set_nodelay(true);
        if !self.upstream_tls {
            return handshake(tcp, &shown).await;
        }
        let Some(interception) = &self.ctx.interception else {
            return Err((
                StatusCode::BAD_GATEWAY,
                format!("{shown} is reached over TLS, and this proxy has no TLS of its own"),
            ));
        };
        let name = match &dest.host {
            Host::Ip(ip) => rustls::pki_types::ServerName::IpAddress((*ip).into()),
            Host::Name(name) => rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|e| (StatusCode::BAD_GATEWAY, format!("{shown}: {e}")))?,
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&interception.upstream));
        match tokio::time::timeout(limits.connect_timeout, connector.connect(name, tcp)).await {
            Ok(Ok(tls)) => handshake(tls, &shown).await,
            Ok(Err(error)) => Err((
                StatusCode::BAD_GATEWAY,
                format!("TLS with {shown} failed: {error}"),
            )),
            Err(_) => Err((
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "TLS with {shown} took longer than {:?}",
                    limits.connect_timeout
                ),
            )),
        }
    }
}

/// An HTTP/1.1 client connection over `io`, driven by a task of its own.
async fn handshake<IO>(io: IO, shown: &str) -> Result<Upstream, (StatusCode, String)>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| (StatusCode::BAD_GATEWAY, format!("{shown}: {e}")))?;
    let shown = shown.to_string();
    let driver = tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(host = %shown, %error, "egress: the connection to a read host ended");
        }
    });
    Ok(Upstream {
        sender,
        _driver: AbortOnDrop(driver),
    })
}

/// The end-to-end headers of `headers`: without the hop-by-hop ones, nor
/// those `Connection` names.
fn passed_headers(headers: &HeaderMap) -> HeaderMap {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if super::head::HOP_BY_HOP.contains(&name.as_str())
            || HANDLED_HERE.contains(&name.as_str())
            || named.contains(name)
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// The proxy's own answer: a status and its reason, and the end of the
/// connection (what else the worker sent is not read).
fn answer(status: StatusCode, reason: &str) -> Response<Body> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(format!(
        "eagle egress: {reason}\n"
    )))));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A stream whose first bytes were read already.
struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    fn new(prefix: Vec<u8>, inner: S) -> Prefixed<S> {
        Prefixed {
            prefix,
            at: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.at < this.prefix.len() {
            let n = buf.remaining().min(this.prefix.len() - this.at);
            buf.put_slice(&this.prefix[this.at..this.at + n]);
            this.at += n;
            if this.at == this.prefix.len() {
                this.prefix = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A stream that notes when bytes move, for the idle timeout.
struct Watched<'a, S> {
    inner: S,
    activity: &'a Activity,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<'_, S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        let mut h = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, X-Hop"),
            ("x-hop", "1"),
            ("proxy-authorization", "Basic eDp5"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("host", "elsewhere.example"),
            ("expect", "100-continue"),
            ("content-type", "application/json"),
            ("anthropic-version", "2023-06-01"),
        ] {
            h.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let kept = passed_headers(&h);
        let names: Vec<&str> = kept.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["content-type", "anthropic-version"]);
    }

    #[tokio::test]
    async fn what_was_read_ahead_comes_first() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut io = Prefixed::new(b"ab".to_vec(), a);
        tokio::io::AsyncWriteExt::write_all(&mut b, b"cd")
            .await
            .unwrap();
        drop(b);
        let mut got = Vec::new();
        io.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"abcd");
    }
}
