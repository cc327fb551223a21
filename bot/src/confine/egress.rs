//! The egress proxy: a worker's only way to the network. A confined worker
//! has loopback only; the sandbox's bridge in its namespace forwards
//! `127.0.0.1:3128` (its `HTTPS_PROXY`) to this proxy's Unix socket, which
//! Eagle serves outside the sandbox, one per attempt, beside the run's
//! request socket ([`crate::executor::runner`] starts it with the worker and stops it
//! when the worker ends).
//!
//! It speaks `CONNECT host:port` (TLS goes through the tunnel: the proxy
//! never sees plaintext) and plain HTTP by absolute URI (`GET http://…`).
//! Two kinds of destination have their requests read instead
//! ([`inspect`]): the model API, whose key only the proxy holds (the
//! worker has a placeholder; [`model`]), and hosts the allow list limits
//! to some methods (`pypi.org:443 GET`). Through a tunnel to them the
//! proxy answers TLS itself, with a certificate of Eagle's own authority
//! ([`authority`]) that the worker is told to trust.
//! A destination is reached only when the allow list lets it through
//! ([`AllowHosts`], the profile's `runner.sandbox.allow_hosts`); names are
//! resolved here, and a name resolving to an address that is not public
//! (loopback, private, link-local: Eagle itself, its database, the local
//! network) is refused unless the allow list names that host exactly. An
//! IP literal is matched as itself. Everything else is answered `403` with
//! the reason and recorded ([`refusals`], shown by `!status run N`).
//! Nothing is resolved for a host that is not allowed, so a refused name
//! does not leak through DNS either.
//!
//! * [`head`]: reading and parsing a request head, within its limits.
//! * [`address`]: which addresses are public; resolving names once.
//! * [`tunnel`]: relaying bytes both ways, with an idle timeout.
//! * [`inspect`]: reading requests one by one, and judging each.
//! * [`model`]: the model API's calls and key.
//! * [`authority`]: Eagle's certificate authority and the hosts' certificates.
//! * [`upstream`]: the proxy's own TLS toward a host whose requests it reads.
//! * [`refusals`]: coalescing refusals and writing them to the store.

pub mod address;
pub mod authority;
pub mod head;
mod inspect;
pub mod model;
mod refusals;
pub mod tunnel;
pub mod upstream;

pub use refusals::MAX_DESTINATIONS;

use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::ground::host::UnixUser;
use crate::ground::host_pattern::HostPattern;
use crate::store::Store;
use head::{HeadError, Host, Target};
use inspect::{Dest, Rule};
use model::ModelGate;
use refusals::Refusals;

/// Connections past the limit answered at once, at most (the rest are
/// closed without a word).
const REFUSING: usize = 16;

/// The profile key a refusal points the owner at.
const ALLOW_KEY: &str = "runner.sandbox.allow_hosts";

/// What the proxy asks of the allow list.
pub trait AllowHosts: Send + Sync {
    /// Whether `host` (a lower-case name, or an IP address without
    /// brackets) may be reached on `port`.
    fn allows(&self, host: &str, port: u16) -> bool;
    /// Whether a pattern names exactly this host and port (no wildcard):
    /// only such a host may resolve to an address that is not public.
    fn names(&self, host: &str, port: u16) -> bool;
    /// The methods `host:port` is limited to, when every pattern that
    /// allows it limits them (`None`: any method, its traffic not read).
    fn methods(&self, _host: &str, _port: u16) -> Option<Vec<&'static str>> {
        None
    }
}

/// The profile's `allow_hosts`: a host is named exactly by a pattern
/// without a wildcard (`127.0.0.1:4010`, `registry.corp`), never by
/// `*.domain`.
impl AllowHosts for Vec<HostPattern> {
    fn allows(&self, host: &str, port: u16) -> bool {
        self.iter().any(|p| p.matches(host, port))
    }

