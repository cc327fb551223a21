//! Where profiles are looked for, and the profiles built into the binary.
//!
//! The profiles directory is the first of: `--profiles-dir`, then
//! `EAGLE_PROFILES_DIR` (either must exist), then `./profiles` if it is a
//! directory, then `$XDG_CONFIG_HOME/eagle/profiles` (by default
//! `~/.config/eagle/profiles`, which need not exist). A profile is the file
//! `<dir>/<name>.toml`; with no such file, `eagle` and `executor` are built
//! in (the documented `profiles/*.toml` of this repository, embedded), their
//! relative paths resolved against that directory as if the file were
//! there, so an installed `eagle shell` works from any directory.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::{Profile, ProfileError};

/// A profile compiled into the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltIn {
    /// Its name (its file stem).
    pub name: &'static str,
    /// The profile file's text.
    pub toml: &'static str,
    /// Its persona file's name and text.
    pub soul: (&'static str, &'static str),
}

/// The built-in profiles: the two documented files and their personas.
pub const BUILT_IN: &[BuiltIn] = &[
    BuiltIn {
        name: "eagle",
        toml: include_str!("../../../profiles/eagle.toml"),
        soul: (
            "eagle.soul.md",
            include_str!("../../../profiles/eagle.soul.md"),
        ),
    },
    BuiltIn {
        name: "executor",
        toml: include_str!("../../../profiles/executor.toml"),
        soul: (
            "executor.soul.md",
            include_str!("../../../profiles/executor.soul.md"),
        ),
    },
];

/// The built-in profile of this name, if there is one.
pub fn built_in(name: &str) -> Option<&'static BuiltIn> {
    BUILT_IN.iter().find(|b| b.name == name)
}

/// Why the profiles directory was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChosenBy {
    /// `--profiles-dir`.
    Flag,
    /// `EAGLE_PROFILES_DIR`.
    Env,
    /// `./profiles` exists.
    WorkingDir,
    /// The user's configuration directory (XDG).
    Config,
}

impl fmt::Display for ChosenBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChosenBy::Flag => "--profiles-dir",
            ChosenBy::Env => super::PROFILES_DIR_ENV,
            ChosenBy::WorkingDir => "./profiles",
            ChosenBy::Config => "the user's configuration directory",
        })
    }
}

/// The profiles directory in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfilesDir {
    pub path: PathBuf,
    pub chosen_by: ChosenBy,
}

/// `$XDG_CONFIG_HOME/eagle/profiles`, else `~/.config/eagle/profiles`
/// (`None` with neither set). From the environment map `main` read: the
/// `etcetera` crate (no longer a dependency) reads the process environment itself.
pub fn config_profiles_dir(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let base = match env
        .get("XDG_CONFIG_HOME")
        .filter(|v| Path::new(v).is_absolute())
    {
        Some(xdg) => PathBuf::from(xdg),
        None => Path::new(env.get("HOME").filter(|v| !v.is_empty())?).join(".config"),
    };
    Some(base.join("eagle").join("profiles"))
}

impl ProfilesDir {
    /// Chooses the profiles directory (see the module's comment). `flag` is
    /// `--profiles-dir`; `working_dir` is where `./profiles` is looked for.
    pub fn find(
        flag: Option<&Path>,
        env: &BTreeMap<String, String>,
        working_dir: &Path,
    ) -> Result<ProfilesDir, String> {
        let explicit = match flag {
            Some(dir) => Some((dir.to_path_buf(), ChosenBy::Flag)),
            None => env
                .get(super::PROFILES_DIR_ENV)
                .filter(|v| !v.is_empty())
                .map(|dir| (PathBuf::from(dir), ChosenBy::Env)),
        };
        if let Some((path, chosen_by)) = explicit {
            if !path.is_dir() {
                return Err(format!("{chosen_by} {}: no such directory", path.display()));
            }
            return Ok(ProfilesDir { path, chosen_by });
        }
        let local = working_dir.join("profiles");
        if local.is_dir() {
            return Ok(ProfilesDir {
                // Named as the operator would: `profiles/eagle.toml`.
                path: if working_dir == Path::new(".") {
                    PathBuf::from("profiles")
                } else {
                    local
                },
                chosen_by: ChosenBy::WorkingDir,
            });
        }
        match config_profiles_dir(env) {
            Some(path) => Ok(ProfilesDir {
                path,
                chosen_by: ChosenBy::Config,
            }),
            None => Err(format!(
                "no profiles directory: no ./profiles, and neither XDG_CONFIG_HOME nor HOME is set \
                 (use --profiles-dir or {})",
                super::PROFILES_DIR_ENV
            )),
        }
    }

    /// The file of profile `name` here.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(format!("{name}.toml"))
    }

    /// Whether profile `name` has a file here.
    pub fn has_file(&self, name: &str) -> bool {
        self.file(name).is_file()
    }

    /// Loads profile `name`: its file here, else the built-in one of that
    /// name, else the error naming the file that is missing.
    pub fn load(
        &self,
        name: &str,
        env: &BTreeMap<String, String>,
    ) -> Result<Profile, ProfileError> {
        super::validate_name(name).map_err(|why| ProfileError::new(name, None, why))?;
        match built_in(name) {
            Some(builtin) if !self.has_file(name) => Profile::built_in(&self.path, builtin, env),
            _ => Profile::load(&self.path, name, env),
        }
    }

    /// The profiles with a file here, sorted (none if the directory does
    /// not exist yet).
    pub fn files(&self) -> std::io::Result<Vec<String>> {
        match super::list(&self.path) {
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && self.chosen_by == ChosenBy::Config =>
            {
                Ok(Vec::new())
            }
            other => other,
        }
    }
}

