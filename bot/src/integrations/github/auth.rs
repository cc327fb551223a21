//! Who Eagle is on GitHub: a token given to it (a fine-grained personal
//! access token), or a GitHub App that mints its own short-lived tokens.
//!
//! An App signs a JSON Web Token (RS256, with the App's private key; at
//! most ten minutes long, backdated a minute against clock drift) and
//! trades it for an installation token (`POST
//! /app/installations/{id}/access_tokens`), which lasts an hour. The JWT
//! is good for nothing else, so it is made for each exchange and never
//! kept. The installation token is kept and renewed when less than
//! [`RENEW_BEFORE`] of its life is left, under one lock per App: callers
//! that arrive during a renewal wait for it and share its token. The
//! installation is the one configured, else the one GitHub names for the
//! repository (`GET /repos/{owner}/{repo}/installation`, asked once).
//!
//! No secret leaves this module except through [`GitHubAuth::token_for`]:
//! the private key, the JWT and the tokens are never in a `Debug`, an
//! error or a log line, and GitHub's answers are not echoed where they
//! could hold a token.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;
use url::Url;

use crate::ground::repo::Repo;
use crate::integrations::github::Error;
use crate::integrations::github::error::{error_chain, parse_untold, status_error};
use crate::integrations::github::http::{http_client, what};

/// An installation token is renewed when less than this of its life is left.
pub const RENEW_BEFORE: Duration = Duration::from_secs(5 * 60);
/// A JWT says it was issued this long ago, against clocks that drift
/// (GitHub's advice).
const JWT_BACKDATE: u64 = 60;
/// A JWT lives this long from now; GitHub takes at most ten minutes.
const JWT_LIFETIME: u64 = 9 * 60;
/// What the exchange needs, for error messages.
const APP_PERMISSION: &str = "GitHub App installation";
/// How long the exchange and the installation look-up may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// How Eagle authenticates to GitHub. Cheap to clone: clones share the
/// App's installation tokens.
#[derive(Clone)]
pub struct GitHubAuth {
    credential: Arc<Credential>,
    /// The repository `token_for(None)` means, when no installation is
    /// configured.
    default_repo: Option<Repo>,
}

enum Credential {
    Token(SecretString),
    App(Box<App>),
}

struct App {
    http: reqwest::Client,
    api_url: Url,
    app_id: u64,
    /// `github.installation_id`, if given.
    installation_id: Option<u64>,
    key: EncodingKey,
    /// Installations GitHub named, by repository (`owner/name` in lower
    /// case, GitHub's names being case-insensitive; "" for the only one).
    found: Mutex<HashMap<String, u64>>,
    /// Each installation's token; held across a renewal.
    tokens: Mutex<HashMap<u64, Issued>>,
}

/// An installation token and when it expires.
struct Issued {
    token: SecretString,
    expires_at: DateTime<Utc>,
}

impl Issued {
    fn fresh(&self, now: DateTime<Utc>) -> bool {
        let margin = chrono::Duration::from_std(RENEW_BEFORE).unwrap_or(chrono::Duration::zero());
        self.expires_at - now > margin
    }
}

/// The claims of an App's JWT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Claims {
    /// Issued at (UNIX seconds), a minute back.
    iat: u64,
    /// Expires at (UNIX seconds).
    exp: u64,
    /// The App's id.
    iss: String,
}

impl Claims {
    fn at(app_id: u64, now: u64) -> Claims {
        Claims {
            iat: now.saturating_sub(JWT_BACKDATE),
            exp: now + JWT_LIFETIME,
            iss: app_id.to_string(),
        }
    }
}

impl std::fmt::Debug for GitHubAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("GitHubAuth");
        d.field("kind", &self.kind());
        if let Credential::App(app) = &*self.credential {
            d.field("app_id", &app.app_id)
                .field("installation_id", &app.installation_id);
        }
        d.finish_non_exhaustive()
    }
}

impl GitHubAuth {
    /// A token given to Eagle, sent as it is.
    pub fn token(token: SecretString) -> Self {
        GitHubAuth {
            credential: Arc::new(Credential::Token(token)),
            default_repo: None,
        }
    }

    /// A GitHub App (`app_id`) with its private key in PEM (PKCS#1, as
    /// GitHub hands it out, or PKCS#8). The key is parsed and tried now;
    /// `installation_id` None: found for each repository when needed.
    pub fn app(
        api_url: Url,
        app_id: u64,
        installation_id: Option<u64>,
        private_key_pem: &SecretString,
    ) -> Result<Self, Error> {
        let key = private_key(private_key_pem)?;
        let http = http_client(concat!("eagle/", env!("CARGO_PKG_VERSION")), TIMEOUT)?;
        Ok(GitHubAuth {
            credential: Arc::new(Credential::App(Box::new(App {
                http,
                api_url,
                app_id,
                installation_id,
                key,
                found: Mutex::new(HashMap::new()),
                tokens: Mutex::new(HashMap::new()),
            }))),
            default_repo: None,
        })
    }

