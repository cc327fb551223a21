//! Shared test helpers: scratch directories, the `eagle` binary,
//! throw-away PostgreSQL schemas, and servers for real git remotes
//! ([`git_http`]) and package downloads ([`package_index`]), and TLS for
//! fakes standing for HTTPS hosts ([`tls`]).

mod child;
pub mod git_http;
pub mod package_index;
mod plugin_cache;
pub mod tls;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use eagle::profile::DatabaseUrl;
use eagle::store::Store;
use sqlx::Connection;

pub use child::{CHILD_DEADLINE, WAIT, exit_within, finish, within};

/// The PostgreSQL server the tests use.
pub fn postgres_url() -> String {
    std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A PostgreSQL schema of this test's own, dropped when the guard goes (also
/// when the test panics), so that runs never collide.
pub struct PgSchema {
    pub name: String,
}

impl PgSchema {
    pub async fn create() -> PgSchema {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!(
            "eagle_t_{}_{}_{:x}",
            std::process::id(),
            n,
            fastrand::u32(..)
        );
        let mut conn = sqlx::PgConnection::connect(&postgres_url())
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {} is required: {e}", postgres_url()));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
            .execute(&mut conn)
            .await
            .expect("create schema");
        conn.close().await.ok();
        PgSchema { name }
    }

    /// A database URL whose connections live in this schema.
    pub fn url(&self) -> String {
        let base = postgres_url();
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}options[search_path]={}", self.name)
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs outside any runtime we may use; give the clean-up its own.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&postgres_url()).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP SCHEMA IF EXISTS {name} CASCADE"
                    )))
                    .execute(&mut conn)
                    .await;
                }
            });
        })
        .join();
    }
}

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
}

/// A database for one test: a SQLite file in a scratch directory, or a
/// PostgreSQL schema.
pub struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    _schema: Option<PgSchema>,
}

impl TestDb {
    pub async fn new(db: Db) -> TestDb {
        match db {
            Db::Sqlite => {
                let dir = tempfile::tempdir().expect("tempdir");
                let url = format!(
                    "sqlite://{}?mode=rwc",
                    dir.path().join("eagle.db").display()
                );
                TestDb {
                    url,
                    _dir: Some(dir),
                    _schema: None,
                }
            }
            Db::Postgres => {
                let schema = PgSchema::create().await;
                TestDb {
                    url: schema.url(),
                    _dir: None,
                    _schema: Some(schema),
                }
            }
        }
    }

    /// The PostgreSQL schema the database lives in (`None` on SQLite).
    pub fn schema(&self) -> Option<&str> {
        self._schema.as_ref().map(|s| s.name.as_str())
    }

    pub async fn open(&self) -> Store {
        Store::open(&DatabaseUrl::new(self.url.clone()))
            .await
            .expect("open store")
    }
}

/// Puts the built-in plugins, compiled once per test process, in the
/// plugin caches of a data directory the test does not get from [`Home`].
pub fn seed_plugin_cache(data_dir: &Path) {
    plugin_cache::seed(data_dir);
}

/// The `eagle` binary built for these tests, where the test worker user
/// can run it: the build itself when every directory above it lets others
/// pass, else a copy in a directory of its own under the system's temporary
/// directory (one per build, kept for the next test process).
pub fn eagle_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| reachable_copy(Path::new(env!("CARGO_BIN_EXE_eagle"))))
        .clone()
}

/// A test file (a script, a folder of inputs) where the test worker user can
/// read it: in place when it can, else a copy beside [`eagle_bin`]'s.
pub fn reachable(path: &Path) -> PathBuf {
    reachable_copy(path)
}

/// Whether another user can reach `path` (every directory above it passable,
/// the file itself readable by others).
fn passable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode())
            .unwrap_or(0)
    };
    path.ancestors()
        .skip(1)
        .all(|dir| dir.as_os_str().is_empty() || mode(dir) & 0o001 != 0)
        && mode(path) & 0o004 != 0
}

fn reachable_copy(path: &Path) -> PathBuf {
    if passable(path) {
        return path.to_path_buf();
    }
    let meta = std::fs::metadata(path).expect("the file to copy");
    let stamp = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir()
        .join(format!("eagle-test-files-{}", eagle::ground::host::euid()))
        .join(format!("{}-{stamp:x}", meta.len()));
    std::fs::create_dir_all(&dir).unwrap();
    for d in [dir.parent().unwrap(), dir.as_path()] {
        eagle::ground::host::chmod(d, 0o755).unwrap();
    }
    let target = dir.join(path.file_name().unwrap());
    if !target.exists() {
        let partial = dir.join(format!(
            ".partial-{}-{:x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        let copied = Command::new("cp")
            .arg("-R")
            .arg(path)
            .arg(&partial)
            .status()
            .expect("cp");
        assert!(copied.success(), "cannot copy {}", path.display());
        Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(&partial)
            .status()
            .expect("chmod");
        let _ = std::fs::rename(&partial, &target);
        let _ = std::fs::remove_dir_all(&partial);
        let _ = std::fs::remove_file(&partial);
    }
    target
}

/// The Unix user the tests' workers and analysis commands run as (Eagle
/// refuses to run them as root): created once per test process if missing,
/// never removed (another test process may be using it).
pub fn worker_user() -> &'static str {
    const NAME: &str = "eagle-test-worker";
    static MADE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        let exists = || {
            Command::new("id")
                .arg(NAME)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if exists() || eagle::ground::host::euid() != 0 {
            return;
        }
        let out = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                NAME,
            ])
            .output()
            .expect("useradd");
        // Another test process may have made it meanwhile.
        assert!(
            out.status.success() || exists(),
            "useradd {NAME}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    NAME
}

/// How many migrations there are (the files of `migrations/sqlite`).
pub fn migration_count() -> usize {
    std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations/sqlite"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sql"))
        })
        .count()
}

