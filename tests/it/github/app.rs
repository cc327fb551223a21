//! Eagle as a GitHub App against the fake GitHub: the client trades a JWT
//! for an installation token and sends that; it renews the token before
//! its `expires_at` and when GitHub refuses it early, with concurrent
//! callers sharing one renewal; a wrong key gets an error that shows no
//! key, JWT or token; a profile gives a token or an App, never both; and
//! `eagle check` says which one GitHub gets.

use std::path::Path;
use std::process::Command;

use eagle::integrations::github::GitHubAuth;
use eagle::profile::{GitHubCredential, Profile};
use fake_apis::AppSpec;
use secrecy::ExposeSecret;

use super::*;
use crate::support::{Home, text};

const APP_ID: u64 = 4242;
const BOT: &str = "eagle-app[bot]";

/// An RSA key pair made by the openssl CLI in `dir`: (private, public) PEM.
pub(crate) fn rsa_pair(dir: &Path, name: &str) -> (String, String) {
    let key = dir.join(format!("{name}.pem"));
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .output()
            .expect("the openssl CLI");
        assert!(out.status.success(), "openssl {args:?}");
        out.stdout
    };
    run(&["genrsa", "-out", key.to_str().unwrap(), "2048"]);
    let public = run(&["rsa", "-in", key.to_str().unwrap(), "-pubout"]);
    (
        std::fs::read_to_string(&key).unwrap(),
        String::from_utf8(public).unwrap(),
    )
}

/// The fake with `acme/app`, an App installed on it whose tokens live
/// `lifetime`, and the App's private key.
struct AppWorld {
    fake: FakeGitHub,
    repo: Repo,
    private: String,
    installation: u64,
    dir: tempfile::TempDir,
}

async fn app_world(lifetime: Duration) -> AppWorld {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = rsa_pair(dir.path(), "app");
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, RepoSpec::default());
    let mut spec = AppSpec::new(APP_ID, "eagle-app", &public);
    spec.token_lifetime = lifetime;
    fake.add_app(spec);
    let installation = fake.install_app(APP_ID, &[REPO]);
    AppWorld {
        fake,
        repo: REPO.parse().unwrap(),
        private,
        installation,
        dir,
    }
}

impl AppWorld {
    /// A client authenticated as the App with `private`, its installation
    /// found for `acme/app` unless given.
    fn client(&self, private: &str, installation: Option<u64>) -> GitHub {
        let api: url::Url = self.fake.url().parse().unwrap();
        let auth = GitHubAuth::app(
            api.clone(),
            APP_ID,
            installation,
            &SecretString::from(private.to_owned()),
        )
        .expect("the App's key parses")
        .with_default_repo(self.repo.clone());
        let mut config = GitHubConfig::with_auth(auth);
        config.api_url = api;
        config.write_spacing = Duration::ZERO;
        GitHub::new(config).expect("a client")
    }

    /// (method, path, user, status) of every request so far.
    fn seen(&self) -> Vec<(String, String, Option<String>, u16)> {
        self.fake
            .requests()
            .into_iter()
            .map(|r| (r.method, r.path, r.user, r.status))
            .collect()
    }
}

fn row(
    method: &str,
    path: &str,
    user: Option<&str>,
    status: u16,
) -> (String, String, Option<String>, u16) {
    (method.into(), path.into(), user.map(str::to_owned), status)
}

