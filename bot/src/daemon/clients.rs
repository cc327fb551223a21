//! The outside APIs a profile talks to, each client built once per
//! process: GitHub (its ETags and bodies kept in the database, so that a
//! restart costs no quota) and Asana.

use std::sync::Arc;

use crate::integrations::asana::{Asana, AsanaConfig, PlatformRule};
use crate::integrations::github::cache::{CacheFuture, CachedResponse, EtagCache};
use crate::integrations::github::{GitHub, GitHubAuth, GitHubConfig};
use crate::profile::{GithubSettings, Profile};
use crate::store::{CachedAnswer, Store};

/// ETags and bodies in the database.
struct StoreCache(Store);

impl EtagCache for StoreCache {
    fn get<'a>(&'a self, url: &'a str) -> CacheFuture<'a, Option<CachedResponse>> {
        Box::pin(async move {
            match self.0.prs().cached_answer(url).await {
                Ok(found) => found.map(|a| CachedResponse {
                    etag: a.etag,
                    body: a.body.into_bytes(),
                    next_page: a.next_page,
                }),
                Err(error) => {
                    tracing::warn!(%error, "cannot read a kept GitHub answer; asking again");
                    None
                }
            }
        })
    }

    fn put<'a>(&'a self, url: &'a str, response: CachedResponse) -> CacheFuture<'a, ()> {
        Box::pin(async move {
            // GitHub answers JSON, which is UTF-8; anything else is not kept.
            let Ok(body) = String::from_utf8(response.body) else {
                return;
            };
            let answer = CachedAnswer {
                etag: response.etag,
                body,
                next_page: response.next_page,
            };
            if let Err(error) = self.0.prs().keep_answer(url, &answer).await {
                tracing::warn!(%error, "cannot keep a GitHub answer; the next poll costs quota");
            }
        })
    }
}

/// The GitHub client of `profile`'s `[github]`, if it has one. Its
/// credential ([`GitHub::auth`]) is also what git pushes with.
pub fn github(profile: &Profile, store: &Store) -> anyhow::Result<Option<GitHub>> {
    let Some(settings) = &profile.github else {
        return Ok(None);
    };
    let auth = github_auth(settings)
        .map_err(|e| anyhow::anyhow!("profile {}: github: {e}", profile.name))?;
    let mut config = GitHubConfig::with_auth(auth);
    config.api_url = settings.api_url.clone();
    let client = GitHub::with_etag_cache(config, Arc::new(StoreCache(store.clone())))
        .map_err(|e| anyhow::anyhow!("profile {}: github: {e}", profile.name))?;
    Ok(Some(client))
}

/// The credential of `[github]`: its token, or its GitHub App (the key
/// parsed now), for the profile's repository.
pub fn github_auth(
    settings: &GithubSettings,
) -> Result<GitHubAuth, crate::integrations::github::Error> {
    GitHubAuth::of_settings(settings)
}

/// The Asana client of `profile`'s `[asana]`, if it has one.
pub fn asana(profile: &Profile) -> anyhow::Result<Option<Arc<Asana>>> {
    let Some(settings) = &profile.eagle.asana else {
        return Ok(None);
    };
    let mut config = AsanaConfig::new(settings.api_url.clone(), settings.token.clone());
    config.platform = PlatformRule {
        field: settings.platform_field.clone(),
        tags: settings.platform_tags.clone(),
    };
    let asana =
        Asana::new(config).map_err(|e| anyhow::anyhow!("profile {}: asana: {e}", profile.name))?;
    Ok(Some(Arc::new(asana)))
}