/// The repository's own profiles directory.
pub fn repo_profiles() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles")
}

/// A scratch home for running the binary: a copy of the shipped profiles and
/// a data directory that holds nothing but the compiled built-in plugins.
pub struct Home {
    pub dir: tempfile::TempDir,
    pub env: BTreeMap<String, String>,
}

impl Home {
    /// A home whose profiles find the built-in plugins compiled already
    /// (one verified cache, made once per test process and copied here).
    pub fn new() -> Home {
        let home = Home::without_compiled_plugins();
        plugin_cache::seed(&home.dir.path().join("data"));
        home
    }

    /// A home with an empty data directory: its first run compiles the
    /// plugins it loads.
    pub fn without_compiled_plugins() -> Home {
        let dir = tempfile::tempdir().expect("tempdir");
        let profiles = dir.path().join("profiles");
        std::fs::create_dir_all(&profiles).unwrap();
        for entry in std::fs::read_dir(repo_profiles()).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            if name.ends_with(".toml") || name.ends_with(".md") {
                std::fs::copy(&path, profiles.join(name)).unwrap();
            }
        }
        // Workers run as the test worker user, who must pass through (not list).
        eagle::ground::host::chmod(dir.path(), 0o711).unwrap();
        let mut env = BTreeMap::new();
        if eagle::ground::host::euid() == 0 {
            env.insert("EAGLE_RUNNER__WORKER_USER".into(), worker_user().into());
            env.insert("EAGLE_ANALYZER__WORKER_USER".into(), worker_user().into());
        }
        env.insert("HOME".into(), dir.path().display().to_string());
        env.insert("PATH".into(), std::env::var("PATH").unwrap_or_default());
        env.insert("EAGLE_PROFILES_DIR".into(), profiles.display().to_string());
        env.insert(
            "EAGLE_DATA_DIR".into(),
            dir.path().join("data").display().to_string(),
        );
        // The fake workers live in this repository and the tests' files in
        // temporary directories, which a confined worker cannot reach: the
        // sandbox is tried by `sandbox.rs` (and tests that turn it on).
        env.insert("EAGLE_RUNNER__SANDBOX__MODE".into(), "off".into());
        Home { dir, env }
    }

    /// A directory in the home that workers (another user) may write to,
    /// for files a test and its workers exchange.
    pub fn exchange(&self) -> PathBuf {
        let dir = self.dir.path().join("exchange");
        if !dir.exists() {
            std::fs::create_dir(&dir).unwrap();
            eagle::ground::host::chmod(&dir, 0o1777).unwrap();
        }
        dir
    }

    pub fn profiles(&self) -> PathBuf {
        self.dir.path().join("profiles")
    }

    pub fn set(&mut self, key: &str, value: &str) -> &mut Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// A `Command` for the binary with exactly this home's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(eagle_bin());
        cmd.args(args)
            .env_clear()
            .envs(&self.env)
            .current_dir(self.dir.path());
        cmd
    }

    /// Runs the binary with `stdin` as input, for at most [`CHILD_DEADLINE`].
    pub fn run(&self, args: &[&str], stdin: &str) -> Output {
        let child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn eagle");
        finish(
            child,
            stdin.as_bytes(),
            &format!("eagle {}", args.join(" ")),
        )
    }
}

/// Runs `eagle shell` with `input` in a blocking thread, so that fakes on
/// this test's runtime answer meanwhile: standard output, error, success.
pub async fn shell_in_thread(home: &Home, input: &str) -> (String, String, bool) {
    let (env, dir, input) = (
        home.env.clone(),
        home.dir.path().to_path_buf(),
        input.to_string(),
    );
    tokio::task::spawn_blocking(move || {
        let child = Command::new(eagle_bin())
            .arg("shell")
            .env_clear()
            .envs(&env)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn eagle shell");
        let out = finish(child, input.as_bytes(), "eagle shell");
        let (stdout, stderr) = text(&out);
        (stdout, stderr, out.status.success())
    })
    .await
    .expect("the shell's thread")
}

/// Standard output and error as text, for assertions.
pub fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Where the build script put the guest plugins (shared with the fixtures).
pub fn plugins_target_dir() -> PathBuf {
    PathBuf::from(env!("BUILT_PLUGINS_TARGET_DIR"))
}

fn wasm_path(stem: &str) -> PathBuf {
    plugins_target_dir()
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", stem.replace('-', "_")))
}

/// A test plugin from `tests/plugins/<name>`, built from source on first use.
pub fn fixture(name: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/plugins/Cargo.toml");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let output = Command::new(cargo)
            .args([
                "build",
                "--release",
                "--locked",
                "--target",
                "wasm32-wasip2",
            ])
            .arg("--manifest-path")
            .arg(&manifest)
            .arg("--target-dir")
            .arg(plugins_target_dir())
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    });
    if let Err(error) = built {
        panic!("building the plugin fixtures failed:\n{error}");
    }
    let path = wasm_path(name);
    assert!(path.is_file(), "no fixture {}", path.display());
    path
}

/// A default plugin as a file (the same bytes the binary ships).
pub fn builtin_file(name: &str) -> PathBuf {
    let path = wasm_path(name);
    assert!(path.is_file(), "no built-in plugin {}", path.display());
    path
}

/// One compiled-plugin cache for the whole test run, so each plugin compiles once.
pub fn shared_plugin_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("eagle-plugin-cache")
}
