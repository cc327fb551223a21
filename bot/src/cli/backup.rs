//! `eagle db backup <file>`: a consistent copy of the database, taken while
//! Eagle runs.
//!
//! SQLite: the store copies one snapshot (`VACUUM INTO`) into an empty file
//! created 0600 beside the target, makes it a single file, counts its rows
//! and checks it; only then is it renamed into place (never over an
//! existing file without `--force`). PostgreSQL: `pg_dump --format=custom`
//! into the same kind of temporary file, the connection taken from the
//! profile's URL, the password handed to the child in `PGPASSWORD` (never on
//! its command line, never printed); without `pg_dump` on `PATH`, the
//! command to run is printed instead, its password redacted.

use std::collections::BTreeMap;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use secrecy::{ExposeSecret as _, SecretString};

use crate::profile::{DatabaseUrl, Profile};
use crate::store::Store;

/// `eagle db backup`.
pub(super) async fn backup(
    profile: &Profile,
    file: &Path,
    force: bool,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<ExitCode> {
    if file.as_os_str().is_empty() || file.is_dir() {
        bail!(
            "{}: a backup is written to a file, not a directory",
            file.display()
        );
    }
    if !force && std::fs::symlink_metadata(file).is_ok() {
        bail!(
            "{} exists: give another name, or --force to replace it",
            file.display()
        );
    }
    let url = &profile.database_url;
    if let Some(db) = crate::store::sqlite_file(url)
        && !db.is_file()
    {
        bail!(
            "profile {}: there is no database at {} to back up",
            profile.name,
            db.display()
        );
    }
    if let Some(db) = crate::store::sqlite_file(url)
        && let Some(db) = std::fs::canonicalize(&db).ok()
        && let Some(target) = canonical_target(file)
    {
        let db = db.to_string_lossy().into_owned();
        let target = target.to_string_lossy();
        if ["", "-wal", "-shm", "-journal"]
            .iter()
            .any(|end| target == format!("{db}{end}"))
        {
            bail!(
                "{} is the database itself (or its journal): write the backup elsewhere",
                file.display()
            );
        }
    }
    let temp = Temp::create(file)?;
    if url.is_postgres() {
        pg_backup(profile, file, temp, force, env).await
    } else {
        let store = Store::connect(url)
            .await
            .with_context(|| format!("profile {}", profile.name))?;
        let copied = store.copy_sqlite_into(temp.path()).await;
        let migrations = store.applied_migrations().await;
        store.close().await;
        let counts = copied.with_context(|| format!("backing up {}", store.url()))?;
        let size = temp.finish(file, force)?;
        println!(
            "wrote {} ({size} bytes, SQLite, {} migration(s)): {counts}",
            file.display(),
            migrations.unwrap_or(0)
        );
        Ok(ExitCode::SUCCESS)
    }
}

async fn pg_backup(
    profile: &Profile,
    file: &Path,
    temp: Temp,
    force: bool,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<ExitCode> {
    let target = PgTarget::of(&profile.database_url)?;
    let Some(pg_dump) = on_path(env, "pg_dump") else {
        drop(temp);
        eprintln!(
            "pg_dump is not on PATH: nothing was written. Run this (with the password given):"
        );
        println!("{}", target.command_line(file));
        return Ok(ExitCode::FAILURE);
    };
    let store = Store::connect(&profile.database_url)
        .await
        .with_context(|| format!("profile {}", profile.name))?;
    let counts = store.row_counts().await;
    let migrations = store.applied_migrations().await;
    store.close().await;
    let counts = counts.with_context(|| format!("counting the rows of {}", store.url()))?;
    let mut command = tokio::process::Command::new(&pg_dump);
    command
        .env_clear()
        .envs(env)
        .args(target.args(temp.path()))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    // The URL's password wins over one the environment has.
    if let Some(password) = &target.password {
        command.env("PGPASSWORD", password.expose_secret());
    }
    let output = command
        .output()
        .await
        .with_context(|| format!("cannot run {}", pg_dump.display()))?;
    if !output.status.success() {
        bail!(
            "pg_dump failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let size = temp.finish(file, force)?;
    println!(
        "wrote {} ({size} bytes, pg_dump custom format, {} migration(s); restore with pg_restore); \
         as the dump began: {counts}",
        file.display(),
        migrations.unwrap_or(0)
    );
    Ok(ExitCode::SUCCESS)
}

/// What `pg_dump` is given: a libpq URI without the password, the
/// password apart, and the schemas the URL's `search_path` names.
struct PgTarget {
    uri: String,
    password: Option<SecretString>,
    schemas: Vec<String>,
}

impl PgTarget {
    /// Takes the store's URL apart for libpq: `password` (in the user part or a
    /// parameter) is handed over apart; the store driver's own parameters are left out
    /// (`statement-cache-capacity`) or translated (`options[search_path]`
    /// names the schemas to dump; other `options[k]=v` become libpq's
    /// `options=-c k=v`).
    fn of(url: &DatabaseUrl) -> anyhow::Result<PgTarget> {
        let mut parsed = url::Url::parse(url.expose())
            .map_err(|_| anyhow::anyhow!("database_url {} is not a URL", url.redacted()))?;
        let mut password = parsed
            .password()
            .map(|p| SecretString::from(percent_decode(p)));
        let _ = parsed.set_password(None);
        let mut schemas = Vec::new();
        let mut options = Vec::new();
        let mut kept = Vec::new();
        for (key, value) in parsed.query_pairs() {
            let lower = key.to_ascii_lowercase();
            if lower == "password" {
                password = Some(SecretString::from(value.into_owned()));
            } else if lower == "statement-cache-capacity" || lower == "sslpassword" {
            } else if let Some(name) = key
                .strip_prefix("options[")
                .and_then(|k| k.strip_suffix(']'))
            {
                if name == "search_path" {
                    schemas.extend(
                        value
                            .split(',')
                            .map(|s| s.trim().trim_matches('"').to_string())
                            .filter(|s| !s.is_empty() && s != "$user"),
                    );
                } else {
                    options.push(format!("-c {name}={value}"));
                }
            } else {
                kept.push((key.into_owned(), value.into_owned()));
            }
        }
        if !options.is_empty() {
            kept.push(("options".into(), options.join(" ")));
        }
        // libpq decodes %XX only (a '+' stays a '+'): no form encoding.
        let query: Vec<String> = kept
            .iter()
            .map(|(k, v)| format!("{}={}", uri_component(k), uri_component(v)))
            .collect();
        parsed.set_query((!query.is_empty()).then(|| query.join("&")).as_deref());
        parsed.set_fragment(None);
        Ok(PgTarget {
            uri: parsed.to_string(),
            password: password.filter(|p| !p.expose_secret().is_empty()),
            schemas,
        })
    }

    fn args(&self, file: &Path) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = vec![
            "--format=custom".into(),
            "--no-password".into(),
            "--file".into(),
            file.into(),
        ];
        for schema in &self.schemas {
            args.push(format!("--schema={schema}").into());
        }
        args.push(format!("--dbname={}", self.uri).into());
        args
    }

    /// The command an operator runs, the password redacted.
    fn command_line(&self, file: &Path) -> String {
        let mut line = String::new();
        if self.password.is_some() {
            line.push_str("PGPASSWORD='***' ");
        }
        line.push_str("pg_dump");
        for arg in self.args(file) {
            if arg == "--no-password" {
                continue;
            }
            line.push(' ');
            line.push_str(&shell_quote(&arg.to_string_lossy()));
        }
        line
    }
}

/// The text of a URL's percent-encoded part (a password).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A URI query's key or value, everything but the unreserved characters
/// escaped.
fn uri_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Quotes a word for a POSIX shell when it needs it.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=./:@%+,".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Where `file` would be, its directory's links resolved.
fn canonical_target(file: &Path) -> Option<PathBuf> {
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    Some(std::fs::canonicalize(dir).ok()?.join(file.file_name()?))
}

/// A program on the environment's `PATH`.
fn on_path(env: &BTreeMap<String, String>, name: &str) -> Option<PathBuf> {
    let path = env.get("PATH")?;
    path.split(':')
        .map(Path::new)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|file| {
            std::fs::metadata(file)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The temporary file beside the target, removed unless finished.
struct Temp {
    path: Option<PathBuf>,
}

impl Temp {
    /// An empty file, 0600, beside `file`.
    fn create(file: &Path) -> anyhow::Result<Temp> {
        let name = file
            .file_name()
            .with_context(|| format!("{}: not a file name", file.display()))?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(
            ".tmp-{}-{:x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        let path = file.with_file_name(temp_name);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Temp { path: Some(path) })
    }

    fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    /// Makes the copy durable and private, and puts it in place: over an
    /// existing file only with `force`. Returns its size.
    fn finish(mut self, file: &Path, force: bool) -> anyhow::Result<u64> {
        let path = self
            .path
            .take()
            .context("the backup's temporary file is gone")?;
        let result = (|| {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            let copy = std::fs::OpenOptions::new().append(true).open(&path)?;
            copy.sync_all()?;
            let size = copy.metadata()?.len();
            if force {
                std::fs::rename(&path, file)?;
            } else {
                // A link fails if the name was taken meanwhile: never over a file.
                std::fs::hard_link(&path, file)?;
                std::fs::remove_file(&path)?;
            }
            if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
                let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
            }
            Ok::<_, std::io::Error>(size)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&path);
        }
        result.with_context(|| format!("cannot put the backup in place at {}", file.display()))
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> PgTarget {
        PgTarget::of(&DatabaseUrl::new(url)).expect("a URL")
    }

    #[test]
    fn the_password_leaves_the_uri_and_driver_parameters_become_libpq_ones() {
        let t = target(
            "postgres://eagle:p%40ss%23w@db.example:5433/eagle?sslmode=require\
             &options[search_path]=eagle,\"$user\"&options[statement_timeout]=5s&statement-cache-capacity=10",
        );
        assert_eq!(
            t.password.as_ref().map(|p| p.expose_secret()),
            Some("p@ss#w")
        );
        assert_eq!(t.schemas, ["eagle"]);
        assert_eq!(
            t.uri,
            "postgres://eagle@db.example:5433/eagle?sslmode=require&options=-c%20statement_timeout%3D5s"
        );
        let line = t.command_line(Path::new("/backups/eagle 1.dump"));
        assert_eq!(
            line,
            "PGPASSWORD='***' pg_dump --format=custom --file '/backups/eagle 1.dump' --schema=eagle \
             '--dbname=postgres://eagle@db.example:5433/eagle?sslmode=require&options=-c%20statement_timeout%3D5s'"
        );
        assert!(!line.contains("p@ss") && !line.contains("p%40ss"));
    }

    #[test]
    fn a_password_parameter_is_taken_out_too_and_no_password_means_no_pgpassword() {
        let t = target("postgresql://eagle@localhost/eagle?password=hunter2");
        assert_eq!(
            t.password.as_ref().map(|p| p.expose_secret()),
            Some("hunter2")
        );
        assert_eq!(t.uri, "postgresql://eagle@localhost/eagle");
        let t = target("postgres://eagle@localhost/eagle");
        assert!(t.password.is_none());
        assert!(t.schemas.is_empty());
        assert!(
            t.command_line(Path::new("x.dump"))
                .starts_with("pg_dump --format=custom --file x.dump --dbname=")
        );
    }

    #[test]
    fn percent_decoding_keeps_what_is_not_an_escape() {
        assert_eq!(percent_decode("a%20b%zz%4"), "a b%zz%4");
    }
}
