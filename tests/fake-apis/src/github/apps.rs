//! GitHub Apps in the fake: an App authenticates as itself with a JSON Web
//! Token signed by its private key (RS256), which only the `/app/…`
//! endpoints and `GET /repos/{o}/{r}/installation` take, and trades it for
//! installation tokens (`ghs_…`) that act on the installation's
//! repositories as `{slug}[bot]` until they expire.
//!
//! As GitHub: a JWT must name the App (`iss`, its id as a number or a
//! string), live at most ten minutes (`exp` − `iat` ≤ 600 s) and not have
//! expired; an installation token sent after its `expires_at` gets 401
//! `Bad credentials`; an installation token is 404 on a repository the
//! installation does not hold and 403 on `GET /user`. A JWT sent as a
//! token, or a token sent where a JWT is needed, is a violation: a client
//! that mixes them up has a bug. A signature that does not verify (another
//! key) is refused without a violation: that is the operator's mistake.
//!
//! The test holds the App's public key only; it signs with the private key
//! it gave the client. [`FakeGitHub::expire_installation_tokens`] ends
//! every token issued so far, so that renewal is tested without waiting.

use std::collections::BTreeMap;
use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};

use crate::FakeGitHub;
use crate::common::clock::{iso_seconds, unix_now};
use crate::github::errors::ApiError;
use crate::github::model::AppSpec;
use crate::github::routes::RepoPath;
use crate::github::server::{Answer, Ctx, Outcome, json_body, unknown_members};
use crate::github::state::State;

/// GitHub's answer to a JWT it cannot use.
const UNDECODABLE: &str = "A JSON web token could not be decoded";
/// The longest a JWT may live, in seconds.
const MAX_JWT_LIFE: i64 = 600;
/// How far in the future `iat` may be (clock drift), in seconds.
const IAT_DRIFT: i64 = 60;
const APP_DOCS: &str =
    "https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app";

/// One App.
pub(crate) struct App {
    pub slug: String,
    pub key: DecodingKey,
    pub token_lifetime: Duration,
}

/// One installation of an App: its repositories, `owner/name` in lower case.
pub(crate) struct Installation {
    pub app_id: u64,
    pub account: String,
    pub repos: Vec<String>,
}

/// An installation token.
pub(crate) struct InstallationToken {
    pub installation: u64,
    pub expires_ms: i64,
}

/// The Apps the fake knows, their installations and the tokens issued.
#[derive(Default)]
pub(crate) struct Apps {
    pub apps: BTreeMap<u64, App>,
    pub installations: BTreeMap<u64, Installation>,
    pub tokens: BTreeMap<String, InstallationToken>,
    /// The installation of each token issued, in order.
    pub issued: Vec<u64>,
}

/// Who a request authenticated as.
pub(crate) struct Caller {
    pub login: String,
    /// The App, when the bearer was its JWT.
    pub app: Option<u64>,
    /// The installation, when the bearer was an installation token.
    pub installation: Option<u64>,
}

impl Caller {
    /// A user's token.
    pub fn user(login: String) -> Caller {
        Caller {
            login,
            app: None,
            installation: None,
        }
    }
}

/// Whether `token` is shaped as a JWT (`eyJ…` in three dotted parts).
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.split('.').count() == 3
}

