//! `[runner.sandbox]`: how workers are confined. The operating system is
//! the boundary (see `crate::confine::sandbox`); these settings say what the
//! boundary lets through (the hosts the egress proxy connects) and the
//! limits of a run. Confinement is on unless the profile says
//! `mode = "off"` in so many words.

use std::path::{Path, PathBuf};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use serde::Deserialize;

use super::field::Origins;
use super::{ProfileError, WorkerKind};

/// The model API Claude Code talks to unless the worker's environment names another.
const CLAUDE_API_HOST: &str = "api.anthropic.com";

/// `[runner.sandbox]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSandbox {
    pub mode: Option<String>,
    pub allow_hosts: Option<Vec<String>>,
    pub max_processes: Option<i64>,
    pub max_file_size: Option<String>,
    pub max_open_files: Option<i64>,
    pub max_disk: Option<String>,
    pub read_only: Option<Vec<String>>,
    pub model_ca_file: Option<String>,
}

/// Whether workers are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    /// Confined by the kernel; workers do not start where it cannot confine.
    On,
    /// Unconfined, because the profile says so; `eagle check`, the startup
    /// log and every `!status` say it.
    Off,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::On => "on",
            SandboxMode::Off => "off",
        }
    }
}

/// The sandbox of a profile's workers, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    /// The hosts a worker may reach through its egress proxy.
    pub allow_hosts: Vec<HostPattern>,
    /// Processes (and threads) of one run at once.
    pub max_processes: u64,
    /// The largest file a worker may write, in bytes (its work log too).
    pub max_file_size: u64,
    /// Open files per process.
    pub max_open_files: u64,
    /// What a run's directory may hold, in bytes.
    pub max_disk: u64,
    /// Shown read-only in every worker's view besides the system (a
    /// toolchain under `/opt`, say).
    pub read_only: Vec<std::path::PathBuf>,
    /// `model_ca_file`: certificates (PEM) the egress proxy trusts, beside
    /// the system's roots, when it reaches a host whose requests it reads
    /// (a private model gateway), read at start-up.
    pub model_ca_file: Option<PathBuf>,
    pub model_ca: Vec<CertificateDer<'static>>,
}

impl SandboxSettings {
    /// Whether `host:port` may be reached.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.allow_hosts.iter().any(|p| p.matches(host, port))
    }
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            mode: SandboxMode::On,
            allow_hosts: Vec::new(),
            max_processes: 512,
            max_file_size: 1 << 30,
            max_open_files: 1024,
            max_disk: 10 << 30,
            read_only: Vec::new(),
            model_ca_file: None,
            model_ca: Vec::new(),
        }
    }
}

pub use crate::ground::host_pattern::HostPattern;

/// Validates `[runner.sandbox]`. Without `allow_hosts`, a Claude Code
/// worker may reach its model API (`model_url`: the `ANTHROPIC_BASE_URL`
/// its environment passes, if any; else Anthropic's); any other worker
/// nothing.
pub(super) fn sandbox_settings(
    raw: RawSandbox,
    kind: Option<WorkerKind>,
    model_url: Option<&str>,
    origins: &Origins<'_>,
    base: &Path,
) -> Result<SandboxSettings, ProfileError> {
    let defaults = SandboxSettings::default();
    let mode = match raw.mode.as_deref().map(str::trim) {
        None | Some("on") => SandboxMode::On,
        Some("off") => SandboxMode::Off,
        Some(other) => {
            return Err(origins.error(
                "runner.sandbox.mode",
                None,
                format!("{other:?} is neither \"on\" nor \"off\""),
            ));
        }
    };
    let allow_hosts = allow_hosts(
        "runner.sandbox.allow_hosts",
        raw.allow_hosts,
        kind,
        model_url,
        origins,
    )?;
    let count = |key: &str, value: Option<i64>, default: u64, max: u64| {
        let Some(value) = value else {
            return Ok(default);
        };
        u64::try_from(value)
            .ok()
            .filter(|v| (1..=max).contains(v))
            .ok_or_else(|| origins.error(key, None, format!("{value} is outside 1..={max}")))
    };
    let size = |key: &str, value: Option<&str>, default: u64| match value {
        None => Ok(default),
        Some(text) => parse_size(text).map_err(|why| origins.error(key, None, why)),
    };
    let mut read_only = Vec::new();
    for (i, path) in raw.read_only.unwrap_or_default().iter().enumerate() {
        let path = std::path::Path::new(path.trim());
        if !path.is_absolute() || path.components().any(|c| c.as_os_str() == "..") {
            return Err(origins.error(
                "runner.sandbox.read_only",
                Some(i),
                format!(
                    "{:?} is not an absolute path without `..`",
                    path.display().to_string()
                ),
            ));
        }
        read_only.push(path.to_path_buf());
    }
    let (model_ca_file, model_ca) = match raw.model_ca_file.as_deref().map(str::trim) {
        None => (None, Vec::new()),
        Some(text) => {
            const KEY: &str = "runner.sandbox.model_ca_file";
            let path = origins.resolve(KEY, base, text);
            let certs = certificates(&path).map_err(|why| origins.error(KEY, None, why))?;
            (Some(path), certs)
        }
    };
    Ok(SandboxSettings {
        mode,
        allow_hosts,
        read_only,
        model_ca_file,
        model_ca,
        max_processes: count(
            "runner.sandbox.max_processes",
            raw.max_processes,
            defaults.max_processes,
            1 << 20,
        )?,
        max_file_size: size(
            "runner.sandbox.max_file_size",
            raw.max_file_size.as_deref(),
            defaults.max_file_size,
        )?,
        max_open_files: count(
            "runner.sandbox.max_open_files",
            raw.max_open_files,
            defaults.max_open_files,
            1 << 20,
        )?,
        max_disk: size(
            "runner.sandbox.max_disk",
            raw.max_disk.as_deref(),
            defaults.max_disk,
        )?,
    })
}