    /// The same credential, with `repo` as what `token_for(None)` means
    /// (the profile's `github.repo`).
    pub fn with_default_repo(mut self, repo: Repo) -> Self {
        self.default_repo = Some(repo);
        self
    }

    /// `"token"` or `"GitHub App"`, for `eagle check` and logs.
    pub fn kind(&self) -> &'static str {
        match &*self.credential {
            Credential::Token(_) => "token",
            Credential::App(_) => "GitHub App",
        }
    }

    /// The App's id, if this is an App.
    pub fn app_id(&self) -> Option<u64> {
        match &*self.credential {
            Credential::Token(_) => None,
            Credential::App(app) => Some(app.app_id),
        }
    }

    /// The token to send now for `repo` (None: the default repository, or
    /// the App's only installation): the token given, or an installation
    /// token, renewed when fewer than five minutes of its life remain
    /// (GitHub's `expires_at`).
    pub async fn token_for(&self, repo: Option<&Repo>) -> Result<SecretString, Error> {
        let app = match &*self.credential {
            Credential::Token(token) => return Ok(token.clone()),
            Credential::App(app) => app,
        };
        let installation = app
            .installation(repo.or(self.default_repo.as_ref()))
            .await?;
        let mut tokens = app.tokens.lock().await;
        if let Some(issued) = tokens.get(&installation)
            && issued.fresh(Utc::now())
        {
            return Ok(issued.token.clone());
        }
        let issued = app.exchange(installation).await?;
        tracing::info!(
            app_id = app.app_id,
            installation,
            expires_at = %issued.expires_at.to_rfc3339(),
            "github app: a new installation token"
        );
        let token = issued.token.clone();
        tokens.insert(installation, issued);
        Ok(token)
    }

    /// GitHub refused `token` (401): an installation token it no longer
    /// takes (revoked, or expired early) is forgotten, so that the next
    /// [`GitHubAuth::token_for`] asks for a new one. True when the caller
    /// may try once more; a token given to Eagle cannot be renewed.
    pub async fn refused(&self, token: &SecretString) -> bool {
        let Credential::App(app) = &*self.credential else {
            return false;
        };
        // Another caller may have renewed it already: its token stays.
        app.tokens
            .lock()
            .await
            .retain(|_, issued| issued.token.expose_secret() != token.expose_secret());
        true
    }

    /// A GitHub App's slug (`GET /app`, as the App), which its installation
    /// tokens act as (`{slug}[bot]`); `None` for a token given to Eagle.
    pub async fn app_slug(&self) -> Result<Option<String>, Error> {
        #[derive(Deserialize)]
        struct AppInfo {
            slug: String,
        }
        let Credential::App(app) = &*self.credential else {
            return Ok(None);
        };
        let url = app.url(&["app"])?;
        let what = what(&Method::GET, &url);
        let body = app.send(Method::GET, url, 200).await?;
        let info: AppInfo = parse_untold(&what, &body, "an App (slug)")?;
        Ok(Some(info.slug))
    }

    /// A token given to Eagle that is blank (an App's tokens never are).
    pub(crate) fn is_blank(&self) -> bool {
        matches!(&*self.credential, Credential::Token(t) if t.expose_secret().trim().is_empty())
    }
}

/// Parses the private key and signs once with it, so that a key that is
/// not an RSA private key fails at start-up. The message never holds the
/// key, nor what the PEM parser saw in it.
fn private_key(pem: &SecretString) -> Result<EncodingKey, Error> {
    let refused = |why: &str| {
        Error::InvalidInput(format!(
            "the GitHub App's private key {why}: give the .pem GitHub generated for the App"
        ))
    };
    let key = EncodingKey::from_rsa_pem(pem.expose_secret().as_bytes())
        .map_err(|_| refused("is not an RSA private key in PEM"))?;
    sign(&key, &Claims::at(0, unix_now())).map_err(|_| refused("cannot sign (RS256)"))?;
    Ok(key)
}

fn sign(key: &EncodingKey, claims: &Claims) -> Result<String, jsonwebtoken::errors::Error> {
    jsonwebtoken::encode(&Header::new(Algorithm::RS256), claims, key)
}

fn unix_now() -> u64 {
    u64::try_from(Utc::now().timestamp()).unwrap_or(0)
}

/// `{"id": …}` of an installation.
#[derive(Deserialize)]
struct Installation {
    id: u64,
}

/// The answer to the exchange.
#[derive(Deserialize)]
struct AccessToken {
    token: SecretString,
    expires_at: String,
}