    fn names(&self, host: &str, port: u16) -> bool {
        self.iter()
            .any(|p| !p.host.starts_with("*.") && p.matches(host, port))
    }

    fn methods(&self, host: &str, port: u16) -> Option<Vec<&'static str>> {
        let mut union = Vec::new();
        for pattern in self.iter().filter(|p| p.matches(host, port)) {
            union.extend(pattern.methods.as_ref()?);
        }
        union.sort_by_key(|m| {
            crate::ground::host_pattern::METHODS
                .iter()
                .position(|k| k == m)
        });
        union.dedup();
        (!union.is_empty()).then_some(union)
    }
}

/// What lets a proxy read requests sent through TLS: Eagle's certificate
/// authority (for the worker's side) and the proxy's own TLS toward the
/// host. One per process, shared by every proxy.
#[derive(Debug)]
pub struct Interception {
    pub authority: Arc<authority::Authority>,
    pub upstream: Arc<rustls::ClientConfig>,
}

/// The proxy's limits (per attempt).
#[derive(Debug, Clone)]
pub struct EgressLimits {
    /// Connections open at once (tunnels, and requests being read); past
    /// it, a connection is answered `503` and closed.
    pub max_tunnels: usize,
    /// A tunnel in which nothing moved for this long is closed.
    pub idle_timeout: Duration,
    /// The longest request head.
    pub max_head_bytes: usize,
    /// How long a worker has to send its request head.
    pub head_timeout: Duration,
    pub resolve_timeout: Duration,
    pub connect_timeout: Duration,
}

impl Default for EgressLimits {
    fn default() -> EgressLimits {
        EgressLimits {
            max_tunnels: 64,
            idle_timeout: Duration::from_secs(300),
            max_head_bytes: 16 * 1024,
            head_timeout: Duration::from_secs(10),
            resolve_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// Whom a proxy serves: a run's attempt (its refusals are recorded for
/// `!status run N`), an analysis of a task or a repository's setup run
/// ahead of any run (`eagle repo setup`: they are only logged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    Run(i64),
    Analysis { task: i64 },
    SetupAhead,
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Client::Run(run) => write!(f, "run {run}"),
            Client::Analysis { task } => write!(f, "the analysis of task #{task}"),
            Client::SetupAhead => write!(f, "a repository's setup ahead of its runs"),
        }
    }
}

/// A proxy to serve: whose refusals it records, what it allows, its limits.
pub struct Egress {
    pub client: Client,
    pub store: Store,
    pub allow: Arc<dyn AllowHosts>,
    pub limits: EgressLimits,
    /// How it reads TLS; `None`: it does not (a host limited to some
    /// methods is refused through a tunnel).
    pub interception: Option<Arc<Interception>>,
    /// The model API whose key the proxy sets, if the worker holds a
    /// placeholder.
    pub model: Option<Arc<ModelGate>>,
}

/// The proxy's socket, bound (so a worker started now finds it) but not
/// yet served; dropped unserved, its file goes.
pub struct EgressListener {
    listener: Option<UnixListener>,
    path: PathBuf,
    inode: (u64, u64),
}

/// Binds the proxy's socket at `path`, replacing a stale file, private to
/// `owner` (the worker's user) when given, else to Eagle's.
pub fn bind(path: &Path, owner: Option<&UnixUser>) -> std::io::Result<EgressListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    crate::ground::host::chmod(path, 0o600)?;
    if let Some(user) = owner {
        crate::ground::host::chown(path, user)?;
    }
    let meta = std::fs::symlink_metadata(path)?;
    Ok(EgressListener {
        listener: Some(listener),
        path: path.to_path_buf(),
        inode: (meta.dev(), meta.ino()),
    })
}

/// Removes the socket file at `path` if it is still the one bound (a
/// later proxy at the same path keeps its own).
fn remove_if_ours(path: &Path, inode: (u64, u64)) {
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && (meta.dev(), meta.ino()) == inode
    {
        let _ = std::fs::remove_file(path);
    }
}