#[tokio::test]
async fn an_app_finds_its_installation_and_calls_with_an_installation_token() {
    let w = app_world(Duration::from_secs(3600)).await;
    let n = w.fake.open_pr(REPO, PrSpec::new("someone", "fix/a", SHA));
    let gh = w.client(&w.private, None);
    assert_eq!(gh.auth().kind(), "GitHub App");
    let pull = gh.pull_request(&w.repo, n).await.expect("the PR");
    assert_eq!(pull.number, n);
    let threads = gh.review_threads(&w.repo, n).await.expect("GraphQL");
    assert!(threads.threads.is_empty());
    gh.create_issue_comment(&w.repo, n, "from the App")
        .await
        .expect("a comment");
    let tokens = format!("/app/installations/{}/access_tokens", w.installation);
    assert_eq!(
        w.seen(),
        [
            row(
                "GET",
                "/repos/acme/app/installation",
                Some("eagle-app"),
                200
            ),
            row("POST", &tokens, Some("eagle-app"), 201),
            row("GET", &format!("/repos/acme/app/pulls/{n}"), Some(BOT), 200),
            row("POST", "/graphql", Some(BOT), 200),
            row(
                "POST",
                &format!("/repos/acme/app/issues/{n}/comments"),
                Some(BOT),
                201
            ),
        ]
    );
    assert_eq!(
        w.fake.installation_tokens_issued(),
        1,
        "one token for both calls"
    );
    // Its own login is the App's bot, not a user (`GET /user` is 403).
    assert_eq!(gh.own_login().await.unwrap(), BOT);
    assert_eq!(
        w.fake.requests().last().map(|r| r.path.clone()).as_deref(),
        Some("/app")
    );
    // The token git would push with is the one the client sends.
    let token = gh.auth().token_for(Some(&w.repo)).await.unwrap();
    assert!(token.expose_secret().starts_with("ghs_"));
    assert_eq!(w.fake.installation_tokens_issued(), 1);
    w.fake.assert_clean();
}

#[tokio::test]
async fn a_token_github_refuses_early_is_renewed_and_the_call_succeeds() {
    let w = app_world(Duration::from_secs(3600)).await;
    let n = w.fake.open_pr(REPO, PrSpec::new("someone", "fix/a", SHA));
    let gh = w.client(&w.private, Some(w.installation));
    gh.pull_request(&w.repo, n).await.expect("the PR");
    assert_eq!(w.fake.installation_tokens_issued(), 1);

    w.fake.expire_installation_tokens();
    let pull = gh
        .pull_request(&w.repo, n)
        .await
        .expect("the PR, after renewal");
    assert_eq!(pull.number, n);
    assert_eq!(w.fake.installation_tokens_issued(), 2);
    let statuses: Vec<u16> = w.seen().iter().map(|r| r.3).collect();
    // Configured installation: no look-up; the stale token's 401, a new
    // token, the same GET again.
    assert_eq!(statuses, [201, 200, 401, 201, 200]);
    w.fake.assert_clean();
}

#[tokio::test]
async fn a_token_near_its_expiry_is_renewed_before_use_once_for_concurrent_callers() {
    // Tokens that live four minutes are always within five of expiring.
    let w = app_world(Duration::from_secs(4 * 60)).await;
    let n = w.fake.open_pr(REPO, PrSpec::new("someone", "fix/a", SHA));
    let gh = w.client(&w.private, Some(w.installation));
    gh.pull_request(&w.repo, n).await.expect("the PR");
    gh.pull_request(&w.repo, n).await.expect("the PR again");
    assert_eq!(w.fake.installation_tokens_issued(), 2, "renewed before use");
    assert!(w.seen().iter().all(|r| r.3 != 401), "{:?}", w.seen());

    // With an hour's tokens, callers arriving together share one exchange.
    let w = app_world(Duration::from_secs(3600)).await;
    let n = w.fake.open_pr(REPO, PrSpec::new("someone", "fix/a", SHA));
    let gh = w.client(&w.private, None);
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let (gh, repo) = (gh.clone(), w.repo.clone());
        calls.spawn(async move { gh.pull_request(&repo, n).await.map(|p| p.number) });
    }
    while let Some(result) = calls.join_next().await {
        assert_eq!(result.unwrap().expect("the PR"), n);
    }
    assert_eq!(w.fake.installation_tokens_issued(), 1);
    let lookups = w
        .seen()
        .iter()
        .filter(|r| r.1.ends_with("/installation"))
        .count();
    assert_eq!(lookups, 1, "the installation is looked up once");
    w.fake.assert_clean();
}

