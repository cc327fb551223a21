//! The small pieces every section's validation shares: where a key came
//! from (the file or the environment), durations, Unix user names, and the
//! fixed vocabularies a profile may name. Sections use these; the whole
//! profile's validation ([`super::validate`]) uses the sections.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::ProfileError;

/// The plugins compiled into the binary.
pub const BUILTIN_PLUGINS: &[&str] = &["default-approval", "default-filter"];

/// What a worker command may hold besides plain words.
pub const WORKER_PLACEHOLDERS: &[&str] = &["prompt", "workdir", "run", "task", "attempt"];

/// Names the origin of a key: the environment variable that overrode it, or the file.
pub(super) struct Origins<'a> {
    pub(super) file: String,
    pub(super) env: &'a BTreeMap<String, String>,
}

impl Origins<'_> {
    pub(super) fn of(&self, key: &str) -> String {
        let var = format!(
            "{}{}",
            super::ENV_PREFIX,
            key.replace('.', "__").to_uppercase()
        );
        if self.env.contains_key(&var) {
            format!("{var} (environment)")
        } else {
            self.file.clone()
        }
    }

    pub(super) fn error(
        &self,
        key: &str,
        index: Option<usize>,
        message: impl Into<String>,
    ) -> ProfileError {
        let shown = match index {
            Some(i) => format!("{key}[{i}]"),
            None => key.to_string(),
        };
        ProfileError::new(self.of(key), Some(shown), message)
    }

    /// Relative paths from the file resolve against its directory; from the
    /// environment, against the working directory.
    pub(super) fn resolve(&self, key: &str, base: &Path, value: &str) -> PathBuf {
        let path = Path::new(value);
        if path.is_absolute() || self.of(key) != self.file {
            path.to_path_buf()
        } else {
            base.join(path)
        }
    }
}

/// A Unix user name, if set.
pub(super) fn unix_user(
    key: &str,
    value: Option<&str>,
    origins: &Origins<'_>,
) -> Result<Option<String>, ProfileError> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(user)
            if user
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
        {
            Ok(Some(user.to_string()))
        }
        Some(user) => Err(origins.error(key, None, format!("{user:?} is not a Unix user name"))),
    }
}

/// A duration such as `90s` or `24h`, or `default` when unset.
pub(super) fn duration(value: Option<&str>, default: Duration) -> Result<Duration, String> {
    match value {
        None => Ok(default),
        Some(text) => humantime::parse_duration(text.trim())
            .map_err(|e| format!("{text:?} is not a duration like \"90s\" or \"24h\" ({e})")),
    }
}

pub(super) fn read_token_file(path: &Path) -> Result<secrecy::SecretString, String> {
    let text = read_private_file(path)?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    if token.chars().any(char::is_whitespace) {
        return Err(format!("{} holds more than one token", path.display()));
    }
    Ok(secrecy::SecretString::from(token.to_string()))
}

/// A file only Eagle's user may read, as text.
pub(super) fn read_private_file(path: &Path) -> Result<String, String> {
    private_file(path)?;
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Refuses a file others may read (a key, a token).
pub(super) fn private_file(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{} is readable by others: make it Eagle's user's only (chmod 600)",
            path.display()
        ));
    }
    Ok(())
}