/// The App whose JWT this is, or GitHub's 401 (a violation when the
/// client built the JWT wrongly, not when it signed with another key).
pub(crate) fn verify_jwt(state: &State, token: &str) -> Result<u64, ApiError> {
    let refuse = |message: &str| ApiError::new(401, message).docs(APP_DOCS);
    let header = jsonwebtoken::decode_header(token)
        .map_err(|_| refuse(UNDECODABLE).violating("the bearer is not a JWT (an App endpoint)"))?;
    if header.alg != Algorithm::RS256 {
        return Err(
            refuse(UNDECODABLE).violating(format!("a JWT signed {:?}, not RS256", header.alg))
        );
    }
    // The issuer picks the key: read the claims before the signature.
    let mut unverified = Validation::new(Algorithm::RS256);
    unverified.insecure_disable_signature_validation();
    unverified.validate_exp = false;
    unverified.required_spec_claims.clear();
    let claims = jsonwebtoken::decode::<Value>(token, &DecodingKey::from_secret(&[]), &unverified)
        .map_err(|_| refuse(UNDECODABLE).violating("the JWT's claims are not JSON"))?
        .claims;
    let iss = match &claims["iss"] {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse::<u64>().ok(),
        _ => None,
    };
    let Some(app_id) = iss.filter(|id| state.apps.apps.contains_key(id)) else {
        // An App that does not exist: GitHub cannot pick a key.
        return Err(refuse(UNDECODABLE));
    };
    let mut validation = Validation::new(Algorithm::RS256);
    validation.validate_exp = false;
    validation.required_spec_claims.clear();
    if jsonwebtoken::decode::<Value>(token, &state.apps.apps[&app_id].key, &validation).is_err() {
        return Err(refuse(UNDECODABLE));
    }
    let (Some(iat), Some(exp)) = (claims["iat"].as_i64(), claims["exp"].as_i64()) else {
        return Err(refuse(
            "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
        )
        .violating("a JWT without integer iat and exp"));
    };
    let now = unix_now();
    if iat > now + IAT_DRIFT {
        return Err(refuse(
            "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
        )
        .violating(format!("a JWT issued {}s in the future", iat - now)));
    }
    if exp - iat > MAX_JWT_LIFE {
        return Err(
            refuse("'Expiration time' claim ('exp') is too far in the future").violating(format!(
                "a JWT that lives {}s (at most {MAX_JWT_LIFE})",
                exp - iat
            )),
        );
    }
    if exp <= now {
        return Err(refuse(
            "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
        )
        .violating("an expired JWT"));
    }
    Ok(app_id)
}

/// The caller behind an installation token, `None` if it is not one;
/// `Some(Err(()))` once it expired.
pub(crate) fn installation_caller(state: &mut State, token: &str) -> Option<Result<Caller, ()>> {
    let issued = state.apps.tokens.get(token)?;
    if issued.expires_ms <= state.clock.now_ms() {
        return Some(Err(()));
    }
    let installation = issued.installation;
    let app_id = state.apps.installations[&installation].app_id;
    Some(Ok(Caller {
        login: format!("{}[bot]", state.apps.apps[&app_id].slug),
        app: None,
        installation: Some(installation),
    }))
}

/// Whether an installation may see `repo`.
pub(crate) fn holds(state: &State, installation: u64, repo: &RepoPath) -> bool {
    holds_named(
        state,
        installation,
        &format!("{}/{}", repo.owner, repo.name),
    )
}

/// Whether an installation may see the repository `owner/name`.
pub(crate) fn holds_named(state: &State, installation: u64, full_name: &str) -> bool {
    let name = full_name.to_lowercase();
    state
        .apps
        .installations
        .get(&installation)
        .is_some_and(|i| i.repos.contains(&name))
}

fn render_installation(ctx: &Ctx<'_>, id: u64, installation: &Installation) -> Value {
    json!({
        "id": id,
        "app_id": installation.app_id,
        "account": {"login": installation.account, "type": "Organization"},
        "repository_selection": "selected",
        "access_tokens_url": format!("{}/app/installations/{id}/access_tokens", ctx.api),
        "target_type": "Organization",
        "permissions": permissions(),
    })
}

fn permissions() -> Value {
    json!({"contents": "write", "pull_requests": "write", "checks": "read", "metadata": "read"})
}

/// `POST /app/installations/{id}/access_tokens`: a fresh installation token.
pub(crate) fn access_token(state: &mut State, ctx: &Ctx<'_>, installation: u64) -> Outcome {
    let body = json_body(state, ctx)?;
    unknown_members(
        state,
        ctx,
        &body,
        &["repositories", "repository_ids", "permissions"],
    );
    let app_id = ctx.app.unwrap_or_default();
    if state
        .apps
        .installations
        .get(&installation)
        .is_none_or(|i| i.app_id != app_id)
    {
        return Err(ApiError::not_found());
    }
    let lifetime = state.apps.apps[&app_id].token_lifetime;
    let tail: String = std::iter::repeat_with(|| state.rng.alphanumeric())
        .take(36)
        .collect();
    let token = format!("ghs_{tail}");
    let expires_ms =
        state.clock.now_ms() + i64::try_from(lifetime.as_millis()).unwrap_or(i64::MAX / 2);
    state.apps.tokens.insert(
        token.clone(),
        InstallationToken {
            installation,
            expires_ms,
        },
    );
    state.apps.issued.push(installation);
    Ok(Answer::with_status(
        201,
        json!({
            "token": token,
            "expires_at": iso_seconds(expires_ms),
            "permissions": permissions(),
            "repository_selection": "selected",
        }),
    ))
}

