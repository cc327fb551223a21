//! Profile loading: the file, environment overrides, the zuliprc, and the
//! message each bad value gets.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::*;

const MINIMAL: &str = r#"
role = "orchestrator"
data_dir = "data"
"#;

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Self {
        Dir(tempfile::tempdir().expect("tempdir"))
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn write(&self, name: &str, text: &str) -> &Self {
        std::fs::write(self.path().join(name), text).expect("write");
        self
    }
    fn load(&self, name: &str, env: &[(&str, &str)]) -> Result<Profile, ProfileError> {
        Profile::load(self.path(), name, &env_of(env))
    }
    fn error(&self, name: &str, env: &[(&str, &str)]) -> String {
        self.load(name, env)
            .expect_err("profile should be refused")
            .to_string()
    }
}

fn env_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.entry("HOME".into())
        .or_insert_with(|| "/home/tester".into());
    env
}

#[test]
fn loads_the_shipped_profiles() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
    let env = env_of(&[]);
    let eagle = Profile::load(&dir, "eagle", &env).expect("eagle.toml");
    assert_eq!(eagle.role, Role::Orchestrator);
    assert_eq!(eagle.display_name, "Eagle");
    assert!(eagle.channels.is_empty());
    assert_eq!(eagle.executor_channel, "executor");
    assert!(eagle.listens_in("General"));
    assert!(
        eagle
            .persona
            .as_ref()
            .is_some_and(|p| matches!(p, super::Persona::File(p) if p.ends_with("eagle.soul.md")))
    );
    assert_eq!(eagle.data_dir, Path::new("/home/tester/.local/share/eagle"));
    assert_eq!(
        eagle.database_url.expose(),
        "sqlite:///home/tester/.local/share/eagle/eagle.db?mode=rwc"
    );
    assert_eq!(eagle.eagle.policy.plugins.len(), 2);
    let executor = Profile::load(&dir, "executor", &env).expect("executor.toml");
    assert_eq!(executor.role, Role::Executor);
    assert_eq!(executor.display_name, "Исполнитель");
    // Both profiles share one database by default, and keep their own state.
    assert_eq!(executor.database_url.expose(), eagle.database_url.expose());
    assert_ne!(executor.state_dir(), eagle.state_dir());
    assert_eq!(
        executor.plugin_cache_dir(),
        Path::new("/home/tester/.local/share/eagle/executor/plugin-cache")
    );
}

#[test]
fn xdg_data_home_wins_over_home() {
    let dir = Dir::new();
    dir.write("p.toml", "role = \"executor\"\n");
    let profile = dir.load("p", &[("XDG_DATA_HOME", "/xdg")]).unwrap();
    assert_eq!(profile.data_dir, Path::new("/xdg/eagle"));
    // A relative XDG_DATA_HOME is invalid by the spec and ignored.
    let profile = dir.load("p", &[("XDG_DATA_HOME", "rel")]).unwrap();
    assert_eq!(
        profile.data_dir,
        Path::new("/home/tester/.local/share/eagle")
    );
}

#[test]
fn relative_paths_follow_their_origin() {
    let dir = Dir::new();
    dir.write("p.toml", MINIMAL);
    let profile = dir.load("p", &[]).unwrap();
    assert_eq!(profile.data_dir, dir.path().join("data"));
    assert_eq!(profile.zuliprc, dir.path().join("p.zuliprc"));
    // From the environment, relative to the working directory.
    let profile = dir.load("p", &[("EAGLE_DATA_DIR", "elsewhere")]).unwrap();
    assert_eq!(profile.data_dir, Path::new("elsewhere"));
}

