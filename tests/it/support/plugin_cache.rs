//! One compiled-plugin cache for every test home. The binary compiles the
//! built-in plugins once per test process, in a template home of its own,
//! and each new home gets a copy in its profile's data directory before the
//! binary first starts there, so that no test pays for compiling them (about
//! a second of a core each time) again.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::OnceLock;

use super::{Home, text};

/// The profiles whose runs load the policy plugins (the orchestrator's;
/// `eagle shell` runs as it too), each with a cache in its own data dir.
const PROFILES: &[&str] = &["eagle"];

/// One file of the cache (the key, an artefact or its keyed hash).
struct CachedFile {
    name: OsString,
    bytes: Vec<u8>,
    mode: u32,
}

/// The cache the binary made and then loaded, once per test process; a
/// failure to make it is reported by every test that needs it.
fn template() -> &'static [CachedFile] {
    static TEMPLATE: OnceLock<Result<Vec<CachedFile>, String>> = OnceLock::new();
    match TEMPLATE.get_or_init(make) {
        Ok(files) => files,
        Err(error) => panic!("the shared compiled-plugin cache: {error}"),
    }
}

/// Runs `eagle policy list` twice in a fresh home: the first compiles the
/// plugins into its cache (in a child process, as Eagle does), the second
/// must load every one of them from it, which is what makes the copy worth
/// handing out.
fn make() -> Result<Vec<CachedFile>, String> {
    let home = Home::without_compiled_plugins();
    let list = || home.run(&["policy", "list", "--profile", "eagle"], "");
    let compiled = list();
    if !compiled.status.success() {
        return Err(format!("eagle policy list failed: {:?}", text(&compiled)));
    }
    let loaded = list();
    let (stdout, stderr) = text(&loaded);
    let plugins = stdout.matches("state:").count();
    if !loaded.status.success()
        || plugins == 0
        || stdout.matches("ready (cached)").count() != plugins
    {
        return Err(format!(
            "the second eagle policy list did not load every plugin from the cache:\n{stdout}{stderr}"
        ));
    }
    let dir = home.dir.path().join("data/eagle/plugin-cache");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = entry.path();
        let meta =
            std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = entry.file_name();
        // Only the key and finished artefacts: a temporary file is nobody's.
        if !meta.is_file() || name.to_string_lossy().ends_with(".tmp") {
            continue;
        }
        files.push(CachedFile {
            bytes: std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?,
            // Private as Eagle keeps its files (`policy list` runs without
            // Eagle's umask, so its artefacts are readable by others).
            mode: meta.permissions().mode() & 0o700,
            name,
        });
    }
    Ok(files)
}

/// Copies the shared cache into `<data_dir>/<profile>/plugin-cache` of
/// every profile that loads plugins: directories 0700 and files private,
/// as Eagle (umask 077) makes them, so the cache passes its checks.
pub(super) fn seed(data_dir: &Path) {
    for profile in PROFILES {
        let dir = data_dir.join(profile).join("plugin-cache");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for file in template() {
            let path = dir.join(&file.name);
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(file.mode)
                .open(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.write_all(&file.bytes)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // The mode exactly, whatever the test process's umask.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}