/// `GET /repos/{o}/{r}/installation`: the calling App's installation there.
pub(crate) fn repo_installation(state: &mut State, ctx: &Ctx<'_>, repo: &RepoPath) -> Outcome {
    let app_id = ctx.app.unwrap_or_default();
    let found = state
        .apps
        .installations
        .iter()
        .find(|(id, i)| i.app_id == app_id && holds(state, **id, repo));
    match found {
        Some((id, installation)) => Ok(Answer::ok(render_installation(ctx, *id, installation))),
        None => Err(ApiError::not_found()),
    }
}

/// `GET /app`: the calling App.
pub(crate) fn get(state: &mut State, ctx: &Ctx<'_>) -> Outcome {
    let app_id = ctx.app.unwrap_or_default();
    let slug = state.apps.apps[&app_id].slug.clone();
    Ok(Answer::ok(json!({
        "id": app_id,
        "slug": slug,
        "name": slug,
        "html_url": format!("https://github.com/apps/{slug}"),
        "permissions": permissions(),
        "events": [],
    })))
}

/// `GET /app/installations`: the calling App's installations (one page).
pub(crate) fn list(state: &mut State, ctx: &Ctx<'_>) -> Outcome {
    let app_id = ctx.app.unwrap_or_default();
    let list: Vec<Value> = state
        .apps
        .installations
        .iter()
        .filter(|(_, i)| i.app_id == app_id)
        .map(|(id, i)| render_installation(ctx, *id, i))
        .collect();
    Ok(Answer::ok(Value::Array(list)))
}

impl FakeGitHub {
    /// Registers a GitHub App: its id, slug and public key (PEM). Panics on
    /// a key that is not an RSA public key, a bug in the test.
    pub fn add_app(&self, spec: AppSpec) {
        let key = DecodingKey::from_rsa_pem(spec.public_key_pem.as_bytes())
            .unwrap_or_else(|e| panic!("the App's public key is not an RSA key in PEM: {e}"));
        self.shared.mutate(|s| {
            s.apps.apps.insert(
                spec.id,
                App {
                    slug: spec.slug,
                    key,
                    token_lifetime: spec.token_lifetime,
                },
            );
        });
    }

    /// Installs the App `app_id` on `repos` (`owner/name`, one owner);
    /// returns the installation's id.
    pub fn install_app(&self, app_id: u64, repos: &[&str]) -> u64 {
        self.shared.mutate(|s| {
            assert!(
                s.apps.apps.contains_key(&app_id),
                "the fake GitHub has no App {app_id}"
            );
            let account = repos
                .first()
                .and_then(|r| r.split_once('/'))
                .map(|(owner, _)| owner.to_owned())
                .unwrap_or_default();
            let id = s.new_id();
            s.apps.installations.insert(
                id,
                Installation {
                    app_id,
                    account,
                    repos: repos.iter().map(|r| r.to_lowercase()).collect(),
                },
            );
            id
        })
    }

    /// Ends every installation token issued so far, as if its hour were up:
    /// the next request with one gets 401 `Bad credentials`.
    pub fn expire_installation_tokens(&self) {
        self.shared.mutate(|s| {
            let now = s.clock.now_ms();
            for token in s.apps.tokens.values_mut() {
                token.expires_ms = token.expires_ms.min(now);
            }
        });
    }

    /// Whether `token` is an installation token this fake issued, not yet
    /// expired, whose installation covers `repo` (`owner/name`): what
    /// GitHub's git endpoint asks of the password it is given.
    pub fn installation_token_grants(&self, token: &str, repo: &str) -> bool {
        let mut state = self.shared.read();
        let now = state.clock.now_ms();
        let Some(issued) = state.apps.tokens.get(token) else {
            return false;
        };
        issued.expires_ms > now
            && state
                .apps
                .installations
                .get(&issued.installation)
                .is_some_and(|i| i.repos.contains(&repo.to_lowercase()))
    }

    /// How many installation tokens were issued, for any installation.
    pub fn installation_tokens_issued(&self) -> usize {
        self.shared.read().apps.issued.len()
    }
}