impl Drop for EgressListener {
    fn drop(&mut self) {
        if self.listener.is_some() {
            remove_if_ours(&self.path, self.inode);
        }
    }
}

impl EgressListener {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves the proxy until [`EgressProxy::stop`] (or until the handle is
    /// dropped).
    pub fn serve(mut self, egress: Egress) -> EgressProxy {
        let listener = self.listener.take().expect("an unserved listener");
        let stop = CancellationToken::new();
        let ctx = Arc::new(Ctx {
            client: egress.client,
            allow: egress.allow,
            slots: Arc::new(Semaphore::new(egress.limits.max_tunnels)),
            refusing: Arc::new(Semaphore::new(REFUSING)),
            limits: egress.limits,
            refusals: Refusals::new(egress.client, egress.store),
            interception: egress.interception,
            model: egress.model,
        });
        let task = tokio::spawn(serve(listener, ctx, stop.clone()));
        EgressProxy {
            path: self.path.clone(),
            inode: self.inode,
            stop,
            task: Some(task),
        }
    }
}

/// A running proxy. It stops when told or dropped; either way its socket
/// file goes and what it refused is written.
pub struct EgressProxy {
    path: PathBuf,
    inode: (u64, u64),
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl EgressProxy {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops taking connections, cuts the open ones, removes the socket
    /// file and writes the refusals not yet recorded, then returns.
    pub async fn stop(mut self) {
        self.stop.cancel();
        remove_if_ours(&self.path, self.inode);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        remove_if_ours(&self.path, self.inode);
    }
}

/// What every connection of one proxy shares.
struct Ctx {
    client: Client,
    allow: Arc<dyn AllowHosts>,
    limits: EgressLimits,
    slots: Arc<Semaphore>,
    /// Connections past `slots` being answered `503`.
    refusing: Arc<Semaphore>,
    refusals: Refusals,
    interception: Option<Arc<Interception>>,
    model: Option<Arc<ModelGate>>,
}

impl Ctx {
    /// How the requests to an allowed `host:port` are read, if they are.
    fn rule(&self, host: &Host, port: u16) -> Option<Rule<'_>> {
        if let Some(gate) = self.model.as_deref()
            && gate.is(host, port)
        {
            return Some(Rule::Model(gate));
        }
        self.allow
            .methods(&host.to_string(), port)
            .map(Rule::Methods)
    }
}

async fn serve(listener: UnixListener, ctx: Arc<Ctx>, stop: CancellationToken) {
    let writer_stop = CancellationToken::new();
    let accept = async {
        accept(listener, &ctx, &stop).await;
        // Refusals noted by the connections just cut are written last.
        writer_stop.cancel();
    };
    tokio::join!(accept, ctx.refusals.run(writer_stop.clone()));
}

async fn accept(listener: UnixListener, ctx: &Arc<Ctx>, stop: &CancellationToken) {
    let mut connections = tokio::task::JoinSet::new();
    let mut warned_full = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let Ok(slot) = Arc::clone(&ctx.slots).try_acquire_owned() else {
                        if !std::mem::replace(&mut warned_full, true) {
                            tracing::warn!(client = %ctx.client, max = ctx.limits.max_tunnels, "egress: too many connections at once; refusing more");
                        }
                        // Answered by a task of its own while few are; past
                        // that, only closed.
                        if let Ok(refusing) = Arc::clone(&ctx.refusing).try_acquire_owned() {
                            let reason = format!("more than {} connections at once", ctx.limits.max_tunnels);
                            connections.spawn(async move {
                                let mut stream = stream;
                                answer(&mut stream, 503, "Service Unavailable", &reason).await;
                                drop(refusing);
                            });
                        }
                        continue;
                    };
                    warned_full = false;
                    let ctx = Arc::clone(ctx);
                    connections.spawn(async move {
                        handle(stream, &ctx).await;
                        drop(slot);
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, client = %ctx.client, "egress: the socket failed to accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

/// Why a destination is not reached.
enum Refusal {
    /// Not allowed: answered `403`, recorded.
    Refused(String),
    /// Allowed, but out of reach now: answered with the status, not recorded.
    Failed(u16, &'static str, String),
}

async fn handle(mut stream: UnixStream, ctx: &Ctx) {
    let limits = &ctx.limits;
    let read = tokio::time::timeout(
        limits.head_timeout,
        head::read(&mut stream, limits.max_head_bytes),
    )
    .await;
    let (bytes, len) = match read {
        Err(_) => {
            let why = format!("no request head within {:?}", limits.head_timeout);
            return answer(&mut stream, 408, "Request Timeout", &why).await;
        }
        Ok(Err(HeadError::Closed)) => return,
        Ok(Err(error)) => return refuse_head(&mut stream, &error).await,
        Ok(Ok(read)) => read,
    };
    let target = match head::target(&bytes[..len]) {
        Ok(target) => target,
        Err(error) => return refuse_head(&mut stream, &error).await,
    };
    let (host, port) = (target.host().clone(), target.port());
    let addrs = match admit(ctx, &host, port).await {
        Ok(addrs) => addrs,
        Err(refusal) => return refuse(ctx, &mut stream, &host, port, refusal).await,
    };
    if let Some(rule) = ctx.rule(&host, port) {
        let dest = Dest { host, port, addrs };
        return match target {
            Target::Connect { .. } => {
                inspect::tunnel(ctx, stream, bytes[len..].to_vec(), dest, rule).await
            }
            Target::Forward { .. } => inspect::plain(ctx, stream, bytes, dest, rule).await,
        };
    }
    let upstream = match connect(&addrs, &host, port, limits.connect_timeout).await {
        Ok(upstream) => upstream,
        Err(refusal) => return refuse(ctx, &mut stream, &host, port, refusal).await,
    };
    let _ = upstream.set_nodelay(true);
    let rest = &bytes[len..];
    let first = match target {
        Target::Connect { .. } => {
            if stream
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
            rest.to_vec()
        }
        Target::Forward { head, .. } => [head.as_slice(), rest].concat(),
    };
    let relayed = tunnel::relay(
        stream.into_split(),
        upstream.into_split(),
        &first,
        limits.idle_timeout,
    )
    .await;
    match relayed {
        Ok(moved) => {
            tracing::debug!(client = %ctx.client, host = %host, port, up = moved.up, down = moved.down, "egress: tunnel closed");
        }
        Err(error) => {
            tracing::debug!(client = %ctx.client, host = %host, port, %error, "egress: tunnel cut");
        }
    }
}

/// The addresses to connect to, if the destination may be reached.
async fn admit(ctx: &Ctx, host: &Host, port: u16) -> Result<Vec<SocketAddr>, Refusal> {
    let name = host.to_string();
    let shown = host.with_port(port);
    if !ctx.allow.allows(&name, port) {
        return Err(Refusal::Refused(format!("{shown} is not in {ALLOW_KEY}")));
    }
    let addrs = match host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, port)],
        Host::Name(name) => address::resolve(name, port, ctx.limits.resolve_timeout)
            .await
            .map_err(|why| Refusal::Failed(502, "Bad Gateway", why))?,
    };
    if let Some(inner) = addrs.iter().find(|a| !address::is_public(a.ip()))
        && !ctx.allow.names(&name, port)
    {
        let what = match host {
            Host::Ip(_) => format!("{shown} is not a public address"),
            Host::Name(_) => format!("{shown} resolves to {}, not a public address", inner.ip()),
        };
        return Err(Refusal::Refused(format!(
            "{what}: only a host:port {ALLOW_KEY} names exactly may be"
        )));
    }
    Ok(addrs)
}

/// Connects to the first of `addrs` that answers, within `timeout` in all.
async fn connect(
    addrs: &[SocketAddr],
    host: &Host,
    port: u16,
    timeout: Duration,
) -> Result<TcpStream, Refusal> {
    let shown = host.with_port(port);
    let attempt = async {
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(stream) => return Ok(stream),
                Err(error) => last = Some(error),
            }
        }
        Err(last.map_or_else(|| "no address".to_string(), |e| e.to_string()))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(error)) => Err(Refusal::Failed(
            502,
            "Bad Gateway",
            format!("cannot connect to {shown}: {error}"),
        )),
        Err(_) => Err(Refusal::Failed(
            504,
            "Gateway Timeout",
            format!("connecting to {shown} took longer than {timeout:?}"),
        )),
    }
}