#[tokio::test]
async fn another_key_gets_a_clear_error_without_key_jwt_or_token() {
    let w = app_world(Duration::from_secs(3600)).await;
    let (other, _) = rsa_pair(w.dir.path(), "other");
    let n = w.fake.open_pr(REPO, PrSpec::new("someone", "fix/a", SHA));
    let gh = w.client(&other, Some(w.installation));
    let e = gh.pull_request(&w.repo, n).await.unwrap_err();
    let shown = format!("{e} {e:?}");
    assert!(matches!(e, Error::Unauthorized { .. }), "{shown}");
    assert!(
        shown.contains(&format!(
            "POST /app/installations/{}/access_tokens",
            w.installation
        )) && shown.contains("A JSON web token could not be decoded"),
        "{shown}"
    );
    for secret in [
        "BEGIN",
        "PRIVATE",
        "eyJ",
        "ghs_",
        other.lines().nth(1).unwrap(),
    ] {
        assert!(!shown.contains(secret), "{secret:?} in {shown}");
    }
    assert_eq!(w.fake.installation_tokens_issued(), 0);
    assert!(
        !w.seen().iter().any(|r| r.1.starts_with("/repos/")),
        "nothing is sent without a token"
    );
    w.fake.assert_clean();
}

/// A profile directory with `eagle.toml` holding this `[github]`.
fn profile_with(dir: &Path, github: &str) -> Result<Profile, String> {
    std::fs::write(
        dir.join("eagle.toml"),
        format!("role = \"orchestrator\"\ndata_dir = \"data\"\n\n[github]\nrepo = \"acme/app\"\n{github}"),
    )
    .unwrap();
    let env = [
        ("HOME".to_owned(), "/home/tester".to_owned()),
        ("GITHUB_TOKEN".to_owned(), "github_pat_env".to_owned()),
    ]
    .into_iter()
    .collect();
    Profile::load(dir, "eagle", &env).map_err(|e| e.to_string())
}

#[test]
fn a_profile_names_a_token_or_an_app_never_both() {
    let dir = tempfile::tempdir().unwrap();
    let (private, _) = rsa_pair(dir.path(), "app");
    let key = dir.path().join("app.pem");
    eagle::ground::host::chmod(&key, 0o600).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "github_pat_file").unwrap();
    eagle::ground::host::chmod(&token, 0o600).unwrap();

    let app = profile_with(
        dir.path(),
        "app_id = 4242\nprivate_key_file = \"app.pem\"\n",
    )
    .unwrap();
    match app.github.unwrap().credential {
        GitHubCredential::App {
            app_id,
            installation_id,
            private_key,
        } => {
            assert_eq!((app_id, installation_id), (4242, None));
            assert_eq!(private_key.expose_secret(), private);
        }
        other => panic!("an App, not {other:?}"),
    }
    let shown = format!(
        "{:?}",
        profile_with(
            dir.path(),
            "app_id = 1\nprivate_key_file = \"app.pem\"\ninstallation_id = 7\n"
        )
        .unwrap()
        .github
    );
    assert!(
        shown.contains("installation_id: Some(7)") && !shown.contains("PRIVATE"),
        "{shown}"
    );

    let both = profile_with(
        dir.path(),
        "token_file = \"token\"\napp_id = 4242\nprivate_key_file = \"app.pem\"\n",
    )
    .unwrap_err();
    for key in [
        "github.token_file",
        "github.app_id",
        "github.private_key_file",
    ] {
        assert!(both.contains(key), "{key} in {both}");
    }
    let token = profile_with(dir.path(), "token_file = \"token\"\n").unwrap();
    assert!(
        matches!(token.github.unwrap().credential, GitHubCredential::Token(t) if t.expose_secret() == "github_pat_file")
    );

    for (github, says) in [
        ("private_key_file = \"app.pem\"\n", "github.app_id"),
        ("app_id = 4242\n", "github.private_key_file"),
        ("app_id = 0\nprivate_key_file = \"app.pem\"\n", "not an id"),
        (
            "app_id = 1\nprivate_key_file = \"missing.pem\"\n",
            "cannot read",
        ),
        (
            "app_id = 1\nprivate_key_file = \"token\"\n",
            "is not an RSA private key in PEM",
        ),
    ] {
        let e = profile_with(dir.path(), github).unwrap_err();
        assert!(e.contains(says), "{github}: {e}");
        assert!(!e.contains("github_pat_file"), "{e}");
    }
    eagle::ground::host::chmod(&key, 0o644).unwrap();
    let e = profile_with(dir.path(), "app_id = 1\nprivate_key_file = \"app.pem\"\n").unwrap_err();
    assert!(
        e.contains("readable by others") && !e.contains("PRIVATE"),
        "{e}"
    );
}