/// The certificates of the PEM file at `path`: at least one, all of them
/// readable.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{} is not PEM certificates: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no certificate", path.display()));
    }
    Ok(certs)
}

/// The model API a command reaches: the `ANTHROPIC_BASE_URL` it is passed
/// (`names`, from `env`), if it is.
pub(super) fn model_url<'e>(
    names: &[String],
    env: &'e std::collections::BTreeMap<String, String>,
) -> Option<&'e str> {
    names
        .iter()
        .any(|name| name == "ANTHROPIC_BASE_URL")
        .then(|| env.get("ANTHROPIC_BASE_URL").map(String::as_str))
        .flatten()
}

/// An allow list as given at `key`, else the default for a command of
/// `kind` whose model API is at `model_url`.
pub(super) fn allow_hosts(
    key: &str,
    list: Option<Vec<String>>,
    kind: Option<WorkerKind>,
    model_url: Option<&str>,
    origins: &Origins<'_>,
) -> Result<Vec<HostPattern>, ProfileError> {
    match list {
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, text)| {
                HostPattern::parse(text).map_err(|why| origins.error(key, Some(i), why))
            })
            .collect(),
        None => Ok(default_hosts(kind, model_url)),
    }
}

fn default_hosts(kind: Option<WorkerKind>, model_url: Option<&str>) -> Vec<HostPattern> {
    if kind != Some(WorkerKind::Claude) {
        return Vec::new();
    }
    let from_env = model_url.and_then(|url| {
        let url = reqwest::Url::parse(url).ok()?;
        Some(HostPattern::new(
            url.host_str()?
                .trim_matches(['[', ']'])
                .to_ascii_lowercase(),
            url.port_or_known_default(),
        ))
    });
    vec![from_env.unwrap_or(HostPattern::new(CLAUDE_API_HOST, Some(443)))]
}

/// `1048576`, `"512KiB"`, `"100M"`, `"2GiB"` (binary units either way).
pub(super) fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(format!(
                "{text:?} is not a size like \"512MiB\" or \"2GiB\""
            ));
        }
    };
    number
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| format!("{text:?} is not a size above zero like \"512MiB\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> HostPattern {
        HostPattern::parse(text).unwrap()
    }

    #[test]
    fn host_patterns_match_names_ports_and_subdomains() {
        assert!(pattern("api.anthropic.com").matches("API.anthropic.com", 443));
        assert!(pattern("api.anthropic.com").matches("api.anthropic.com.", 8443));
        assert!(!pattern("api.anthropic.com").matches("evil-api.anthropic.com", 443));
        assert!(pattern("api.anthropic.com:443").matches("api.anthropic.com", 443));
        assert!(!pattern("api.anthropic.com:443").matches("api.anthropic.com", 80));
        assert!(pattern("*.pypi.org").matches("files.pypi.org", 443));
        assert!(!pattern("*.pypi.org").matches("pypi.org", 443));
        assert!(!pattern("*.pypi.org").matches("evilpypi.org", 443));
        assert!(pattern("127.0.0.1:8080").matches("127.0.0.1", 8080));
        assert!(!pattern("127.0.0.1:8080").matches("127.0.0.1", 8081));
        assert!(pattern("[::1]:9000").matches("[::1]", 9000));
        assert!(pattern("[::1]:9000").matches("::1", 9000));
        assert_eq!(pattern("[::1]:9000").to_string(), "[::1]:9000");
        assert_eq!(pattern("Example.COM").to_string(), "example.com");
    }

    #[test]
    fn bad_host_patterns_say_what_is_wrong() {
        for (text, says) in [
            ("", "not a host name"),
            ("exa mple.com", "\"mple.com\" is not an HTTP method"),
            ("example.com:0", "not a port"),
            ("example.com:http", "not a port"),
            ("[::1", "closing ']'"),
            ("[nope]:1", "not an IPv6 address"),
            ("*.10.0.0.1:1", "not a host name"),
            ("-bad.example", "not a host name"),
        ] {
            let why = HostPattern::parse(text).unwrap_err();
            assert!(why.contains(says), "{text:?}: {why}");
        }
    }

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("512KiB").unwrap(), 512 << 10);
        assert_eq!(parse_size("2 GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("100M").unwrap(), 100 << 20);
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn claude_may_reach_its_model_api_by_default() {
        assert_eq!(
            default_hosts(Some(WorkerKind::Claude), None),
            vec![pattern("api.anthropic.com:443")]
        );
        let fake = Some("http://127.0.0.1:4010/v1");
        assert_eq!(
            default_hosts(Some(WorkerKind::Claude), fake),
            vec![pattern("127.0.0.1:4010")]
        );
        assert!(default_hosts(Some(WorkerKind::Generic), fake).is_empty());
        assert!(default_hosts(None, fake).is_empty());
    }
}
