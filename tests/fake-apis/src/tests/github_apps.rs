//! GitHub Apps in the fake GitHub: a JWT signed with the App's key is
//! traded for an installation token that acts on the installation's
//! repositories until it expires; JWTs that GitHub would refuse are
//! refused, and the ones only a buggy client sends are violations.

use std::io::Write;
use std::process::{Command, Stdio};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::Method;
use serde_json::{Value, json};

use super::github::{Gh, REPO, world};
use crate::{AppSpec, RepoSpec};

const APP_ID: u64 = 4242;

/// An RSA key pair from the openssl CLI: (private PEM, public PEM).
pub(crate) fn rsa_pair() -> (String, String) {
    let private = Command::new("openssl")
        .args(["genrsa", "2048"])
        .output()
        .expect("the openssl CLI");
    assert!(private.status.success(), "openssl genrsa");
    let mut child = Command::new("openssl")
        .args(["rsa", "-pubout"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the openssl CLI");
    child
        .stdin
        .take()
        .expect("a stdin")
        .write_all(&private.stdout)
        .expect("the key to openssl");
    let public = child.wait_with_output().expect("openssl rsa -pubout");
    assert!(public.status.success(), "openssl rsa -pubout");
    (
        String::from_utf8(private.stdout).expect("PEM"),
        String::from_utf8(public.stdout).expect("PEM"),
    )
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A JWT with these claims, RS256 with `private`.
fn jwt(private: &str, claims: Value) -> String {
    let key = EncodingKey::from_rsa_pem(private.as_bytes()).expect("an RSA key");
    jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &key).expect("signed")
}

fn good_claims() -> Value {
    json!({"iat": now() - 60, "exp": now() + 540, "iss": APP_ID.to_string()})
}

#[tokio::test]
async fn a_jwt_buys_an_installation_token_that_works_until_it_expires() {
    let (fake, gh) = world().await;
    fake.add_repo("acme/other", RepoSpec::default());
    let (private, public) = rsa_pair();
    fake.add_app(AppSpec::new(APP_ID, "eagle-app", &public));
    let installation = fake.install_app(APP_ID, &[REPO]);
    let app = gh.with(
        "authorization",
        &format!("Bearer {}", jwt(&private, good_claims())),
    );

    let found = app.get("/repos/acme/app/installation").await;
    assert_eq!(found.status, 200, "{:?}", found.body);
    assert_eq!(found.body["id"], installation);
    assert_eq!(found.body["app_id"], APP_ID);
    assert_eq!(app.get("/repos/acme/other/installation").await.status, 404);
    let me = app.get("/app").await;
    assert_eq!(
        (me.body["id"].as_u64(), me.body["slug"].as_str()),
        (Some(APP_ID), Some("eagle-app"))
    );
    let listed = app.get("/app/installations").await;
    assert_eq!(listed.body.as_array().map(Vec::len), Some(1));

    let path = format!("/app/installations/{installation}/access_tokens");
    let issued = app.call(Method::POST, &path, None).await;
    assert_eq!(issued.status, 201, "{:?}", issued.body);
    let token = issued.body["token"].as_str().expect("a token").to_owned();
    assert!(token.starts_with("ghs_"), "{token}");
    let expires = issued.body["expires_at"].as_str().expect("expires_at");
    let expires = chrono::DateTime::parse_from_rfc3339(expires).expect("a date-time");
    assert!(expires.timestamp() > now() + 3500, "an hour: {expires}");
    assert_eq!(fake.installation_tokens_issued(), 1);
    assert_eq!(
        app.call(Method::POST, "/app/installations/1/access_tokens", None)
            .await
            .status,
        404,
        "another installation"
    );

    let bot = gh.with("authorization", &format!("Bearer {token}"));
    assert_eq!(bot.get("/repos/acme/app/pulls/1").await.status, 200);
    let last = fake.requests().pop().expect("a request");
    assert_eq!(last.user.as_deref(), Some("eagle-app[bot]"));
    assert_eq!(
        bot.get("/repos/acme/other/pulls").await.status,
        404,
        "a repository the installation does not hold is hidden"
    );
    let query = "query($name: String!) { repository(owner: \"acme\", name: $name) { name } }";
    let own = bot.graphql(query, json!({"name": "app"})).await;
    assert_eq!(
        own.body["data"]["repository"]["name"], "app",
        "{:?}",
        own.body
    );
    let hidden = bot.graphql(query, json!({"name": "other"})).await;
    assert_eq!(
        hidden.body["errors"][0]["type"], "NOT_FOUND",
        "{:?}",
        hidden.body
    );
    let user = bot.get("/user").await;
    assert_eq!(user.status, 403);
    assert_eq!(
        user.body["message"],
        "Resource not accessible by integration"
    );

    fake.expire_installation_tokens();
    let refused = bot.get("/repos/acme/app/pulls/1").await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.body["message"], "Bad credentials");
    fake.assert_clean();
}

#[tokio::test]
async fn jwts_github_would_refuse_are_refused() {
    let (fake, gh) = world().await;
    let (private, public) = rsa_pair();
    let (other, _) = rsa_pair();
    fake.add_app(AppSpec::new(APP_ID, "eagle-app", &public));
    let installation = fake.install_app(APP_ID, &[REPO]);
    let path = format!("/app/installations/{installation}/access_tokens");
    let post = |bearer: String| {
        let gh: Gh = gh.with("authorization", &format!("Bearer {bearer}"));
        let path = path.clone();
        async move { gh.call(Method::POST, &path, None).await }
    };

    // Another key, or an App that does not exist: the operator's mistake.
    for bearer in [
        jwt(&other, good_claims()),
        jwt(
            &private,
            json!({"iat": now() - 60, "exp": now() + 540, "iss": "999"}),
        ),
    ] {
        let answer = post(bearer).await;
        assert_eq!(answer.status, 401);
        assert_eq!(
            answer.body["message"],
            "A JSON web token could not be decoded"
        );
    }
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());

    // What only a buggy client sends.
    let too_long = json!({"iat": now() - 60, "exp": now() + 600, "iss": APP_ID});
    let expired = json!({"iat": now() - 700, "exp": now() - 100, "iss": APP_ID});
    for (bearer, message) in [
        (
            jwt(&private, too_long),
            "'Expiration time' claim ('exp') is too far in the future",
        ),
        (
            jwt(&private, expired),
            "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
        ),
        (
            gh.headers[1].1.trim_start_matches("Bearer ").to_owned(),
            "A JSON web token could not be decoded",
        ),
    ] {
        let answer = post(bearer).await;
        assert_eq!(answer.status, 401);
        assert_eq!(answer.body["message"], message);
    }
    assert_eq!(fake.violations().len(), 3, "{:?}", fake.violations());
    fake.clear_violations();

    // A JWT is no token for the rest of the API.
    let app = gh.with(
        "authorization",
        &format!("Bearer {}", jwt(&private, good_claims())),
    );
    assert_eq!(app.get("/repos/acme/app/pulls/1").await.status, 401);
    let violations = fake.violations();
    assert!(
        violations.len() == 1 && violations[0].contains("JWT sent as a token"),
        "{violations:?}"
    );
    fake.clear_violations();
    assert_eq!(fake.installation_tokens_issued(), 0);
}
