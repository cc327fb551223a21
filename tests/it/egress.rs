//! The egress proxy, driven through its API on a real Unix socket, with
//! real TCP servers on 127.0.0.1 and a real store on both backends: an
//! allowed host reached by CONNECT and by absolute URI; hosts not allowed
//! refused (by IP and by name, never resolved) and recorded once with their
//! count; a name resolving to loopback refused unless named; garbage, huge
//! heads, silence and too many tunnels refused without harming the proxy;
//! the socket private and gone when the proxy stops. The hosts whose
//! requests it reads: the model API (over TLS it answers with Eagle's
//! authority, and over plain HTTP) gets the real key in place of the
//! placeholder and only its calls, the answer streaming; a host limited to
//! GET gets no POST; bad requests inside a read connection are refused
//! without harm. And through `eagle shell`: a worker's proxy lives exactly
//! as long as the worker, and what it refused shows in `!status run N`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eagle::confine::egress::authority::Authority;
use eagle::confine::egress::model::{KeyHeader, ModelGate, PLACEHOLDER};
use eagle::confine::egress::{self, AllowHosts, Egress, EgressLimits, EgressProxy, Interception};
use eagle::profile::HostPattern;
use eagle::store::{NewTask, Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

use crate::support::tls::{TestCa, TlsListener};
use crate::support::{Db, Home, TestDb, WAIT, text, within};

on_both_backends!(
    an_allowed_host_is_reached_by_connect_and_by_absolute_uri,
    hosts_not_allowed_are_refused_and_recorded_once_with_their_count,
    a_name_resolving_to_loopback_is_refused_unless_named,
    garbage_huge_heads_silence_and_too_many_tunnels_leave_the_proxy_serving,
    the_socket_is_private_and_gone_when_the_proxy_stops,
    ever_new_names_are_folded_into_one_row,
    the_model_api_gets_the_real_key_and_only_its_calls,
    a_host_limited_to_some_methods_gets_only_those,
    bad_requests_in_a_read_connection_are_refused_without_harm,
);

/// `allow_hosts` as a profile writes it.
fn hosts(list: &[&str]) -> Arc<Vec<HostPattern>> {
    Arc::new(
        list.iter()
            .map(|text| HostPattern::parse(text).unwrap())
            .collect(),
    )
}

/// An allow list that lets every host through without naming any: what a
/// wildcard matching a name does.
struct Everything;

impl AllowHosts for Everything {
    fn allows(&self, _host: &str, _port: u16) -> bool {
        true
    }

    fn names(&self, _host: &str, _port: u16) -> bool {
        false
    }
}

/// A store with one run, and a directory for sockets.
struct World {
    _db: TestDb,
    store: Store,
    run: i64,
    dir: tempfile::TempDir,
}

impl World {
    async fn new(db: Db) -> World {
        let test_db = TestDb::new(db).await;
        let store = test_db.open().await;
        let mut tx = store.begin_write().await.unwrap();
        let task = tx
            .tasks()
            .insert_task(&NewTask {
                task_gid: "chat:egress".into(),
                source: "chat".into(),
                title: "egress".into(),
                ..NewTask::default()
            })
            .await
            .unwrap()
            .unwrap();
        let run = tx
            .transitions()
            .start_run(task, "human:1", "!go")
            .await
            .unwrap()
            .id;
        tx.commit().await.unwrap();
        World {
            _db: test_db,
            store,
            run,
            dir: tempfile::Builder::new()
                .prefix("eg")
                .tempdir_in("/tmp")
                .unwrap(),
        }
    }

    fn proxy(&self, name: &str, allow: Arc<dyn AllowHosts>, limits: EgressLimits) -> EgressProxy {
        self.reading_proxy(name, allow, limits, None, None)
    }

    /// A proxy that reads requests: through `interception` (TLS), and
    /// with `model`'s key.
    fn reading_proxy(
        &self,
        name: &str,
        allow: Arc<dyn AllowHosts>,
        limits: EgressLimits,
        interception: Option<Arc<Interception>>,
        model: Option<Arc<ModelGate>>,
    ) -> EgressProxy {
        let path = self.dir.path().join(name);
        egress::bind(&path, None).unwrap().serve(Egress {
            client: eagle::confine::egress::Client::Run(self.run),
            store: self.store.clone(),
            allow,
            limits,
            interception,
            model,
        })
    }

    async fn refusals(&self) -> Vec<(String, i64, i64)> {
        self.store
            .egress()
            .egress_refusals(self.run)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.host, r.port, r.count))
            .collect()
    }
}

/// A TCP server on 127.0.0.1 that echoes what it gets; counts connections.
async fn echo_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    (port, accepted)
}

/// An HTTP server on 127.0.0.1 that answers `hello` once per connection
/// and hands over each request head it got.
async fn http_server() -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let head = read_head(&mut stream).await;
                let _ = tx.send(head);
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                    )
                    .await;
            });
        }
    });
    (port, rx)
}

