//! Zulip credentials, following the Zulip convention: a zuliprc INI file with
//! an `[api]` section (`email`, `key`, `site`, and the TLS keys `insecure`,
//! `cert_bundle`/`client_bundle`, `client_cert`, `client_cert_key`), whose
//! path `ZULIP_CONFIG` overrides and whose values `ZULIP_SITE`, `ZULIP_EMAIL`,
//! `ZULIP_API_KEY`, `ZULIP_CERT_BUNDLE`, `ZULIP_CERT`, `ZULIP_CERT_KEY` and
//! `ZULIP_ALLOW_INSECURE` override, as in the official Python bindings.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use config::{Config, File, FileFormat};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

use crate::profile::{Profile, ProfileError};

/// TLS settings for the connection to the Zulip server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tls {
    /// Accept any server certificate. For test servers only.
    pub insecure: bool,
    /// Extra CA certificates (PEM) to trust.
    pub ca_bundle: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub client_cert_key: Option<PathBuf>,
}

/// One bot's credentials. The API key is a [`SecretString`]: it is sent in
/// the `Authorization` header and nowhere else.
#[derive(Clone)]
pub struct ZulipCredentials {
    pub email: String,
    pub api_key: SecretString,
    /// The server, normalised: scheme present, no trailing slash.
    pub site: Url,
    pub tls: Tls,
    /// Where the credentials came from, for messages.
    pub source: String,
}

impl ZulipCredentials {
    /// The REST API root, `{site}/api/v1/`.
    pub fn api_base(&self) -> Url {
        let mut base = self.site.clone();
        let path = format!("{}/api/v1/", base.path().trim_end_matches('/'));
        base.set_path(&path);
        base
    }

    /// Whether the key is non-empty (for diagnostics that must not show it).
    pub fn has_key(&self) -> bool {
        !self.api_key.expose_secret().trim().is_empty()
    }
}

impl fmt::Debug for ZulipCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZulipCredentials")
            .field("email", &self.email)
            .field("api_key", &"[redacted]")
            .field("site", &self.site.as_str())
            .field("tls", &self.tls)
            .field("source", &self.source)
            .finish()
    }
}

/// Reads the credentials from `path` (or `ZULIP_CONFIG`) and the `ZULIP_*` variables.
pub fn load(path: &Path, env: &BTreeMap<String, String>) -> Result<ZulipCredentials, ProfileError> {
    let path = match env.get("ZULIP_CONFIG").filter(|v| !v.is_empty()) {
        Some(over) => PathBuf::from(over),
        None => path.to_path_buf(),
    };
    let file = path.display().to_string();
    let mut values: HashMap<String, String> = HashMap::new();
    if path.is_file() {
        let parsed = Config::builder()
            .add_source(File::from(path.as_path()).format(FileFormat::Ini))
            .build()
            .map_err(|e| ProfileError::new(&file, None, format!("not a zuliprc INI file: {e}")))?;
        let api: HashMap<String, String> = parsed.get("api").map_err(|_| {
            ProfileError::new(&file, None, "has no [api] section with email, key and site")
        })?;
        values.extend(api);
    }
    let from_env = |var: &str| env.get(var).filter(|v| !v.is_empty()).cloned();
    let mut origin_of: HashMap<&str, String> = HashMap::new();
    for (key, var) in [
        ("email", "ZULIP_EMAIL"),
        ("key", "ZULIP_API_KEY"),
        ("site", "ZULIP_SITE"),
        ("cert_bundle", "ZULIP_CERT_BUNDLE"),
        ("client_cert", "ZULIP_CERT"),
        ("client_cert_key", "ZULIP_CERT_KEY"),
        ("insecure", "ZULIP_ALLOW_INSECURE"),
    ] {
        if let Some(value) = from_env(var) {
            values.insert(key.to_string(), value);
            origin_of.insert(key, format!("{var} (environment)"));
        }
    }
    let origin = |key: &str| origin_of.get(key).cloned().unwrap_or_else(|| file.clone());
    let missing = |key: &str, var: &str| {
        let message = if path.is_file() {
            format!("missing (set it in [api] or with {var})")
        } else {
            format!("missing: the zuliprc file does not exist and {var} is not set")
        };
        ProfileError::new(&file, Some(format!("[api] {key}")), message)
    };
    let get = |key: &str| {
        values
            .get(key)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };

    let email = get("email").ok_or_else(|| missing("email", "ZULIP_EMAIL"))?;
    if !email.contains('@') {
        return Err(ProfileError::new(
            origin("email"),
            Some("[api] email".into()),
            format!("{email:?} is not an email address"),
        ));
    }
    // The server strips whitespace around the key; so do we.
    let api_key = SecretString::from(get("key").ok_or_else(|| missing("key", "ZULIP_API_KEY"))?);
    let site_text = get("site").ok_or_else(|| missing("site", "ZULIP_SITE"))?;
    let site = normalize_site(&site_text)
        .map_err(|why| ProfileError::new(origin("site"), Some("[api] site".into()), why))?;

    let insecure = match get("insecure").map(|v| v.to_ascii_lowercase()) {
        None => false,
        Some(v) if v == "true" => true,
        Some(v) if v == "false" => false,
        Some(v) => {
            return Err(ProfileError::new(
                origin("insecure"),
                Some("[api] insecure".into()),
                format!("{v:?} is not true or false"),
            ));
        }
    };
    let base = path.parent().unwrap_or(Path::new("."));
    let existing = |key: &str| -> Result<Option<PathBuf>, ProfileError> {
        let Some(value) = get(key) else {
            return Ok(None);
        };
        let candidate = Path::new(&value);
        let resolved = if candidate.is_absolute() || origin_of.contains_key(key) {
            candidate.to_path_buf()
        } else {
            base.join(candidate)
        };
        if resolved.is_file() {
            Ok(Some(resolved))
        } else {
            Err(ProfileError::new(
                origin(key),
                Some(format!("[api] {key}")),
                format!("{} does not exist", resolved.display()),
            ))
        }
    };
    // The Zulip docs say `client_bundle`, the Python client reads `cert_bundle`: accept both.
    let ca_bundle = match existing("cert_bundle")? {
        Some(bundle) => Some(bundle),
        None => existing("client_bundle")?,
    };
    let tls = Tls {
        insecure,
        ca_bundle,
        client_cert: existing("client_cert")?,
        client_cert_key: existing("client_cert_key")?,
    };
    if tls.client_cert_key.is_some() && tls.client_cert.is_none() {
        return Err(ProfileError::new(
            origin("client_cert_key"),
            Some("[api] client_cert_key".into()),
            "given without client_cert",
        ));
    }
    Ok(ZulipCredentials {
        email,
        api_key,
        site,
        tls,
        source: file,
    })
}

