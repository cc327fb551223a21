//! The runner's share of what lets a worker's egress proxy read its
//! requests: Eagle's certificate authority and the proxy's own TLS (made
//! once, when the runner starts), the model gate of its kind of worker
//! (the calls it needs, the key it is sent with), and the files and
//! variables by which a worker trusts the authority.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::confine::egress::authority::Authority;
use crate::confine::egress::model::{KeyHeader, ModelGate};
use crate::confine::egress::{Interception, upstream};
use crate::profile::{RunnerSettings, WorkerKind};

/// The calls of its model API that Claude Code needs: at start and in a
/// session the pinned release sends only `POST /v1/messages?beta=true`;
/// it counts tokens with `count_tokens` when it compacts a long one.
pub const CLAUDE_CALLS: &[(&str, &str)] = &[
    ("POST", "/v1/messages"),
    ("POST", "/v1/messages/count_tokens"),
];

/// The authority's certificate, in the run's files of Eagle (`NODE_EXTRA_CA_CERTS`).
const CA_FILE: &str = "egress-ca.pem";
/// The system's roots and the authority (`SSL_CERT_FILE` and its kin).
const BUNDLE_FILE: &str = "egress-ca-bundle.pem";

/// The variables naming the bundle, for the tools that read each.
const BUNDLE_VARS: &[&str] = &["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"];

/// What a confined runner's proxies read with: the authority kept in
/// `data_dir`, the proxy's TLS trusting the system's roots and
/// `model_ca_file`, and the model gate of a Claude Code worker whose key
/// Eagle holds.
pub(super) fn of(
    settings: &RunnerSettings,
    kind: WorkerKind,
    data_dir: &Path,
) -> anyhow::Result<(Arc<Interception>, Option<Arc<ModelGate>>)> {
    of_parts(settings, settings.model.as_ref(), kind, data_dir)
}

/// [`of`] for a command with its own model key (`model`): the analysis
/// command's, whose proxies read the same way a worker's do.
pub fn of_parts(
    settings: &RunnerSettings,
    model: Option<&crate::profile::ModelAccess>,
    kind: WorkerKind,
    data_dir: &Path,
) -> anyhow::Result<(Arc<Interception>, Option<Arc<ModelGate>>)> {
    let authority = Authority::load_or_create(data_dir).map_err(anyhow::Error::msg)?;
    let upstream = upstream::client_config(&settings.sandbox.model_ca)
        .map_err(|e| anyhow::anyhow!("runner.sandbox.model_ca_file: {e}"))?;
    let interception = Arc::new(Interception {
        authority: Arc::new(authority),
        upstream,
    });
    let gate = match (model, kind) {
        (Some(model), WorkerKind::Claude) => {
            let header = if model.bearer() {
                KeyHeader::Bearer
            } else {
                KeyHeader::ApiKey
            };
            let gate = ModelGate::new(&model.url, CLAUDE_CALLS, header, &model.key)
                .map_err(|e| anyhow::anyhow!("{}: {e}", model.name))?;
            Some(Arc::new(gate))
        }
        _ => None,
    };
    Ok((interception, gate))
}

/// Writes the authority's certificate and the bundle into the run's files
/// of Eagle (`eagle_dir`, which the worker reads), and returns the
/// variables that name them.
pub fn trust_files(
    interception: &Interception,
    eagle_dir: &Path,
) -> std::io::Result<BTreeMap<String, String>> {
    let ca = eagle_dir.join(CA_FILE);
    let bundle = eagle_dir.join(BUNDLE_FILE);
    std::fs::write(&ca, interception.authority.cert_pem())?;
    std::fs::write(&bundle, interception.authority.bundle_pem())?;
    for path in [&ca, &bundle] {
        crate::ground::host::chmod(path, 0o644)?;
    }
    let mut vars = BTreeMap::new();
    vars.insert("NODE_EXTRA_CA_CERTS".to_string(), ca.display().to_string());
    for name in BUNDLE_VARS {
        vars.insert((*name).to_string(), bundle.display().to_string());
    }
    Ok(vars)
}