/// Reads a head up to its blank line, byte by byte (nothing past it).
async fn read_head<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    within(WAIT, "a response head", async {
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
    })
    .await;
    String::from_utf8_lossy(&head).into_owned()
}

/// Sends `request` to the proxy; returns the status and the open stream.
async fn ask(path: &Path, request: &[u8]) -> (u16, String, UnixStream) {
    let mut stream = UnixStream::connect(path).await.expect("the proxy's socket");
    stream.write_all(request).await.unwrap();
    let head = read_head(&mut stream).await;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head, stream)
}

/// Sends `request`, reads the whole answer; returns its status and body.
async fn ask_all(path: &Path, request: &[u8]) -> (u16, String) {
    let (status, _, mut stream) = ask(path, request).await;
    let mut body = String::new();
    within(
        WAIT,
        "the end of an answer",
        stream.read_to_string(&mut body),
    )
    .await
    .unwrap();
    (status, body)
}

fn connect(target: &str) -> Vec<u8> {
    format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").into_bytes()
}

/// Opens a tunnel to `target` and checks that bytes come back through it.
async fn tunnel(path: &Path, target: &str) -> UnixStream {
    let (status, head, mut stream) = ask(path, &connect(target)).await;
    assert_eq!(status, 200, "{head}");
    stream.write_all(b"ping").await.unwrap();
    let mut back = [0u8; 4];
    within(WAIT, "the echo", stream.read_exact(&mut back))
        .await
        .unwrap();
    assert_eq!(&back, b"ping");
    stream
}

async fn an_allowed_host_is_reached_by_connect_and_by_absolute_uri(db: Db) {
    let world = World::new(db).await;
    let (echo, _) = echo_server().await;
    let (web, mut heads) = http_server().await;
    let allow = hosts(&[&format!("127.0.0.1:{echo}"), &format!("127.0.0.1:{web}")]);
    let proxy = world.proxy("p", allow, EgressLimits::default());

    // CONNECT, with the first bytes for the tunnel sent along with the head.
    let mut request = connect(&format!("127.0.0.1:{echo}"));
    request.extend_from_slice(b"early");
    let (status, head, mut stream) = ask(proxy.path(), &request).await;
    assert_eq!(status, 200, "{head}");
    let mut back = [0u8; 5];
    within(WAIT, "the early bytes' echo", stream.read_exact(&mut back))
        .await
        .unwrap();
    assert_eq!(&back, b"early");
    drop(stream);
    drop(tunnel(proxy.path(), &format!("127.0.0.1:{echo}")).await);

    // An absolute URI: forwarded in origin form, hop-by-hop headers dropped.
    let request = format!(
        "GET http://127.0.0.1:{web}/v1/models?beta=1 HTTP/1.1\r\nHost: 127.0.0.1:{web}\r\n\
         Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\nX-Api-Key: fake\r\n\r\n"
    );
    let (status, body) = ask_all(proxy.path(), request.as_bytes()).await;
    assert_eq!(status, 200);
    assert!(body.ends_with("hello"), "{body}");
    let seen = within(WAIT, "the request at the server", heads.recv())
        .await
        .unwrap();
    assert_eq!(
        seen,
        format!(
            "GET /v1/models?beta=1 HTTP/1.1\r\nHost: 127.0.0.1:{web}\r\nX-Api-Key: fake\r\n\
             Connection: close\r\n\r\n"
        )
    );

    proxy.stop().await;
    assert!(world.refusals().await.is_empty());
}

async fn hosts_not_allowed_are_refused_and_recorded_once_with_their_count(db: Db) {
    let world = World::new(db).await;
    let (echo, accepted) = echo_server().await;
    let (allowed, _) = echo_server().await;
    let proxy = world.proxy(
        "p",
        hosts(&[&format!("127.0.0.1:{allowed}")]),
        EgressLimits::default(),
    );
    // By IP: a listener that is there, on a port not allowed.
    for _ in 0..3 {
        let (status, body) = ask_all(proxy.path(), &connect(&format!("127.0.0.1:{echo}"))).await;
        assert_eq!(status, 403);
        assert!(
            body.contains(&format!(
                "127.0.0.1:{echo} is not in runner.sandbox.allow_hosts"
            )),
            "{body}"
        );
    }
    // By name, by CONNECT and by absolute URI: refused before resolving
    // (the name does not exist; a lookup would answer 502).
    for request in [
        connect("evil.example:443"),
        connect("EVIL.example.:443"),
        b"POST http://evil.example:443/upload HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc".to_vec(),
    ] {
        let (status, body) = ask_all(proxy.path(), &request).await;
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("evil.example:443 is not in"), "{body}");
    }
    // The allowed one still goes through.
    drop(tunnel(proxy.path(), &format!("127.0.0.1:{allowed}")).await);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "nothing reached the refused port"
    );

    proxy.stop().await;
    let mut refusals = world.refusals().await;
    refusals.sort();
    assert_eq!(
        refusals,
        vec![
            ("127.0.0.1".to_string(), i64::from(echo), 3),
            ("evil.example".to_string(), 443, 3),
        ]
    );
    let rows = world
        .store
        .egress()
        .egress_refusals(world.run)
        .await
        .unwrap();
    assert!(rows.iter().all(|r| r.first_at <= r.last_at));

    // A later attempt's proxy adds to the same rows.
    let again = world.proxy("q", hosts(&[]), EgressLimits::default());
    let (status, _) = ask_all(again.path(), &connect("evil.example:443")).await;
    assert_eq!(status, 403);
    again.stop().await;
    assert!(
        world
            .refusals()
            .await
            .contains(&("evil.example".into(), 443, 4))
    );
}

