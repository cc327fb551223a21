//! Where the database is: a plain type below both the configuration that
//! names it and the store that opens it.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};

/// Where the database is. Held as a secret because a PostgreSQL URL may carry
/// a password; [`DatabaseUrl::redacted`] is what may be shown.
#[derive(Clone)]
pub struct DatabaseUrl(SecretString);

impl DatabaseUrl {
    pub fn new(url: impl Into<String>) -> Self {
        DatabaseUrl(SecretString::from(url.into()))
    }

    /// The URL itself, for the store to connect with. Never log it.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    /// Whether this is a PostgreSQL URL.
    pub fn is_postgres(&self) -> bool {
        let url = self.expose();
        url.starts_with("postgres://") || url.starts_with("postgresql://")
    }

    /// The URL with any password replaced by `***`, safe to print.
    pub fn redacted(&self) -> String {
        const SECRET_PARAMS: &[&str] = &["password", "sslpassword", "passfile"];
        match url::Url::parse(self.expose()) {
            Ok(mut url) => {
                if url.password().is_some() {
                    let _ = url.set_password(Some("***"));
                }
                // A '#' in a password starts a fragment: what follows it is
                // part of a secret, never shown.
                if url.fragment().is_some() {
                    url.set_fragment(Some("***"));
                }
                let hidden = url
                    .query_pairs()
                    .any(|(k, _)| SECRET_PARAMS.contains(&k.to_ascii_lowercase().as_str()));
                if hidden {
                    let pairs: Vec<(String, String)> = url
                        .query_pairs()
                        .map(|(k, v)| {
                            let secret = SECRET_PARAMS.contains(&k.to_ascii_lowercase().as_str());
                            (
                                k.into_owned(),
                                if secret { "***".into() } else { v.into_owned() },
                            )
                        })
                        .collect();
                    url.query_pairs_mut().clear().extend_pairs(pairs);
                }
                url.to_string()
            }
            Err(_) => "<not a URL>".into(),
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}