#[test]
fn environment_overrides_scalars_lists_and_nested_keys() {
    let dir = Dir::new();
    dir.write(
        "p.toml",
        "role = \"orchestrator\"\napprovers = [\"a@example.com\"]\nchannels = [\"one\"]\n",
    );
    let profile = dir
        .load(
            "p",
            &[
                ("EAGLE_APPROVERS", "bob@example.com, 42"),
                ("EAGLE_CHANNELS", "executor,general"),
                ("EAGLE_OWNER", "7"),
                ("EAGLE_DISPLAY_NAME", "Орёл"),
                ("EAGLE_ZULIP__LATE_COMMAND_AGE", "2h"),
                ("EAGLE_POLICY__LOAD_ALL", "true"),
                ("EAGLE_DATABASE_URL", "postgres://eagle:pw@db/eagle"),
                ("EAGLE_PROFILES_DIR", "/ignored/reserved"),
            ],
        )
        .unwrap();
    assert_eq!(
        profile.approvers,
        vec![UserRef::Email("bob@example.com".into()), UserRef::Id(42)]
    );
    assert_eq!(profile.channels, vec!["executor", "general"]);
    assert_eq!(profile.owner, Some(UserRef::Id(7)));
    assert_eq!(profile.display_name, "Орёл");
    assert_eq!(profile.zulip.late_command_age, Duration::from_secs(7200));
    assert!(profile.eagle.policy.load_all);
    assert!(profile.database_url.is_postgres());
    assert_eq!(
        profile.database_url.redacted(),
        "postgres://eagle:***@db/eagle"
    );
    let with_param = DatabaseUrl::new("postgres://eagle@db/eagle?sslmode=require&password=s3cret");
    assert_eq!(
        with_param.redacted(),
        "postgres://eagle@db/eagle?sslmode=require&password=***"
    );
    assert!(!format!("{with_param:?}").contains("s3cret"));
    // A '#' in a password: nothing after it is shown either.
    for url in [
        "postgres://eagle@db/eagle?password=s3c#ret",
        "postgres://eagle:s3c#ret@db/eagle",
        "postgres://eagle:5432#ret@db/eagle",
    ] {
        let shown = DatabaseUrl::new(url).redacted();
        assert!(!shown.contains("ret"), "{url} → {shown}");
    }
    // An empty list override empties the list.
    let profile = dir.load("p", &[("EAGLE_APPROVERS", "")]).unwrap();
    assert!(profile.approvers.is_empty());
}

#[test]
fn eagle_with_approvers_and_no_owner_is_refused() {
    let dir = Dir::new();
    dir.write("p.toml", "role = \"orchestrator\"\napprovers = [42]\n");
    let error = dir.load("p", &[]).unwrap_err().to_string();
    assert!(error.contains("owner: is missing"), "{error}");
    assert!(error.contains("@-mentions the owner"), "{error}");
    // The executor names no owner of its own; an override fixes Eagle's.
    assert!(dir.load("p", &[("EAGLE_OWNER", "42")]).is_ok());
    dir.write("x.toml", "role = \"executor\"\napprovers = [42]\n");
    assert!(dir.load("x", &[]).is_ok());
}

#[test]
fn approvers_match_by_id_or_email_ignoring_case() {
    let dir = Dir::new();
    dir.write(
        "p.toml",
        "role = \"orchestrator\"\napprovers = [\"Alex@Example.com\", 42]\nowner = 42\n",
    );
    let profile = dir.load("p", &[]).unwrap();
    assert!(profile.is_approver(1, "alex@example.com"));
    assert!(profile.is_approver(42, "user42@zulip.invalid"));
    assert!(!profile.is_approver(43, "mallory@example.com"));
}