async fn a_name_resolving_to_loopback_is_refused_unless_named(db: Db) {
    let world = World::new(db).await;
    let (echo, accepted) = echo_server().await;
    // Everything allowed, nothing named: no address that is not public.
    let proxy = world.proxy("p", Arc::new(Everything), EgressLimits::default());
    let (status, body) = ask_all(proxy.path(), &connect(&format!("localhost:{echo}"))).await;
    assert_eq!(status, 403);
    assert!(
        body.contains(&format!("localhost:{echo} resolves to ")),
        "{body}"
    );
    assert!(
        body.contains(", not a public address: only a host:port"),
        "{body}"
    );
    for target in [
        format!("127.0.0.1:{echo}"),
        format!("[::ffff:127.0.0.1]:{echo}"),
        format!("0.0.0.0:{echo}"),
    ] {
        let (status, body) = ask_all(proxy.path(), &connect(&target)).await;
        assert_eq!(status, 403, "{target}: {body}");
        assert!(body.contains("is not a public address"), "{body}");
    }
    let (status, _) = ask_all(
        proxy.path(),
        format!("GET http://localhost:{echo}/ HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert_eq!(status, 403);
    proxy.stop().await;
    assert_eq!(accepted.load(Ordering::SeqCst), 0);

    // Named exactly, it is reached.
    let proxy = world.proxy(
        "q",
        hosts(&[&format!("localhost:{echo}")]),
        EgressLimits::default(),
    );
    drop(tunnel(proxy.path(), &format!("localhost:{echo}")).await);
    proxy.stop().await;
    let refusals = world.refusals().await;
    assert!(
        refusals.contains(&("localhost".into(), i64::from(echo), 2)),
        "{refusals:?}"
    );
    assert!(
        refusals.contains(&("127.0.0.1".into(), i64::from(echo), 1)),
        "{refusals:?}"
    );
}

async fn garbage_huge_heads_silence_and_too_many_tunnels_leave_the_proxy_serving(db: Db) {
    let world = World::new(db).await;
    let (echo, _) = echo_server().await;
    let target = format!("127.0.0.1:{echo}");
    let limits = EgressLimits {
        max_head_bytes: 1024,
        ..EgressLimits::default()
    };
    let proxy = world.proxy("p", hosts(&[&format!("127.0.0.1:{echo}")]), limits);
    let path = proxy.path().to_path_buf();

    let mut rng = fastrand::Rng::with_seed(13);
    for _ in 0..20 {
        let mut garbage: Vec<u8> = (0..rng.usize(1..300)).map(|_| rng.u8(..)).collect();
        garbage.extend_from_slice(b"\r\n\r\n");
        let (status, _) = ask_all(&path, &garbage).await;
        assert_eq!(status, 400, "{:?}", String::from_utf8_lossy(&garbage));
    }
    for bad in [
        "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n",
        "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n",
        "GET https://127.0.0.1/ HTTP/1.1\r\n\r\n",
    ] {
        let (status, body) = ask_all(&path, bad.as_bytes()).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let huge = format!(
        "CONNECT {target} HTTP/1.1\r\nX-Padding: {}\r\n\r\n",
        "a".repeat(4096)
    );
    assert_eq!(ask_all(&path, huge.as_bytes()).await.0, 431);
    let many: String = (0..100).map(|i| format!("X-{i}: 1\r\n")).collect();
    let many = format!("CONNECT {target} HTTP/1.1\r\n{many}\r\n");
    assert_eq!(ask_all(&path, many.as_bytes()).await.0, 431);
    {
        // Silence: a connection that never sends a whole head is answered
        // and closed, and so is a tunnel in which nothing moves.
        let quick = EgressLimits {
            head_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_millis(300),
            ..EgressLimits::default()
        };
        let quick = world.proxy("q", hosts(&[&format!("127.0.0.1:{echo}")]), quick);
        assert_eq!(ask_all(quick.path(), b"CONNECT 127.0.0.1").await.0, 408);
        let (status, _, mut idle) = ask(quick.path(), &connect(&target)).await;
        assert_eq!(status, 200);
        let mut rest = Vec::new();
        within(WAIT, "the idle tunnel's end", idle.read_to_end(&mut rest))
            .await
            .unwrap();
        quick.stop().await;
    }

    // Two tunnels at once; a third is refused, and a slot freed is taken.
    let two = EgressLimits {
        max_tunnels: 2,
        ..EgressLimits::default()
    };
    let limited = world.proxy("t", hosts(&[&format!("127.0.0.1:{echo}")]), two);
    let path = limited.path().to_path_buf();
    let first = tunnel(&path, &target).await;
    let second = tunnel(&path, &target).await;
    let (status, body) = ask_all(&path, &connect(&target)).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("more than 2 connections at once"), "{body}");
    drop(first);
    let mut third = None;
    within(WAIT, "a freed tunnel slot", async {
        loop {
            let (status, _, stream) = ask(&path, &connect(&target)).await;
            if status == 200 {
                third = Some(stream);
                break;
            }
            assert_eq!(status, 503);
            tokio::task::yield_now().await;
        }
    })
    .await;
    drop((second, third));
    // Still serving, and none of it counts as a refused destination.
    within(WAIT, "a tunnel after all that", async {
        loop {
            let (status, _, _) = ask(&path, &connect(&target)).await;
            if status == 200 {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    limited.stop().await;
    drop(tunnel(proxy.path(), &target).await);
    proxy.stop().await;
    assert!(world.refusals().await.is_empty());
}

async fn the_socket_is_private_and_gone_when_the_proxy_stops(db: Db) {
    use std::os::unix::fs::PermissionsExt;
    let world = World::new(db).await;
    let (echo, _) = echo_server().await;
    let proxy = world.proxy(
        "p",
        hosts(&[&format!("127.0.0.1:{echo}")]),
        EgressLimits::default(),
    );
    let path = proxy.path().to_path_buf();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let (status, _) = ask_all(&path, &connect("evil.example:443")).await;
    assert_eq!(status, 403);
    let mut open = tunnel(&path, &format!("127.0.0.1:{echo}")).await;
    within(WAIT, "the proxy to stop", proxy.stop()).await;
    assert!(!path.exists(), "the socket file is gone");
    assert!(UnixStream::connect(&path).await.is_err());
    // An open tunnel is cut with it.
    let mut rest = Vec::new();
    let _ = within(WAIT, "the tunnel's end", open.read_to_end(&mut rest)).await;
    // What it refused was written as it stopped.
    assert_eq!(
        world.refusals().await,
        vec![("evil.example".into(), 443, 1)]
    );

    // Dropped without a word, bound but never served, or served and
    // dropped: the file goes too, and a stale file is replaced.
    let listener = egress::bind(&path, None).unwrap();
    drop(listener);
    assert!(!path.exists());
    std::fs::write(&path, b"stale").unwrap();
    let proxy = world.proxy("p", hosts(&[]), EgressLimits::default());
    drop(proxy);
    assert!(!path.exists());
}

async fn ever_new_names_are_folded_into_one_row(db: Db) {
    let world = World::new(db).await;
    let proxy = world.proxy("p", hosts(&[]), EgressLimits::default());
    let extra = 8;
    for n in 0..egress::MAX_DESTINATIONS + extra {
        let (status, _) = ask_all(proxy.path(), &connect(&format!("h{n}.evil.example:443"))).await;
        assert_eq!(status, 403);
    }
    // A name seen before the cap keeps its own row.
    ask_all(proxy.path(), &connect("h0.evil.example:443")).await;
    proxy.stop().await;
    let refusals = world.refusals().await;
    assert_eq!(refusals.len(), egress::MAX_DESTINATIONS + 1, "{refusals:?}");
    assert!(
        refusals.contains(&("*".into(), 0, extra as i64)),
        "{refusals:?}"
    );
    assert!(
        refusals.contains(&("h0.evil.example".into(), 443, 2)),
        "{refusals:?}"
    );
}

/// Where the shell's run 1 keeps its request socket, once its worker started.
async fn socket_of_run(store: &Store) -> PathBuf {
    async fn recorded(store: &Store) -> Option<PathBuf> {
        let mut tx = store.begin_read().await.unwrap();
        let run = tx.tasks().run(1).await.unwrap()?;
        run.socket_path.map(PathBuf::from)
    }
    let found =
        crate::executor::wait_for(store, || async { recorded(store).await.is_some() }).await;
    assert!(found, "run 1 never recorded its worker");
    recorded(store).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_proxy_lives_with_it_and_its_refusals_show_in_status() {
    let mut home = Home::new();
    let fifo = home.dir.path().join("go");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // The worker says whether its proxy's socket is there, then waits for
    // the test to let it end.
    let script = home.dir.path().join("worker.sh");
    std::fs::write(
        &script,
        format!(
            "s=\"$EAGLE_RUN_SOCKET.egress\"\n\
             if [ -S \"$s\" ]; then echo \"[STATUS: working] run:$EAGLE_RUN_ID proxy up\"; fi\n\
             read _ < {}\n\
             echo \"[DONE: abandoned] run:$EAGLE_RUN_ID the network is closed\"\n",
            fifo.display()
        ),
    )
    .unwrap();
    home.set(
        "EAGLE_RUNNER__WORKER_COMMAND",
        &format!("bash {} {{prompt}}", script.display()),
    );
    let mut shell = home
        .command(&["shell"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = shell.stdin.take().unwrap();
    use std::io::Write as _;
    input.write_all(b"!queue Try the network\n!go 1\n").unwrap();
    drop(input);

    let store = crate::executor::home_store(&home).await;
    let socket = socket_of_run(&store).await;
    let egress = PathBuf::from(format!("{}.egress", socket.display()));
    let (status, body) = ask_all(&egress, &connect("evil.example:443")).await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = ask_all(&egress, &connect("127.0.0.1:5432")).await;
    assert_eq!(status, 403, "Eagle's own database port is out of reach");

    let go = fifo.clone();
    within(
        WAIT,
        "the worker to read its go",
        tokio::task::spawn_blocking(move || std::fs::write(go, b"go\n")),
    )
    .await
    .unwrap()
    .unwrap();
    let out = crate::support::finish(shell, b"", "eagle shell");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("proxy up"), "{stdout}");
    assert!(!egress.exists(), "the proxy's socket outlived its worker");

    let out = home.run(&["shell"], "!status run 1\n");
    let (stdout, _) = text(&out);
    assert!(stdout.contains("network: refused 2 requests: "), "{stdout}");
    assert!(
        stdout.contains("1 to `evil.example:443` (last "),
        "{stdout}"
    );
    assert!(stdout.contains("1 to `127.0.0.1:5432` (last "), "{stdout}");
    assert!(
        stdout.contains("evil.example:443 is not in runner.sandbox.allow_hosts)"),
        "{stdout}"
    );
}

/// The real key of the tests: only the fake model API may ever see it.
const REAL_KEY: &str = "sk-ant-real-key-of-the-egress-tests";

/// What a fake API saw: method, target, `x-api-key`, `authorization`.
type Seen = Arc<std::sync::Mutex<Vec<(String, String, Option<String>, Option<String>)>>>;

/// A fake of the model API (and of a host a worker may GET from): the
/// Messages API answers server-sent events, the first at once and the
/// rest when the test says (`go`), so only a proxy that streams passes
/// the first on in time.
#[derive(Clone)]
struct FakeApi {
    seen: Seen,
    go: Arc<tokio::sync::Notify>,
}

/// An answer body fed by a channel: what the handler sends, when it sends it.
struct ChannelBody(tokio::sync::mpsc::Receiver<hyper::body::Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = hyper::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(hyper::body::Frame::data(c))))
    }
}

impl FakeApi {
    fn new() -> FakeApi {
        FakeApi {
            seen: Arc::default(),
            go: Arc::new(tokio::sync::Notify::new()),
        }
    }

    fn app(&self) -> axum::Router {
        async fn any(
            axum::extract::State(api): axum::extract::State<FakeApi>,
            request: axum::extract::Request,
        ) -> axum::response::Response {
            // (In a block: a borrow of the request held across an await
            // would make the handler's future not Send.)
            let seen = {
                let header = |name: &str| {
                    request
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(String::from)
                };
                let target = request
                    .uri()
                    .path_and_query()
                    .map_or("/".to_string(), |pq| pq.to_string());
                (
                    request.method().to_string(),
                    target,
                    header("x-api-key"),
                    header("authorization"),
                )
            };
            api.seen.lock().unwrap().push(seen);
            let path = request.uri().path().to_string();
            let body = axum::body::to_bytes(request.into_body(), 1 << 20)
                .await
                .unwrap_or_default();
            match path.as_str() {
                "/v1/messages" if body.starts_with(b"hold") => {
                    let (tx, rx) = tokio::sync::mpsc::channel(4);
                    let go = Arc::clone(&api.go);
                    tokio::spawn(async move {
                        let _ = tx.send("event: message_start\ndata: {}\n\n".into()).await;
                        go.notified().await;
                        let _ = tx.send("event: message_stop\ndata: {}\n\n".into()).await;
                    });
                    axum::response::Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(axum::body::Body::new(ChannelBody(rx)))
                        .unwrap()
                }
                "/v1/messages" => "event: message_stop\ndata: {}\n\n".into_response_text(),
                "/v1/messages/count_tokens" => "{\"input_tokens\":3}".into_response_text(),
                "/" => "hello".into_response_text(),
                _ => axum::response::Response::builder()
                    .status(404)
                    .body(axum::body::Body::from("no such call"))
                    .unwrap(),
            }
        }
        axum::Router::new().fallback(any).with_state(self.clone())
    }

    /// Serves the fake over TLS with a certificate for `localhost` from
    /// `ca`; returns its port.
    async fn serve_tls(&self, ca: &TestCa) -> u16 {
        let listener = TlsListener::bind(ca.server(&["localhost"])).await;
        let port = listener.port();
        let app = self.app();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        port
    }

    /// Serves the fake over plain HTTP; returns its port.
    async fn serve_plain(&self) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = self.app();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        port
    }

    fn seen(&self) -> Vec<(String, String, Option<String>, Option<String>)> {
        self.seen.lock().unwrap().clone()
    }
}

trait IntoResponseText {
    fn into_response_text(self) -> axum::response::Response;
}

impl IntoResponseText for &str {
    fn into_response_text(self) -> axum::response::Response {
        axum::response::Response::new(axum::body::Body::from(self.to_string()))
    }
}

/// An HTTP/1.1 client over a connection through the proxy.
type Client = hyper::client::conn::http1::SendRequest<http_body_util::Full<hyper::body::Bytes>>;

/// A client of `target` through the proxy at `path`: a CONNECT tunnel in
/// which TLS is spoken, trusting only `root` (Eagle's authority).
async fn tls_client(
    path: &Path,
    target: &str,
    root: &rustls::pki_types::CertificateDer<'static>,
) -> Client {
    let (status, head, stream) = ask(path, &connect(target)).await;
    assert_eq!(status, 200, "{head}");
    let name = target.rsplit_once(':').unwrap().0.to_string();
    let tls = tokio_rustls::TlsConnector::from(TestCa::client(&[root]))
        .connect(
            rustls::pki_types::ServerName::try_from(name).unwrap(),
            stream,
        )
        .await
        .expect("the proxy answers TLS with a certificate of Eagle's authority");
    http_client(tls).await
}

async fn http_client<IO>(io: IO) -> Client
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .unwrap();
    tokio::spawn(connection);
    sender
}

/// Sends a request; returns the status and the whole body.
async fn call(client: &mut Client, request: http::Request<String>) -> (u16, String) {
    use http_body_util::BodyExt as _;
    let request = request.map(|b| http_body_util::Full::new(hyper::body::Bytes::from(b)));
    let answered = within(WAIT, "an answer", async {
        client.ready().await?;
        let response = client.send_request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, hyper::Error>((status, String::from_utf8_lossy(&body).into_owned()))
    })
    .await;
    answered.unwrap_or_else(|e| (0, e.to_string()))
}

fn post(target: &str, key: &[(&str, &str)], body: &str) -> http::Request<String> {
    let mut request = http::Request::post(target).header("host", "ignored.example");
    for (name, value) in key {
        request = request.header(*name, *value);
    }
    request.body(body.to_string()).unwrap()
}

fn gate(base: &str, header: KeyHeader) -> Arc<ModelGate> {
    Arc::new(
        ModelGate::new(
            &url::Url::parse(base).unwrap(),
            eagle::executor::runner::CLAUDE_CALLS,
            header,
            &secrecy::SecretString::from(REAL_KEY),
        )
        .unwrap(),
    )
}

/// Eagle's authority (made for the test), and the proxy's TLS trusting
/// the test's authority as a `model_ca_file` would.
fn interception(model_ca: &TestCa) -> Arc<Interception> {
    Arc::new(Interception {
        authority: Arc::new(Authority::ephemeral().unwrap()),
        upstream: egress::upstream::client_config(std::slice::from_ref(&model_ca.cert)).unwrap(),
    })
}

async fn the_model_api_gets_the_real_key_and_only_its_calls(db: Db) {
    let world = World::new(db).await;
    let ca = TestCa::new();
    let api = FakeApi::new();
    let port = api.serve_tls(&ca).await;
    let through = interception(&ca);
    let root = through.authority.cert_der().clone();
    let target = format!("localhost:{port}");
    let proxy = world.reading_proxy(
        "p",
        hosts(&[&target]),
        EgressLimits::default(),
        Some(Arc::clone(&through)),
        Some(gate(
            &format!("https://localhost:{port}"),
            KeyHeader::ApiKey,
        )),
    );
    let placeholder = [("x-api-key", PLACEHOLDER)];

    // The worker's call, with the placeholder: the model API gets the real
    // key, the answer streams (its first event arrives before the rest is
    // sent), and the connection carries the next call too.
    let mut client = tls_client(proxy.path(), &target, &root).await;
    {
        use http_body_util::BodyExt as _;
        client.ready().await.unwrap();
        let request = post("/v1/messages?beta=true", &placeholder, "hold")
            .map(|b| http_body_util::Full::new(hyper::body::Bytes::from(b)));
        let response = within(WAIT, "the answer's head", client.send_request(request))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.into_body();
        let first = within(WAIT, "the first event, streamed", body.frame())
            .await
            .unwrap()
            .unwrap();
        assert!(
            String::from_utf8_lossy(first.data_ref().unwrap()).contains("message_start"),
            "{first:?}"
        );
        api.go.notify_one();
        let rest = within(WAIT, "the rest", body.collect())
            .await
            .unwrap()
            .to_bytes();
        assert!(String::from_utf8_lossy(&rest).contains("message_stop"));
    }
    let bearer = format!("Bearer {PLACEHOLDER}");
    assert_eq!(
        call(
            &mut client,
            post(
                "/v1/messages/count_tokens?beta=true",
                &[("authorization", &bearer)],
                "{}"
            )
        )
        .await,
        (200, "{\"input_tokens\":3}".to_string())
    );
    // Another path, another key: refused with the reason, never sent.
    let (status, body) = call(&mut client, post("/v1/files", &placeholder, "the checkout")).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("POST /v1/files is not a call of the model API Eagle forwards"),
        "{body}"
    );
    let mut client = tls_client(proxy.path(), &target, &root).await;
    let (status, body) = call(
        &mut client,
        post(
            "/v1/messages",
            &[("x-api-key", "sk-ant-attackers-own")],
            "{}",
        ),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("carries a key other than the placeholder"),
        "{body}"
    );
    assert!(!body.contains("sk-ant-attackers-own") && !body.contains(REAL_KEY));
    let mut client = tls_client(proxy.path(), &target, &root).await;
    let (status, body) = call(&mut client, post("/v1/messages", &[], "{}")).await;
    assert_eq!(status, 403, "{body}");
    let mut client = tls_client(proxy.path(), &target, &root).await;
    let (status, _) = call(
        &mut client,
        http::Request::get("/v1/models")
            .header("x-api-key", PLACEHOLDER)
            .body(String::new())
            .unwrap(),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(
        api.seen(),
        vec![
            (
                "POST".into(),
                "/v1/messages?beta=true".into(),
                Some(REAL_KEY.into()),
                None
            ),
            (
                "POST".into(),
                "/v1/messages/count_tokens?beta=true".into(),
                Some(REAL_KEY.into()),
                None
            ),
        ]
    );
    // A client that trusts only the system's roots does not take Eagle's
    // certificate: the worker must be told to trust it.
    let (status, _, stream) = ask(proxy.path(), &connect(&target)).await;
    assert_eq!(status, 200);
    let refused = tokio_rustls::TlsConnector::from(TestCa::client(&[&ca.cert]))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            stream,
        )
        .await;
    assert!(refused.is_err());
    proxy.stop().await;
    assert_eq!(
        world.refusals().await,
        vec![("localhost".to_string(), i64::from(port), 4)]
    );

    // A model API on plain HTTP (a local server): the same rule for
    // requests by absolute URI, the key sent as a bearer token if that is
    // how Eagle holds it.
    let plain = FakeApi::new();
    let plain_port = plain.serve_plain().await;
    let base = format!("http://127.0.0.1:{plain_port}");
    let proxy = world.reading_proxy(
        "q",
        hosts(&[&format!("127.0.0.1:{plain_port}")]),
        EgressLimits::default(),
        None,
        Some(gate(&base, KeyHeader::Bearer)),
    );
    let stream = UnixStream::connect(proxy.path()).await.unwrap();
    let mut client = http_client(stream).await;
    assert_eq!(
        call(
            &mut client,
            post(&format!("{base}/v1/messages"), &placeholder, "{}")
        )
        .await
        .0,
        200
    );
    let (status, body) = call(
        &mut client,
        post(&format!("{base}/v1/files"), &placeholder, "{}"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    // Elsewhere on the same connection: not this connection's host.
    let stream = UnixStream::connect(proxy.path()).await.unwrap();
    let mut client = http_client(stream).await;
    assert_eq!(
        call(
            &mut client,
            post(&format!("{base}/v1/messages"), &placeholder, "{}")
        )
        .await
        .0,
        200
    );
    let (status, body) = call(
        &mut client,
        post("http://127.0.0.2:9/v1/messages", &placeholder, "{}"),
    )
    .await;
    assert_eq!(status, 421, "{body}");
    proxy.stop().await;
    let bearer = format!("Bearer {REAL_KEY}");
    assert_eq!(
        plain.seen(),
        vec![
            (
                "POST".into(),
                "/v1/messages".into(),
                None,
                Some(bearer.clone())
            ),
            ("POST".into(), "/v1/messages".into(), None, Some(bearer)),
        ]
    );
}

async fn a_host_limited_to_some_methods_gets_only_those(db: Db) {
    let world = World::new(db).await;
    let ca = TestCa::new();
    let api = FakeApi::new();
    let tls_port = api.serve_tls(&ca).await;
    let plain_port = api.serve_plain().await;
    let through = interception(&ca);
    let root = through.authority.cert_der().clone();
    let allow = hosts(&[
        &format!("localhost:{tls_port} GET HEAD"),
        &format!("127.0.0.1:{plain_port} GET"),
    ]);
    let proxy = world.reading_proxy(
        "p",
        Arc::clone(&allow) as Arc<dyn AllowHosts>,
        EgressLimits::default(),
        Some(through),
        None,
    );
    // Through TLS: GET reaches the host, POST does not.
    let target = format!("localhost:{tls_port}");
    let mut client = tls_client(proxy.path(), &target, &root).await;
    let get = || http::Request::get("/").body(String::new()).unwrap();
    assert_eq!(call(&mut client, get()).await, (200, "hello".to_string()));
    let (status, body) = call(&mut client, post("/upload", &[], "the checkout")).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&format!("POST is not allowed to localhost:{tls_port}: runner.sandbox.allow_hosts allows it GET HEAD only")),
        "{body}"
    );
    // Plain HTTP, by absolute URI: the same.
    let base = format!("http://127.0.0.1:{plain_port}");
    let (status, body) = ask_all(
        proxy.path(),
        format!("POST {base}/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc")
            .as_bytes(),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = ask_all(
        proxy.path(),
        format!("GET {base}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("hello"), "{body}");
    proxy.stop().await;
    let seen: Vec<(String, String)> = api.seen().into_iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(
        seen,
        vec![("GET".into(), "/".into()), ("GET".into(), "/".into())]
    );
    let mut refusals = world.refusals().await;
    refusals.sort();
    assert_eq!(
        refusals,
        vec![
            ("127.0.0.1".to_string(), i64::from(plain_port), 1),
            ("localhost".to_string(), i64::from(tls_port), 1),
        ]
    );

    // A proxy that cannot read TLS refuses the tunnel rather than let
    // every method through.
    let blind = world.proxy("q", allow, EgressLimits::default());
    let (status, body) = ask_all(blind.path(), &connect(&target)).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("cannot read TLS"), "{body}");
    blind.stop().await;
}

async fn bad_requests_in_a_read_connection_are_refused_without_harm(db: Db) {
    let world = World::new(db).await;
    let ca = TestCa::new();
    let api = FakeApi::new();
    let port = api.serve_tls(&ca).await;
    let through = interception(&ca);
    let root = through.authority.cert_der().clone();
    let target = format!("localhost:{port}");
    let limits = EgressLimits {
        max_head_bytes: 4096,
        ..EgressLimits::default()
    };
    let proxy = world.reading_proxy(
        "p",
        hosts(&[&target]),
        limits,
        Some(Arc::clone(&through)),
        Some(gate(
            &format!("https://localhost:{port}"),
            KeyHeader::ApiKey,
        )),
    );
    /// Opens TLS through the proxy and sends `bytes`; returns what came back.
    async fn raw(
        path: &Path,
        target: &str,
        root: &rustls::pki_types::CertificateDer<'static>,
        bytes: Vec<u8>,
        close: bool,
    ) -> String {
        let (status, _, stream) = ask(path, &connect(target)).await;
        assert_eq!(status, 200);
        let mut tls = tokio_rustls::TlsConnector::from(TestCa::client(&[root]))
            .connect(
                rustls::pki_types::ServerName::try_from("localhost").unwrap(),
                stream,
            )
            .await
            .unwrap();
        let _ = tls.write_all(&bytes).await;
        if close {
            // Hangs up in the middle of its request.
            return String::new();
        }
        let mut back = Vec::new();
        let _ = within(WAIT, "the proxy's answer", tls.read_to_end(&mut back)).await;
        String::from_utf8_lossy(&back).into_owned()
    }
    let huge = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(8192)
    );
    for (bytes, close, says) in [
        (b"\x00\x01garbage\r\n\r\n".to_vec(), false, "400"),
        (b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n".to_vec(), false, "400"),
        (huge.into_bytes(), false, "431"),
        (format!("POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {PLACEHOLDER}\r\nContent-Length: 100\r\n\r\n{{\"half").into_bytes(), true, ""),
    ] {
        let back = raw(proxy.path(), &target, &root, bytes, close).await;
        assert!(close || back.starts_with(&format!("HTTP/1.1 {says} ")), "{back}");
    }
    // TLS that is not TLS.
    let (status, _, mut stream) = ask(proxy.path(), &connect(&target)).await;
    assert_eq!(status, 200);
    stream
        .write_all(b"\x16\x03\x01\x00\x05hello")
        .await
        .unwrap();
    let mut rest = Vec::new();
    let _ = within(
        WAIT,
        "the end of a bad handshake",
        stream.read_to_end(&mut rest),
    )
    .await;
    // Still serving the model API.
    let mut client = tls_client(proxy.path(), &target, &root).await;
    assert_eq!(
        call(
            &mut client,
            post("/v1/messages", &[("x-api-key", PLACEHOLDER)], "{}")
        )
        .await
        .0,
        200
    );
    proxy.stop().await;
    assert!(api.seen().iter().all(|s| s.2.as_deref() == Some(REAL_KEY)));
}