#[tokio::test]
async fn check_says_the_credential_kind_and_that_the_exchange_works() {
    let w = app_world(Duration::from_secs(3600)).await;
    let mut home = Home::new();
    let key = home.dir.path().join("app.pem");
    std::fs::write(&key, &w.private).unwrap();
    eagle::ground::host::chmod(&key, 0o600).unwrap();
    home.set("EAGLE_GITHUB__REPO", REPO)
        .set("EAGLE_GITHUB__API_URL", &w.fake.url())
        .set("EAGLE_GITHUB__APP_ID", &APP_ID.to_string())
        .set("EAGLE_GITHUB__PRIVATE_KEY_FILE", key.to_str().unwrap());
    let out = tokio::task::spawn_blocking(move || home.run(&["check"], ""))
        .await
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains(&format!(
            "ok    github: authenticates as GitHub App {APP_ID}: an installation token for acme/app was issued"
        )),
        "{stdout}\n{stderr}"
    );
    for secret in ["PRIVATE", "ghs_", "eyJ"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret}"
        );
    }
    assert_eq!(w.fake.installation_tokens_issued(), 1);
    w.fake.assert_clean();
}

#[tokio::test]
async fn a_repository_the_app_is_not_installed_on_is_named_in_the_error() {
    let w = app_world(Duration::from_secs(3600)).await;
    let auth = GitHubAuth::app(
        w.fake.url().parse().unwrap(),
        APP_ID,
        None,
        &SecretString::from(w.private.clone()),
    )
    .unwrap();
    let other: Repo = "acme/other".parse().unwrap();
    let e = auth.token_for(Some(&other)).await.unwrap_err().to_string();
    assert!(
        e.contains("the GitHub App 4242 is not installed on acme/other")
            && e.contains("github.installation_id"),
        "{e}"
    );
    // The App's only installation serves a caller that names no repository.
    let token = auth.token_for(None).await.unwrap();
    assert!(token.expose_secret().starts_with("ghs_"));
    let token_again = auth.token_for(Some(&w.repo)).await.unwrap();
    assert_eq!(token_again.expose_secret(), token.expose_secret());
    assert_eq!(w.fake.installation_tokens_issued(), 1);
    w.fake.assert_clean();
}

#[tokio::test]
async fn the_apps_own_acknowledgement_closes_a_thread_and_a_namesake_users_does_not() {
    let w = app_world(Duration::from_secs(3600)).await;
    let n = w.fake.open_pr(REPO, PrSpec::new("someone", "fix/a", SHA));
    let f = &w.fake;
    let acked = f.add_review_thread(REPO, n, Some("sam"), "src/a.rs", Some(1), "rename");
    let forged = f.add_review_thread(REPO, n, Some("sam"), "src/b.rs", Some(2), "split it");
    // A user named like the App's slug is not the App.
    f.reply_to_thread(REPO, &forged, Some("eagle-app"), "[ACKNOWLEDGED: done]");
    let gh = w.client(&w.private, None);
    gh.reply_to_thread(&acked, "[ACKNOWLEDGED: renamed]")
        .await
        .expect("a reply");
    assert_eq!(
        f.thread_comments(REPO, &acked).last().unwrap().0.as_deref(),
        Some(BOT)
    );
    let view = gh
        .poll_pull_request(&w.repo, n, &PollSettings::default(), None)
        .await
        .expect("a view");
    let open: Vec<String> = view
        .open_threads
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(open, [forged]);
    w.fake.assert_clean();
}