#[test]
fn bad_values_name_file_key_and_problem() {
    let dir = Dir::new();
    let file = |name: &str| dir.path().join(name).display().to_string();
    /// Profile text, a secret that must not appear, environment, expected error.
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], String);
    let cases: &[Case<'_>] = &[
        (
            "role = \"orchestrator\"\napprovers = [\"alex@example.com\", \"bob\"]\n",
            "",
            &[],
            format!("{}: approvers[1]: \"bob\" is neither an email nor a user id", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\n",
            "",
            &[("EAGLE_APPROVERS", "alex@example.com,bob")],
            "EAGLE_APPROVERS (environment): approvers[1]: \"bob\" is neither an email nor a user id".into(),
        ),
        (
            "role = \"boss\"\n",
            "",
            &[],
            format!("{}: role: \"boss\" is not a role (use \"orchestrator\" or \"executor\")", file("p.toml")),
        ),
        (
            "display_name = \"x\"\n",
            "",
            &[],
            format!("{}: role: missing (use \"orchestrator\" or \"executor\")", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\ndatabase_url = \"mysql://root:hunter2@db/x\"\n",
            "hunter2",
            &[],
            format!("{}: database_url: unsupported scheme \"mysql\" (use sqlite:PATH or postgres://USER@HOST/DB)", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\ndatabase_url = \"host=db password=hunter2 dbname=eagle\"\n",
            "hunter2",
            &[],
            format!("{}: database_url: not a URL (use sqlite:PATH or postgres://USER@HOST/DB)", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\nowner = -3\n",
            "",
            &[],
            format!("{}: owner: -3 is not a valid user id", file("p.toml")),
        ),
        (
            "role = \"executor\"\n[runner]\nworker_command = \"claude -p --verbose\"\n",
            "",
            &[],
            format!("{}: runner.worker_command: \"claude -p --verbose\" does not pass the prompt: put {{prompt}} where the program takes it", file("p.toml")),
        ),
        (
            "role = \"executor\"\n[runner]\nworker_command = \"run {task_text} {prompt}\"\n",
            "",
            &[],
            format!("{}: runner.worker_command: {{task_text}} is not a placeholder (use {{prompt}}, {{workdir}}, {{run}}, {{task}}, {{attempt}})", file("p.toml")),
        ),
        (
            "role = \"executor\"\n[runner]\nworker_env = [\"ANTHROPIC_API_KEY\", \"ZULIP_API_KEY\"]\n",
            "",
            &[],
            format!("{}: runner.worker_env[1]: ZULIP_API_KEY is Eagle's own: a worker must never hold it", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\n[asana]\nworkspace = \"1\"\n[[asana.projects]]\ngid = \"2\"\nsource = \"bugs\"\nrepo = \"../web\"\n",
            "",
            &[("ASANA_TOKEN", "t")],
            format!("{}: asana.projects[0]: repo \"../web\" is not a repository's name as [[runner.repos]] gives it (1 to 40 letters, digits, `-`, `_`)", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\n[asana]\nworkspace = \"1\"\n[[asana.projects]]\ngid = \"2\"\nsource = \"bugs\"\nrepo = \"web\"\n[[asana.sections]]\ngid = \"3\"\nsource = \"bugs\"\nrepo = \"api\"\n",
            "",
            &[("ASANA_TOKEN", "t")],
            format!("{}: asana.sections[0]: source \"bugs\" is given repo \"web\" by another place and \"api\" here", file("p.toml")),
        ),
        (
            "role = \"executor\"\n[runner.sandbox]\nread_only = [\"/opt/tool\", \"opt/other\"]\n",
            "",
            &[],
            format!("{}: runner.sandbox.read_only[1]: \"opt/other\" is not an absolute path without `..`", file("p.toml")),
        ),
        (
            "role = \"executor\"\n[runner.sandbox]\nmode = \"maybe\"\n",
            "",
            &[],
            format!("{}: runner.sandbox.mode: \"maybe\" is neither \"on\" nor \"off\"", file("p.toml")),
        ),
        (
            "role = \"executor\"\n[runner.sandbox]\nallow_hosts = [\"pypi.org\", \"evil host\"]\n",
            "",
            &[],
            format!("{}: runner.sandbox.allow_hosts[1]: \"evil host\": \"host\" is not an HTTP method a host may be limited to (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS)", file("p.toml")),
        ),
        (
            "role = \"executor\"\n[runner.sandbox]\nmax_file_size = \"lots\"\n",
            "",
            &[],
            format!("{}: runner.sandbox.max_file_size: \"lots\" is not a size like \"512MiB\" or \"2GiB\"", file("p.toml")),
        ),
        (
            "role = \"executor\"\n[runner.sandbox]\nmax_processes = 0\n",
            "",
            &[],
            format!("{}: runner.sandbox.max_processes: 0 is outside 1..=1048576", file("p.toml")),
        ),
        (
            "role = \"executor\"\n[runner]\nmax_workers = 0\n",
            "",
            &[],
            format!("{}: runner.max_workers: 0 is outside 1..=256", file("p.toml")),
        ),
        (
            "role = \"executor\"\n[runner]\nhard_timeout = \"0s\"\n",
            "",
            &[],
            format!("{}: runner.hard_timeout: must be longer than zero", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\nchannels = [\"a\", \"A\"]\n",
            "",
            &[],
            format!("{}: channels[1]: \"A\" is listed twice (channel names ignore case)", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\n[zulip]\nlate_command_age = \"soon\"\n",
            "",
            &[],
            format!("{}: zulip.late_command_age: \"soon\" is not a duration like \"90s\" or \"24h\" (expected number at 0)", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\n[[policy.plugins]]\nbuiltin = \"nope\"\n",
            "",
            &[],
            format!("{}: policy.plugins[0]: builtin \"nope\" does not exist (built in: default-approval, default-filter)", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\n[[policy.plugins]]\nfile = \"a.wasm\"\nmemory_mib = 0\n",
            "",
            &[],
            format!("{}: policy.plugins[0]: memory_mib 0 is outside 1..=4096", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\n[[policy.plugins]]\nfuel = 5\n",
            "",
            &[],
            format!("{}: policy.plugins[0]: give builtin = \"NAME\" or file = \"PATH.wasm\"", file("p.toml")),
        ),
        (
            "role = \"orchestrator\"\npersona = \"missing.md\"\n",
            "",
            &[],
            format!("{}: persona: {} does not exist", file("p.toml"), file("missing.md")),
        ),
    ];
    for (text, secret, env, want) in cases {
        dir.write("p.toml", text);
        let got = dir.error("p", env);
        assert_eq!(&got, want, "for profile:\n{text}");
        if !secret.is_empty() {
            assert!(!got.contains(secret), "the error leaks a secret: {got}");
        }
    }
}

#[test]
fn structural_errors_name_the_file() {
    let dir = Dir::new();
    dir.write("p.toml", "role = \"orchestrator\"\napprover = []\n");
    let got = dir.error("p", &[]);
    assert!(
        got.starts_with(&dir.path().join("p.toml").display().to_string()),
        "{got}"
    );
    assert!(got.contains("unknown field `approver`"), "{got}");

    dir.write("p.toml", "role = \"orchestrator\"\nchannels = 3\n");
    let got = dir.error("p", &[]);
    assert!(got.contains("channels"), "{got}");

    dir.write("p.toml", "role = = \n");
    let got = dir.error("p", &[]);
    assert!(got.contains("p.toml"), "{got}");

    let got = dir.error("absent", &[]);
    assert_eq!(
        got,
        format!(
            "{}: no such profile file",
            dir.path().join("absent.toml").display()
        )
    );

    let got = dir.error("../etc", &[]);
    assert!(got.contains("not a valid profile name"), "{got}");

    dir.write("p.toml", MINIMAL);
    let got = dir.error("p", &[("EAGLE_APROVERS", "x@example.com")]);
    assert!(
        got.starts_with(
            "EAGLE_APROVERS: not a profile key; the environment may override: EAGLE_ROLE,"
        ),
        "{got}"
    );
}

#[test]
fn plugin_config_tables_become_json() {
    let dir = Dir::new();
    dir.write(
        "p.toml",
        "role = \"orchestrator\"\n[[policy.plugins]]\nfile = \"mine.wasm\"\nfuel = 5000\ntimeout_ms = 20\n\
         [policy.plugins.config]\nplatform = \"macos\"\nsources = [\"a\", \"b\"]\n",
    );
    let profile = dir.load("p", &[]).unwrap();
    let plugin = &profile.eagle.policy.plugins[0];
    assert_eq!(plugin.source, PluginSource::File("mine.wasm".into()));
    assert_eq!(plugin.limits.fuel, 5000);
    assert_eq!(plugin.limits.timeout, Duration::from_millis(20));
    let config: serde_json::Value = serde_json::from_str(&plugin.config_json).unwrap();
    assert_eq!(config["platform"], "macos");
    assert_eq!(config["sources"][1], "b");
}

#[test]
fn the_sandbox_is_on_by_default_and_lets_claude_reach_its_model_api() {
    let dir = Dir::new();
    dir.write(
        "p.toml",
        "role = \"executor\"\n[runner]\nworker_command = \"claude -p {prompt}\"\nworker_env = [\"ANTHROPIC_BASE_URL\"]\n",
    );
    let profile = dir.load("p", &[]).unwrap();
    let sandbox = &profile.executor.runner.sandbox;
    assert_eq!(sandbox.mode, SandboxMode::On);
    assert!(sandbox.allows("api.anthropic.com", 443));
    assert!(!sandbox.allows("example.com", 443));
    // The worker's own base URL names the model API; Eagle's alone does not.
    let profile = dir
        .load("p", &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:4010")])
        .unwrap();
    assert!(profile.executor.runner.sandbox.allows("127.0.0.1", 4010));
    assert!(
        !profile
            .executor
            .runner
            .sandbox
            .allows("api.anthropic.com", 443)
    );
    dir.write(
        "q.toml",
        "role = \"executor\"\n[runner]\nworker_command = \"claude -p {prompt}\"\n",
    );
    let profile = dir
        .load("q", &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:4010")])
        .unwrap();
    assert!(
        profile
            .executor
            .runner
            .sandbox
            .allows("api.anthropic.com", 443)
    );
    assert!(!profile.executor.runner.sandbox.allows("127.0.0.1", 4010));
}

#[test]
fn sandbox_settings_come_from_the_file_and_the_environment() {
    let dir = Dir::new();
    dir.write(
        "p.toml",
        "role = \"executor\"\n[runner.sandbox]\nmode = \"off\"\nallow_hosts = [\"pypi.org\"]\nmax_file_size = \"64MiB\"\n",
    );
    let profile = dir
        .load(
            "p",
            &[
                (
                    "EAGLE_RUNNER__SANDBOX__ALLOW_HOSTS",
                    "*.crates.io:443, 127.0.0.1:9",
                ),
                ("EAGLE_RUNNER__SANDBOX__MAX_OPEN_FILES", "256"),
            ],
        )
        .unwrap();
    let sandbox = &profile.executor.runner.sandbox;
    assert_eq!(sandbox.mode, SandboxMode::Off);
    assert!(sandbox.allows("static.crates.io", 443));
    assert!(sandbox.allows("127.0.0.1", 9));
    assert!(
        !sandbox.allows("pypi.org", 443),
        "the environment replaces the list"
    );
    assert_eq!(sandbox.max_file_size, 64 << 20);
    assert_eq!(sandbox.max_open_files, 256);
    assert_eq!(sandbox.max_processes, 512);
}

#[test]
fn prune_after_comes_from_store_then_the_old_zulip_retention_and_is_at_least_a_day() {
    let dir = Dir::new();
    let day = Duration::from_secs(24 * 3600);
    dir.write("a.toml", MINIMAL);
    assert_eq!(dir.load("a", &[]).unwrap().eagle.prune_after, 90 * day);
    dir.write(
        "b.toml",
        &format!("{MINIMAL}\n[zulip]\nretention = \"30d\"\n"),
    );
    assert_eq!(dir.load("b", &[]).unwrap().eagle.prune_after, 30 * day);
    dir.write(
        "c.toml",
        &format!("{MINIMAL}\n[zulip]\nretention = \"30d\"\n[store]\nprune_after = \"14d\"\n"),
    );
    assert_eq!(dir.load("c", &[]).unwrap().eagle.prune_after, 14 * day);
    assert_eq!(
        dir.load("c", &[("EAGLE_STORE__PRUNE_AFTER", "7d")])
            .unwrap()
            .eagle
            .prune_after,
        7 * day
    );
    let short = dir.error("a", &[("EAGLE_STORE__PRUNE_AFTER", "3h")]);
    assert!(short.contains("store.prune_after"), "{short}");
    assert!(short.contains("shorter than a day"), "{short}");
}

#[test]
fn the_pool_size_comes_from_the_file_and_the_environment() {
    let dir = Dir::new();
    dir.write(
        "p.toml",
        "role = \"executor\"\n[store]\nmax_connections = 2\n",
    );
    assert_eq!(dir.load("p", &[]).unwrap().store.max_connections, 2);
    let profile = dir
        .load("p", &[("EAGLE_STORE__MAX_CONNECTIONS", "3")])
        .unwrap();
    assert_eq!(profile.store.max_connections, 3);
    dir.write("q.toml", "role = \"executor\"\n");
    assert_eq!(
        dir.load("q", &[]).unwrap().store.max_connections,
        DEFAULT_MAX_CONNECTIONS
    );
    dir.write(
        "r.toml",
        "role = \"executor\"\n[store]\nmax_connections = 1\n",
    );
    assert_eq!(
        dir.error("r", &[]),
        format!(
            "{}: store.max_connections: 1 is outside 2..=64 (one connection starves the loops that share it)",
            dir.path().join("r.toml").display()
        )
    );
}

#[test]
fn a_confined_claude_worker_holds_a_placeholder_of_the_model_key() {
    use secrecy::ExposeSecret as _;
    let dir = Dir::new();
    dir.write(
        "p.toml",
        "role = \"executor\"\n[runner]\nworker_command = \"claude -p {prompt}\"\nworker_env = [\"ANTHROPIC_BASE_URL\"]\n",
    );
    let env = [
        ("ANTHROPIC_BASE_URL", "https://gateway.corp/anthropic"),
        ("ANTHROPIC_API_KEY", "sk-real"),
    ];
    let profile = dir.load("p", &env).unwrap();
    let runner = &profile.executor.runner;
    let model = runner.model.as_ref().expect("the key is Eagle's");
    assert_eq!(model.name, "ANTHROPIC_API_KEY");
    assert_eq!(model.key.expose_secret(), "sk-real");
    assert_eq!(model.url.as_str(), "https://gateway.corp/anthropic");
    let values: Vec<(&str, &str)> = runner
        .worker_env
        .values()
        .iter()
        .map(|(k, v)| (k.as_str(), v.expose_secret()))
        .collect();
    assert_eq!(
        values,
        [
            ("ANTHROPIC_BASE_URL", "https://gateway.corp/anthropic"),
            ("ANTHROPIC_API_KEY", PLACEHOLDER_KEY),
        ]
    );
    assert!(!format!("{profile:?}").contains("sk-real"));
    // Unconfined, nothing stands between the worker and the network: it
    // gets what worker_env gives it, as before, and Eagle keeps nothing.
    let off = dir
        .load(
            "p",
            &[
                ("ANTHROPIC_API_KEY", "sk-real"),
                ("EAGLE_RUNNER__SANDBOX__MODE", "off"),
                ("EAGLE_RUNNER__WORKER_ENV", "ANTHROPIC_API_KEY"),
            ],
        )
        .unwrap();
    assert!(off.executor.runner.model.is_none());
    assert_eq!(
        off.executor.runner.worker_env.values()[0].1.expose_secret(),
        "sk-real"
    );
    // Another kind of worker: no model API Eagle knows.
    dir.write(
        "g.toml",
        "role = \"executor\"\n[runner]\nworker_command = \"bash run.sh {prompt}\"\n",
    );
    assert!(
        dir.load("g", &[("ANTHROPIC_API_KEY", "sk-real")])
            .unwrap()
            .executor
            .runner
            .model
            .is_none()
    );
}

#[test]
fn a_model_ca_file_is_read_at_start() {
    let dir = Dir::new();
    dir.write(
        "p.toml",
        "role = \"executor\"\n[runner.sandbox]\nmodel_ca_file = \"gateway.pem\"\n",
    );
    let why = dir.error("p", &[]);
    assert!(
        why.contains("runner.sandbox.model_ca_file: cannot read ") && why.contains("gateway.pem"),
        "{why}"
    );
    dir.write("gateway.pem", "not a certificate\n");
    assert!(dir.error("p", &[]).contains("holds no certificate"));
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["gateway.corp".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    dir.write("gateway.pem", &cert.pem());
    let profile = dir.load("p", &[]).unwrap();
    let sandbox = &profile.executor.runner.sandbox;
    assert_eq!(sandbox.model_ca, vec![cert.der().clone()]);
    assert_eq!(
        sandbox.model_ca_file.as_deref(),
        Some(dir.path().join("gateway.pem").as_path())
    );
}