impl App {
    /// A JWT for one exchange.
    fn jwt(&self) -> Result<SecretString, Error> {
        sign(&self.key, &Claims::at(self.app_id, unix_now()))
            .map(SecretString::from)
            .map_err(|_| {
                Error::InvalidInput("cannot sign a JWT with the GitHub App's private key".into())
            })
    }

    fn url(&self, segments: &[&str]) -> Result<Url, Error> {
        let mut url = self.api_url.clone();
        url.path_segments_mut()
            .map_err(|()| Error::InvalidInput(format!("{} cannot hold paths", self.api_url)))?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    /// Sends one request authenticated as the App (the JWT); the body of
    /// an answer with `expected` status.
    async fn send(&self, method: Method, url: Url, expected: u16) -> Result<Vec<u8>, Error> {
        let what = what(&method, &url);
        let jwt = self.jwt()?;
        let response = self
            .http
            .request(method, url)
            // bearer_auth marks the header sensitive: no log or Debug shows it.
            .bearer_auth(jwt.expose_secret())
            .send()
            .await
            .map_err(|e| Error::Transport {
                what: what.clone(),
                detail: if e.is_timeout() {
                    "timed out".into()
                } else {
                    error_chain(&e.without_url())
                },
            })?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|e| Error::Transport {
                what: what.clone(),
                detail: error_chain(&e.without_url()),
            })?
            .to_vec();
        if status != expected {
            return Err(status_error(&what, status, &body, APP_PERMISSION));
        }
        Ok(body)
    }

    /// The installation for `repo`: the configured one, else GitHub's
    /// answer for the repository (or the App's only installation), kept.
    async fn installation(&self, repo: Option<&Repo>) -> Result<u64, Error> {
        if let Some(id) = self.installation_id {
            return Ok(id);
        }
        let key = repo
            .map(|r| format!("{}/{}", r.owner(), r.name()).to_lowercase())
            .unwrap_or_default();
        let mut found = self.found.lock().await;
        if let Some(id) = found.get(&key) {
            return Ok(*id);
        }
        let id = match repo {
            Some(repo) => {
                let url = self.url(&["repos", repo.owner(), repo.name(), "installation"])?;
                let what = what(&Method::GET, &url);
                let body = match self.send(Method::GET, url, 200).await {
                    Err(Error::NotFound { what }) => {
                        return Err(Error::InvalidInput(format!(
                            "the GitHub App {} is not installed on {repo} ({what}: 404): install it there, or give github.installation_id",
                            self.app_id
                        )));
                    }
                    other => other?,
                };
                parse_untold::<Installation>(&what, &body, "an installation (id)")?.id
            }
            None => self.only_installation().await?,
        };
        found.insert(key, id);
        Ok(id)
    }

    /// `GET /app/installations`, which must list exactly one.
    async fn only_installation(&self) -> Result<u64, Error> {
        let mut url = self.url(&["app", "installations"])?;
        url.query_pairs_mut().append_pair("per_page", "2");
        let what = what(&Method::GET, &url);
        let body = self.send(Method::GET, url, 200).await?;
        let list: Vec<Installation> = parse_untold(&what, &body, "a list of installations")?;
        match list.as_slice() {
            [one] => Ok(one.id),
            _ => Err(Error::InvalidInput(format!(
                "the GitHub App {} is installed {} time(s): give github.installation_id",
                self.app_id,
                if list.is_empty() {
                    "0"
                } else {
                    "more than one"
                }
            ))),
        }
    }

    /// Trades a fresh JWT for an installation token.
    async fn exchange(&self, installation: u64) -> Result<Issued, Error> {
        let id = installation.to_string();
        let url = self.url(&["app", "installations", &id, "access_tokens"])?;
        let what = what(&Method::POST, &url);
        let body = self.send(Method::POST, url, 201).await?;
        let answer: AccessToken = parse_untold(&what, &body, "an installation token")?;
        let expires_at = DateTime::parse_from_rfc3339(&answer.expires_at)
            .map_err(|_| Error::Malformed {
                what: what.clone(),
                detail: "expires_at is not a date-time".into(),
            })?
            .with_timezone(&Utc);
        if answer.token.expose_secret().trim().is_empty() {
            return Err(Error::Malformed {
                what,
                detail: "an empty installation token".into(),
            });
        }
        Ok(Issued {
            token: answer.token,
            expires_at,
        })
    }
}

