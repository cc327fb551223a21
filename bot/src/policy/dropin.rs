//! Which plugin files a profile gets, and which of them are safe to load.
//!
//! The configured plugins come first, in profile order; then every other
//! `.wasm` in the plugin directory, in name order, with its defaults (empty
//! configuration, default limits): dropping a component in is enough,
//! unless `policy.load_all = false` or `policy.exclude` names it.
//!
//! A plugin decides what Eagle approves, so whoever can write its file, or
//! the directory it is in (and so replace the file), can decide. A file is
//! loaded only when it, its directory and the profile's plugin directory
//! belong to Eagle's user (or root) and nobody else may write them; anything
//! else is refused with the reason, and the plugin votes escalate.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::profile::{PluginLimits, PluginSource, PolicySettings};

/// Where a slot's plugin comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Origin {
    Builtin(String),
    File(PathBuf),
}

/// The slots the settings ask for, in order: the configured plugins, then
/// (unless `load_all` is off) every other `.wasm` in the directory that
/// `exclude` does not name, by name.
pub(super) fn wanted(settings: &PolicySettings) -> Vec<(Origin, PluginLimits, String)> {
    let dir = lexical(&settings.dir);
    let mut wanted: Vec<(Origin, PluginLimits, String)> = settings
        .plugins
        .iter()
        .map(|spec| {
            let origin = match &spec.source {
                PluginSource::Builtin(name) => Origin::Builtin(name.clone()),
                PluginSource::File(path) => Origin::File(lexical(&dir.join(path))),
            };
            (origin, spec.limits, spec.config_json.clone())
        })
        .collect();
    if settings.load_all
        && let Ok(entries) = std::fs::read_dir(&dir)
    {
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "wasm") && p.is_file())
            .filter(|p| !excluded(&settings.exclude, p))
            .collect();
        files.sort();
        for file in files {
            let listed = wanted.iter().any(|(origin, _, _)| match origin {
                Origin::File(path) => same_file(path, &file),
                Origin::Builtin(_) => false,
            });
            if !listed {
                wanted.push((Origin::File(file), PluginLimits::default(), "{}".into()));
            }
        }
    }
    wanted
}

/// `path` without `.` and `a/..` (as people read it; symlinks are
/// judged on the real path by [`unsafe_reason`]).
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Whether `exclude` names the file: by file name (`spin.wasm`) or stem (`spin`).
fn excluded(exclude: &[String], file: &Path) -> bool {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let stem = file.file_stem().and_then(|n| n.to_str()).unwrap_or("");
    exclude.iter().any(|e| e == name || e == stem)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Why a plugin file must not be loaded, if it must not: it, its directory
/// (after symlinks) or the plugin directory `dir` belongs to another user
/// than Eagle's (root excepted) or is writable by its group or by others.
/// A file that does not exist is not judged here (it is missing).
pub(super) fn unsafe_reason(dir: &Path, file: &Path) -> Option<String> {
    let real = file.canonicalize().ok()?;
    let mut places = vec![("the plugin file", real.clone())];
    if let Some(parent) = real.parent() {
        places.push(("its directory", parent.to_path_buf()));
    }
    if let Ok(dir) = dir.canonicalize()
        && !places.iter().any(|(_, p)| *p == dir)
    {
        places.push(("the plugin directory", dir));
    }
    let eagle = crate::ground::host::euid();
    for (what, path) in places {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if let Some(why) = judge(meta.uid(), meta.mode(), eagle) {
            return Some(format!(
                "{what} {} {why}: whoever can write there can decide what Eagle approves",
                path.display()
            ));
        }
    }
    None
}

/// Owner and mode of one place, judged for Eagle's user `eagle` (pure).
fn judge(uid: u32, mode: u32, eagle: u32) -> Option<String> {
    if uid != eagle && uid != 0 {
        return Some(format!(
            "belongs to uid {uid}, not to Eagle's user (uid {eagle})"
        ));
    }
    let writable = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (true, true) => "its group and everyone",
        (true, false) => "its group",
        (false, true) => "everyone",
        (false, false) => return None,
    };
    Some(format!(
        "is writable by {writable} (mode {:04o})",
        mode & 0o7777
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_eagle_or_root_may_own_and_write() {
        assert_eq!(judge(1000, 0o100644, 1000), None);
        assert_eq!(judge(0, 0o40755, 1000), None);
        assert!(judge(1001, 0o100644, 1000).unwrap().contains("uid 1001"));
        assert!(
            judge(1000, 0o40777, 1000)
                .unwrap()
                .contains("its group and everyone")
        );
        assert!(judge(1000, 0o41777, 1000).unwrap().contains("mode 1777"));
        assert!(judge(1000, 0o100664, 1000).unwrap().contains("its group"));
        assert!(judge(1000, 0o100646, 1000).unwrap().contains("everyone"));
    }

    #[test]
    fn paths_are_shown_without_dot_dot() {
        assert_eq!(
            lexical(Path::new("/h/profiles/../plugins/./p.wasm")),
            Path::new("/h/plugins/p.wasm")
        );
        assert_eq!(lexical(Path::new("../plugins")), Path::new("../plugins"));
    }

    #[test]
    fn exclude_names_files_or_stems() {
        let exclude = vec!["spin".to_string(), "bomb.wasm".to_string()];
        assert!(excluded(&exclude, Path::new("/p/spin.wasm")));
        assert!(excluded(&exclude, Path::new("/p/bomb.wasm")));
        assert!(!excluded(&exclude, Path::new("/p/spinner.wasm")));
    }

    #[test]
    fn a_writable_directory_refuses_its_files() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.wasm");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(unsafe_reason(dir.path(), &file), None);
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = unsafe_reason(dir.path(), &file).unwrap();
        assert!(why.starts_with("its directory"), "{why}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let why = unsafe_reason(dir.path(), &file).unwrap();
        assert!(why.starts_with("the plugin file"), "{why}");
        assert_eq!(
            unsafe_reason(dir.path(), &dir.path().join("gone.wasm")),
            None
        );
    }
}