/// Answers a destination not reached; a refusal is recorded too.
async fn refuse(ctx: &Ctx, stream: &mut UnixStream, host: &Host, port: u16, refusal: Refusal) {
    match refusal {
        Refusal::Refused(reason) => {
            note_refusal(ctx, host, port, &reason);
            answer(stream, 403, "Forbidden", &reason).await;
        }
        Refusal::Failed(status, phrase, reason) => answer(stream, status, phrase, &reason).await,
    }
}

/// Records a refusal (and logs the first for its destination).
fn note_refusal(ctx: &Ctx, host: &Host, port: u16, reason: &str) {
    if ctx.refusals.note(&host.to_string(), port, reason) {
        tracing::warn!(client = %ctx.client, host = %host, port, %reason, "egress: refused");
    }
}

async fn refuse_head(stream: &mut UnixStream, error: &HeadError) {
    let (status, phrase) = error.status();
    answer(stream, status, phrase, &error.to_string()).await;
}

/// How long a refused connection is read on after the answer, at most.
const LINGER: Duration = Duration::from_secs(2);
/// How much of it is read and dropped, at most.
const LINGER_BYTES: usize = 256 * 1024;

/// Answers with a status of the proxy's own and closes. What the worker
/// sent past the head is read and dropped first, for a moment: a Unix
/// socket closed with unread data resets its peer, which would lose the
/// answer.
async fn answer(stream: &mut UnixStream, status: u16, phrase: &str, reason: &str) {
    let reply = head::reply(status, phrase, reason);
    let _ = tokio::time::timeout(LINGER, async {
        stream.write_all(&reply).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 8192];
        let mut dropped = 0;
        while dropped < LINGER_BYTES {
            match stream.read(&mut sink).await? {
                0 => break,
                n => dropped += n,
            }
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_allows_but_never_names() {
        let list: Vec<HostPattern> = ["*.pypi.org", "127.0.0.1:4010", "registry.corp"]
            .iter()
            .map(|t| HostPattern::parse(t).unwrap())
            .collect();
        assert!(list.allows("files.pypi.org", 443));
        assert!(!list.names("files.pypi.org", 443));
        assert!(list.allows("127.0.0.1", 4010) && list.names("127.0.0.1", 4010));
        assert!(!list.allows("127.0.0.1", 4011));
        assert!(list.names("registry.corp", 5000));
        assert!(!list.allows("evil.example", 443));
    }

    #[test]
    fn a_host_is_limited_only_when_every_pattern_allowing_it_limits_it() {
        let list: Vec<HostPattern> = [
            "pypi.org:443 GET",
            "*.pypi.org HEAD",
            "files.pypi.org:443 GET",
            "crates.io",
            "crates.io:443 GET",
        ]
        .iter()
        .map(|t| HostPattern::parse(t).unwrap())
        .collect();
        assert_eq!(list.methods("pypi.org", 443), Some(vec!["GET"]));
        assert_eq!(
            list.methods("files.pypi.org", 443),
            Some(vec!["GET", "HEAD"])
        );
        assert_eq!(list.methods("files.pypi.org", 80), Some(vec!["HEAD"]));
        assert_eq!(list.methods("crates.io", 443), None);
        assert_eq!(list.methods("elsewhere.example", 443), None);
    }
}