impl GitHubAuth {
    /// The credential of `[github]`: its token, or its GitHub App (the key
    /// parsed now), for the profile's repository.
    pub fn of_settings(settings: &crate::profile::GithubSettings) -> Result<GitHubAuth, Error> {
        use crate::profile::GitHubCredential;
        let auth = match &settings.credential {
            GitHubCredential::Token(token) => GitHubAuth::token(token.clone()),
            GitHubCredential::App {
                app_id,
                installation_id,
                private_key,
            } => GitHubAuth::app(
                settings.api_url.clone(),
                *app_id,
                *installation_id,
                private_key,
            )?,
        };
        Ok(auth.with_default_repo(settings.repo.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_backdated_and_live_under_ten_minutes() {
        let claims = Claims::at(123, 1_700_000_000);
        assert_eq!(
            claims,
            Claims {
                iat: 1_699_999_940,
                exp: 1_700_000_540,
                iss: "123".into(),
            }
        );
        assert!(
            claims.exp - claims.iat <= 600,
            "GitHub takes ten minutes at most"
        );
        assert!(claims.exp > 1_700_000_000, "good from now");
    }

    #[test]
    fn tokens_are_renewed_five_minutes_before_they_expire() {
        let now = Utc::now();
        let issued = |minutes: i64| Issued {
            token: SecretString::from("ghs_x"),
            expires_at: now + chrono::Duration::minutes(minutes),
        };
        assert!(issued(60).fresh(now));
        assert!(issued(6).fresh(now));
        assert!(!issued(5).fresh(now));
        assert!(!issued(1).fresh(now));
        assert!(!issued(-1).fresh(now));
    }

    /// An RSA key from the openssl CLI, in a temporary directory.
    fn rsa_key() -> (tempfile::TempDir, SecretString, String) {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k.pem");
        let run = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .output()
                .expect("the openssl CLI");
            assert!(out.status.success(), "openssl {args:?}");
            out.stdout
        };
        run(&["genrsa", "-out", key.to_str().unwrap(), "2048"]);
        let public = run(&["rsa", "-in", key.to_str().unwrap(), "-pubout"]);
        let private = std::fs::read_to_string(&key).unwrap();
        (
            dir,
            SecretString::from(private),
            String::from_utf8(public).unwrap(),
        )
    }

    #[test]
    fn the_jwt_is_rs256_signed_with_the_apps_claims() {
        let (_dir, private, public) = rsa_key();
        let api = Url::parse("http://127.0.0.1:9").unwrap();
        let auth = GitHubAuth::app(api, 4242, Some(7), &private).unwrap();
        let Credential::App(app) = &*auth.credential else {
            panic!("an App");
        };
        let jwt = app.jwt().unwrap();
        let header = jsonwebtoken::decode_header(jwt.expose_secret()).unwrap();
        assert_eq!(header.alg, Algorithm::RS256);
        let mut validation = jsonwebtoken::Validation::new(Algorithm::RS256);
        validation.set_issuer(&["4242"]);
        let key = jsonwebtoken::DecodingKey::from_rsa_pem(public.as_bytes()).unwrap();
        let claims = jsonwebtoken::decode::<Claims>(jwt.expose_secret(), &key, &validation)
            .unwrap()
            .claims;
        let now = unix_now();
        assert!(
            claims.iat <= now - 59 && claims.iat >= now - 61,
            "{claims:?}"
        );
        assert!(
            claims.exp >= now + 539 && claims.exp <= now + 541,
            "{claims:?}"
        );
        assert_eq!(auth.kind(), "GitHub App");
        let shown = format!("{auth:?}");
        assert!(
            shown.contains("4242") && !shown.contains("PRIVATE"),
            "{shown}"
        );
    }

    #[test]
    fn a_key_that_is_not_one_is_refused_without_its_content() {
        let api = Url::parse("http://127.0.0.1:9").unwrap();
        for text in [
            "",
            "not a key at all: hunter2",
            "-----BEGIN RSA PRIVATE KEY-----\naHVudGVyMg==\n-----END RSA PRIVATE KEY-----\n",
        ] {
            let e = GitHubAuth::app(api.clone(), 1, None, &SecretString::from(text)).unwrap_err();
            let shown = format!("{e} {e:?}");
            assert!(shown.contains("private key"), "{shown}");
            assert!(
                !shown.contains("hunter2") && !shown.contains("aHVudGVy"),
                "{shown}"
            );
        }
        let (_dir, _, public) = rsa_key();
        let e = GitHubAuth::app(api, 1, None, &SecretString::from(public)).unwrap_err();
        assert!(!format!("{e}").contains("PUBLIC KEY"), "{e}");
    }

    #[tokio::test]
    async fn a_token_is_sent_as_it_is() {
        let auth = GitHubAuth::token(SecretString::from("github_pat_x"));
        assert_eq!(auth.kind(), "token");
        let token = auth.token_for(None).await.unwrap();
        assert_eq!(token.expose_secret(), "github_pat_x");
        assert!(
            !auth.refused(&token).await,
            "a given token cannot be renewed"
        );
        assert!(!format!("{auth:?}").contains("github_pat_x"));
    }
}