/// Normalises a site as the Python client does: `https://` when no scheme is
/// given (`http://` for localhost), no trailing slash.
pub fn normalize_site(site: &str) -> Result<Url, String> {
    let site = site.trim().trim_end_matches('/');
    let with_scheme = if site.contains("://") {
        site.to_string()
    } else if site.starts_with("localhost") || site.starts_with("127.0.0.1") {
        format!("http://{site}")
    } else {
        format!("https://{site}")
    };
    // A site with `user:password@` in it is never echoed: it may hold a secret.
    let shown = if site.contains('@') {
        "the site (it holds an '@': shown without it)".to_string()
    } else {
        format!("{site:?}")
    };
    let url = Url::parse(&with_scheme).map_err(|e| format!("{shown} is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{shown} is not an http or https URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{shown} has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        let mut masked = url.clone();
        let _ = masked.set_username("***");
        let _ = masked.set_password(None);
        return Err(format!(
            "{masked} carries a user name or password: remove it (the bot signs in with its key)"
        ));
    }
    Ok(url)
}

/// The Zulip credentials of `profile`: its zuliprc, with `ZULIP_*`
/// overrides from `env`.
pub fn credentials(
    profile: &Profile,
    env: &BTreeMap<String, String>,
) -> Result<ZulipCredentials, ProfileError> {
    load(&profile.zuliprc, env)
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

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
        /// Where the profile `name` keeps its zuliprc.
        fn rc(&self, name: &str) -> std::path::PathBuf {
            self.path().join(format!("{name}.zuliprc"))
        }
    }

    fn env_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_site_with_credentials_in_it_is_refused_without_showing_them() {
        for site in [
            "https://bob:hunter2@chat.example.com",
            "https://bob:hun ter2@chat",
        ] {
            let error = normalize_site(site).unwrap_err();
            assert!(
                !error.contains("hunter2") && !error.contains("hun ter2"),
                "{error}"
            );
        }
    }

    #[test]
    fn zuliprc_is_read_and_overridden_by_zulip_variables() {
        let dir = Dir::new();
        dir.write(
            "p.zuliprc",
            "[api]\nemail=eagle-bot@example.com\nkey= abcdefghijklmnop \nsite=chat.example.com/\n",
        );
        let creds = load(&dir.rc("p"), &env_of(&[])).unwrap();
        assert_eq!(creds.email, "eagle-bot@example.com");
        assert_eq!(creds.api_key.expose_secret(), "abcdefghijklmnop");
        assert_eq!(creds.site.as_str(), "https://chat.example.com/");
        assert_eq!(
            creds.api_base().as_str(),
            "https://chat.example.com/api/v1/"
        );
        assert!(!creds.tls.insecure);
        assert!(!format!("{creds:?}").contains("abcdefghijklmnop"));

        let env = env_of(&[
            ("ZULIP_SITE", "localhost:9991"),
            ("ZULIP_API_KEY", "fromenvironment"),
            ("ZULIP_ALLOW_INSECURE", "TRUE"),
        ]);
        let creds = load(&dir.rc("p"), &env).unwrap();
        assert_eq!(creds.site.as_str(), "http://localhost:9991/");
        assert_eq!(creds.api_key.expose_secret(), "fromenvironment");
        assert_eq!(creds.email, "eagle-bot@example.com");
        assert!(creds.tls.insecure);

        // ZULIP_CONFIG points elsewhere.
        dir.write(
            "other.rc",
            "[api]\nemail=other@example.com\nkey=k\nsite=https://z.example.com\n",
        );
        let other = dir.path().join("other.rc").display().to_string();
        let creds = load(&dir.rc("p"), &env_of(&[("ZULIP_CONFIG", &other)])).unwrap();
        assert_eq!(creds.email, "other@example.com");

        // Everything from the environment, no file at all.
        let creds = load(
            &dir.rc("q"),
            &env_of(&[
                ("ZULIP_EMAIL", "e@example.com"),
                ("ZULIP_API_KEY", "k"),
                ("ZULIP_SITE", "https://z.example.com"),
            ]),
        )
        .unwrap();
        assert_eq!(creds.email, "e@example.com");
    }

    #[test]
    fn zuliprc_tls_keys_resolve_against_the_file() {
        let dir = Dir::new();
        dir.write("ca.pem", "x")
            .write("cert.pem", "x")
            .write("key.pem", "x")
            .write(
                "p.zuliprc",
                "[api]\nemail=a@example.com\nkey=k\nsite=https://z.example.com\n\
                 client_bundle=ca.pem\nclient_cert=cert.pem\nclient_cert_key=key.pem\ninsecure=false\n",
            );
        let creds = load(&dir.rc("p"), &env_of(&[])).unwrap();
        assert_eq!(creds.tls.ca_bundle, Some(dir.path().join("ca.pem")));
        assert_eq!(creds.tls.client_cert, Some(dir.path().join("cert.pem")));
        assert_eq!(creds.tls.client_cert_key, Some(dir.path().join("key.pem")));
    }

    #[test]
    fn bad_zuliprc_values_are_named() {
        let dir = Dir::new();
        let rc = dir.path().join("p.zuliprc").display().to_string();
        let cases: &[(&str, String)] = &[
            (
                "",
                format!(
                    "{rc}: [api] email: missing: the zuliprc file does not exist and ZULIP_EMAIL is not set"
                ),
            ),
            (
                "[api]\nemail=a@example.com\nsite=https://z.example.com\n",
                format!("{rc}: [api] key: missing (set it in [api] or with ZULIP_API_KEY)"),
            ),
            (
                "[api]\nemail=nobody\nkey=k\nsite=https://z.example.com\n",
                format!("{rc}: [api] email: \"nobody\" is not an email address"),
            ),
            (
                "[api]\nemail=a@example.com\nkey=k\nsite=ftp://z.example.com\n",
                format!("{rc}: [api] site: \"ftp://z.example.com\" is not an http or https URL"),
            ),
            (
                "[api]\nemail=a@example.com\nkey=k\nsite=https://z.example.com\ninsecure=maybe\n",
                format!("{rc}: [api] insecure: \"maybe\" is not true or false"),
            ),
            (
                "[api]\nemail=a@example.com\nkey=k\nsite=https://z.example.com\ncert_bundle=nope.pem\n",
                format!(
                    "{rc}: [api] cert_bundle: {} does not exist",
                    dir.path().join("nope.pem").display()
                ),
            ),
            (
                "[other]\nemail=a@example.com\n",
                format!("{rc}: has no [api] section with email, key and site"),
            ),
        ];
        for (text, want) in cases {
            if text.is_empty() {
                let _ = std::fs::remove_file(dir.path().join("p.zuliprc"));
            } else {
                dir.write("p.zuliprc", text);
            }
            let got = load(&dir.rc("p"), &env_of(&[]))
                .expect_err(text)
                .to_string();
            assert_eq!(&got, want, "for zuliprc:\n{text}");
        }
    }
}