/// Writes the built-in profiles and their personas into `dir` (created if
/// missing); refuses to overwrite any file unless `force`. Returns what it
/// wrote.
pub fn init(dir: &Path, force: bool) -> Result<Vec<PathBuf>, String> {
    let files: Vec<(PathBuf, &str)> = BUILT_IN
        .iter()
        .flat_map(|b| {
            [
                (dir.join(format!("{}.toml", b.name)), b.toml),
                (dir.join(b.soul.0), b.soul.1),
            ]
        })
        .collect();
    if !force {
        let there: Vec<String> = files
            .iter()
            .filter(|(path, _)| path.exists())
            .map(|(path, _)| path.display().to_string())
            .collect();
        if !there.is_empty() {
            return Err(format!(
                "{} exist(s) already; --force overwrites",
                there.join(", ")
            ));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (path, text) in &files {
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(files.into_iter().map(|(path, _)| path).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_first_of_flag_env_working_dir_config_wins() {
        let root = tempfile::tempdir().unwrap();
        let (flag, from_env, cwd) = (
            root.path().join("flag"),
            root.path().join("env"),
            root.path().join("cwd"),
        );
        for dir in [&flag, &from_env, &cwd.join("profiles")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let home = root.path().join("home");
        let all = env(&[
            ("EAGLE_PROFILES_DIR", from_env.to_str().unwrap()),
            ("HOME", home.to_str().unwrap()),
        ]);
        let found = |flag: Option<&Path>, env: &BTreeMap<String, String>, cwd: &Path| {
            ProfilesDir::find(flag, env, cwd).unwrap()
        };
        assert_eq!(
            found(Some(&flag), &all, &cwd),
            ProfilesDir {
                path: flag.clone(),
                chosen_by: ChosenBy::Flag
            }
        );
        assert_eq!(found(None, &all, &cwd).chosen_by, ChosenBy::Env);
        let no_env = env(&[("HOME", home.to_str().unwrap())]);
        assert_eq!(
            found(None, &no_env, &cwd),
            ProfilesDir {
                path: cwd.join("profiles"),
                chosen_by: ChosenBy::WorkingDir
            }
        );
        assert_eq!(
            found(None, &no_env, root.path()),
            ProfilesDir {
                path: home.join(".config/eagle/profiles"),
                chosen_by: ChosenBy::Config
            }
        );
        let xdg = env(&[
            ("HOME", home.to_str().unwrap()),
            ("XDG_CONFIG_HOME", "/etc/xdg-here"),
        ]);
        assert_eq!(
            found(None, &xdg, root.path()).path,
            Path::new("/etc/xdg-here/eagle/profiles")
        );
        // A relative XDG_CONFIG_HOME is ignored, as the specification says.
        let relative = env(&[
            ("HOME", home.to_str().unwrap()),
            ("XDG_CONFIG_HOME", "conf"),
        ]);
        assert_eq!(
            found(None, &relative, root.path()).path,
            home.join(".config/eagle/profiles")
        );
    }

    #[test]
    fn an_explicit_directory_must_exist() {
        let root = tempfile::tempdir().unwrap();
        let missing = root.path().join("nope");
        let error = ProfilesDir::find(Some(&missing), &env(&[]), root.path()).unwrap_err();
        assert_eq!(
            error,
            format!("--profiles-dir {}: no such directory", missing.display())
        );
        let error = ProfilesDir::find(
            None,
            &env(&[("EAGLE_PROFILES_DIR", missing.to_str().unwrap())]),
            root.path(),
        )
        .unwrap_err();
        assert!(error.starts_with("EAGLE_PROFILES_DIR "), "{error}");
        let error = ProfilesDir::find(None, &env(&[]), root.path()).unwrap_err();
        assert!(
            error.contains("neither XDG_CONFIG_HOME nor HOME"),
            "{error}"
        );
    }

    #[test]
    fn built_in_profiles_serve_where_no_file_is() {
        let root = tempfile::tempdir().unwrap();
        let dir = ProfilesDir {
            path: root.path().join("none-yet"),
            chosen_by: ChosenBy::Config,
        };
        let env = env(&[("HOME", root.path().to_str().unwrap())]);
        assert!(dir.files().unwrap().is_empty());
        let eagle = dir.load("eagle", &env).unwrap();
        assert_eq!(eagle.origin, super::super::Origin::BuiltIn);
        assert_eq!(eagle.role, super::super::Role::Orchestrator);
        assert_eq!(eagle.zuliprc, dir.path.join("eagle.zuliprc"));
        assert!(eagle.persona.is_some());
        let executor = dir.load("executor", &env).unwrap();
        assert_eq!(executor.role, super::super::Role::Executor);
        let error = dir.load("nobody", &env).unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with("nobody.toml: no such profile file")
        );
        // Written out, the files serve instead, and are refused a second time.
        let written = init(&dir.path, false).unwrap();
        assert_eq!(written.len(), 4);
        assert_eq!(dir.files().unwrap(), ["eagle", "executor"]);
        let eagle = dir.load("eagle", &env).unwrap();
        assert_eq!(eagle.origin, super::super::Origin::File);
        assert!(init(&dir.path, false).unwrap_err().contains("--force"));
        assert_eq!(init(&dir.path, true).unwrap().len(), 4);
    }
}
