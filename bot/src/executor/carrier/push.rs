//! `push_branch`: Eagle pushes the exact commit a request names to the
//! run's own branch of the run's remote, from a repository of its own.
//!
//! **Why this is safe.** Eagle never runs git in the worker's checkout, so
//! nothing the worker controls runs or is read as configuration: not its
//! hooks, not its `.git/config` (`insteadOf`, `pushurl`, credential helpers,
//! `core.*` programs), not its `info/attributes`. Eagle keeps a bare
//! repository per run under its own data directory (`pushes/run-<id>.git`,
//! made with `--template=`: no hooks, Eagle's config only) whose
//! `objects/info/alternates` names the checkout's `.git/objects`: git then
//! *reads objects* from there, as data, and nothing else. Objects are
//! content-addressed and the receiving side (`index-pack` of the remote)
//! hashes every object it gets, so a tampered object file cannot put other
//! content under the approved commit id. The checkout's own
//! `objects/info/alternates` (which would make git read objects from
//! anywhere Eagle can read) is refused, as are a `.git` or `objects` that is
//! a symlink or a `gitdir:` file. Then Eagle checks the commit exists and
//! what the branch holds now, and pushes `<sha>:refs/heads/<branch>` from its
//! repository with its own environment, always with `--force-with-lease` on
//! the tip it looked at: a fast-forward, or (only when the tip is a commit
//! Eagle itself pushed for this run) a rewrite of Eagle's own push; never
//! another ref, never a delete, never a force over commits someone else
//! pushed.

use std::path::{Path, PathBuf};

use crate::executor::repos::git::{self, GitAuth};

/// What to push where.
#[derive(Debug)]
pub struct PushPlan<'a> {
    /// The run's repository, as git is given it (a URL without credential, or a path).
    pub remote: &'a str,
    /// Eagle's credential for it.
    pub auth: &'a GitAuth,
    /// Eagle's cache of the repository, whose objects the checkout borrows
    /// (the one `objects/info/alternates` a checkout may have).
    pub cache: Option<&'a Path>,
    /// The worker's checkout (its `.git/objects` is read as data).
    pub checkout: &'a Path,
    /// Eagle's own repository for this run.
    pub mirror: &'a Path,
    /// The run's branch (without `refs/heads/`).
    pub branch: &'a str,
    /// The approved commit.
    pub sha: &'a str,
    /// Commits Eagle pushed to this branch before (newest first): a tip
    /// among them may be rewritten.
    pub pushed_before: &'a [String],
    /// A dry run: the commit is checked and described, nothing is pushed
    /// (the remote is not even asked).
    pub dry_run: bool,
}

/// How a push went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// The branch is at the commit now (`forced`: over Eagle's own earlier push).
    Pushed { forced: bool },
    /// The branch was at the commit already.
    Already,
    /// A dry run: nothing was pushed; the commit's subject and diff stat.
    DryRun(String),
}

/// Where Eagle keeps its repository for run `run` under `data_dir`.
pub fn mirror_path(data_dir: &Path, run: i64) -> PathBuf {
    data_dir.join("pushes").join(format!("run-{run}.git"))
}

/// Pushes as the module documentation says; `Err` says why nothing was pushed.
pub async fn push(plan: &PushPlan<'_>) -> Result<Pushed, String> {
    crate::policy::effect::full_sha(plan.sha)?;
    if !valid_branch(plan.branch) {
        return Err(format!("{:?} is not a branch Eagle pushes to", plan.branch));
    }
    let borrowed = plan.cache.map(|c| c.join("objects"));
    let objects = worker_objects(plan.checkout, borrowed.as_deref())?;
    prepare_mirror(plan.mirror, &objects, borrowed.as_deref()).await?;
    let kind = git::run(
        plan.mirror,
        &["cat-file", "-t", plan.sha],
        &GitAuth::default(),
    )
    .await;
    if kind.as_deref().map(str::trim) != Ok("commit") {
        return Err(format!(
            "commit {} is not in the run's checkout: commit first, then push",
            short(plan.sha)
        ));
    }
    if plan.dry_run {
        let stat = git::run(
            plan.mirror,
            &["show", "--no-color", "--shortstat", "--format=%s", plan.sha],
            &GitAuth::default(),
        )
        .await
        .unwrap_or_default();
        let stat = stat
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        return Ok(Pushed::DryRun(crate::ground::text::one_line(&stat, 300)));
    }
    let remote = plan.remote.to_string();
    let auth = plan.auth;
    let target = format!("refs/heads/{}", plan.branch);
    let listed = git::run(plan.mirror, &["ls-remote", "--", &remote, &target], auth)
        .await
        .map_err(|e| format!("cannot read the run's remote: {e}"))?;
    let tip = listed
        .lines()
        .find_map(|l| l.split_once('\t').filter(|(_, r)| *r == target))
        .map(|(sha, _)| sha.to_string());
    let forced = match &tip {
        Some(tip) if tip == plan.sha => return Ok(Pushed::Already),
        None => false,
        Some(tip) => {
            // Bring the tip's history into Eagle's repository to compare.
            git::run(
                plan.mirror,
                &["fetch", "--quiet", "--no-tags", "--", &remote, &target],
                auth,
            )
            .await
            .map_err(|e| format!("cannot read the run's branch: {e}"))?;
            let descends = git::ok(
                plan.mirror,
                &["merge-base", "--is-ancestor", tip, plan.sha],
                auth,
            )
            .await;
            if descends {
                false
            } else if plan.pushed_before.iter().any(|p| p == tip) {
                true
            } else {
                return Err(format!(
                    "{} holds commits Eagle did not push (its tip {} is not part of {}): \
                     nothing was pushed; build on the branch (git pull --rebase), or ask the owner",
                    plan.branch,
                    short(tip),
                    short(plan.sha)
                ));
            }
        }
    };
    let lease = format!(
        "--force-with-lease={target}:{}",
        tip.as_deref().unwrap_or("")
    );
    let refspec = format!("{}:{target}", plan.sha);
    // Eagle runs with a private umask: a repository on this host that
    // others read (the next run's clone, as the worker's user) would get
    // object directories only Eagle can open. The receiving side keeps
    // what the repository's own objects allow.
    let receive_pack = shared_repository(Path::new(plan.remote))
        .map(|mode| format!("--receive-pack=git -c core.sharedRepository={mode} receive-pack"));
    let mut args = vec!["push", "--quiet", "--no-verify", &lease];
    if let Some(receive_pack) = &receive_pack {
        args.push(receive_pack);
    }
    args.extend(["--", &remote, &refspec]);
    git::run(plan.mirror, &args, auth)
        .await
        .map_err(|e| format!("the push was refused: {e}"))?;
    Ok(Pushed::Pushed { forced })
}

/// How a repository on this host shares its objects, from its object
/// directory's mode, when it shares them with anyone: `0644` (everyone
/// reads), `0640` (its group reads), `0664`/`0660` (and its group writes). `None` for a
/// private repository (kept private) or one git itself keeps shared
/// (`core.sharedRepository` set in it).
fn shared_repository(remote: &Path) -> Option<&'static str> {
    use std::os::unix::fs::PermissionsExt as _;
    let objects = [remote.join("objects"), remote.join(".git").join("objects")]
        .into_iter()
        .find(|o| o.is_dir())?;
    let git_dir = objects.parent()?;
    let config = std::fs::read_to_string(git_dir.join("config")).unwrap_or_default();
    if config.lines().any(|l| {
        l.trim()
            .to_ascii_lowercase()
            .starts_with("sharedrepository")
    }) {
        return None;
    }
    let mode = std::fs::metadata(&objects).ok()?.permissions().mode();
    let group_writes = mode & 0o020 != 0;
    if mode & 0o005 == 0o005 {
        Some(if group_writes { "0664" } else { "0644" })
    } else if mode & 0o050 == 0o050 {
        Some(if group_writes { "0660" } else { "0640" })
    } else {
        None
    }
}

/// A branch name Eagle pushes to: what `git check-ref-format --branch`
/// would accept, kept simple (letters, digits, `/-._`, no `..`, no leading
/// `-` or `/`, no `.lock`).
fn valid_branch(branch: &str) -> bool {
    !branch.is_empty()
        && branch.len() <= 200
        && branch
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/-._".contains(c))
        && !branch.starts_with(['-', '/', '.'])
        && !branch.ends_with(['/', '.'])
        && !branch.contains("..")
        && !branch.contains("//")
        && !branch.ends_with(".lock")
}

/// The checkout's object directory, refused when it could make git read
/// anything but the checkout's own objects.
fn worker_objects(checkout: &Path, borrowed: Option<&Path>) -> Result<PathBuf, String> {
    let dot_git = checkout.join(".git");
    let plain_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_dir());
    if !plain_dir(&dot_git) {
        return Err("the run's checkout has no .git directory of its own: nothing to push".into());
    }
    let objects = dot_git.join("objects");
    if !plain_dir(&objects) {
        return Err("the checkout's .git/objects is not a directory: refusing to read it".into());
    }
    let alternates = objects.join("info").join("alternates");
    // The checkout borrows the cache's objects: that one line is expected,
    // and Eagle names the cache itself; anything else is refused.
    let only_the_cache = || {
        let Some(borrowed) = borrowed else {
            return false;
        };
        let plain_file =
            std::fs::symlink_metadata(&alternates).is_ok_and(|m| m.file_type().is_file());
        let text = std::fs::read_to_string(&alternates).unwrap_or_default();
        plain_file
            && text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .all(|l| Path::new(l.trim()) == borrowed)
    };
    if std::fs::symlink_metadata(&alternates).is_ok() && !only_the_cache() {
        return Err(
            "the checkout's .git/objects/info/alternates would make Eagle read objects from \
             elsewhere: remove it, then push again"
                .into(),
        );
    }
    Ok(objects)
}

/// Creates Eagle's repository (bare, no template: no hooks) if needed and
/// points its alternates at the checkout's objects.
async fn prepare_mirror(
    mirror: &Path,
    objects: &Path,
    borrowed: Option<&Path>,
) -> Result<(), String> {
    let none = GitAuth::default();
    if !mirror.join("objects").is_dir() {
        if let Some(parent) = mirror.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            let _ = crate::ground::host::chmod(parent, 0o700);
        }
        let path = mirror.to_string_lossy().into_owned();
        let parent = mirror.parent().unwrap_or(Path::new("/"));
        git::run(
            parent,
            &["init", "--quiet", "--bare", "--template=", "--", &path],
            &none,
        )
        .await
        .map_err(|e| format!("cannot create Eagle's repository for the push: {e}"))?;
    }
    let info = mirror.join("objects").join("info");
    std::fs::create_dir_all(&info).map_err(|e| format!("cannot write {}: {e}", info.display()))?;
    let mut lines = format!("{}\n", objects.display());
    if let Some(borrowed) = borrowed {
        lines.push_str(&format!("{}\n", borrowed.display()));
    }
    std::fs::write(info.join("alternates"), lines)
        .map_err(|e| format!("cannot write Eagle's alternates: {e}"))
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn repo_with(mode: u32, config: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        std::fs::create_dir(&objects).unwrap();
        std::fs::set_permissions(&objects, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::write(dir.path().join("config"), config).unwrap();
        dir
    }

    #[test]
    fn a_push_keeps_what_the_repositorys_objects_share() {
        let plain = "[core]\n\tbare = true\n";
        for (mode, config, want) in [
            (0o755, plain, Some("0644")),
            (0o775, plain, Some("0664")),
            (0o750, plain, Some("0640")),
            (0o770, plain, Some("0660")),
            (0o700, plain, None),
            (0o755, "[core]\n\tsharedRepository = group\n", None),
        ] {
            let repo = repo_with(mode, config);
            assert_eq!(shared_repository(repo.path()), want, "{mode:o} {config:?}");
        }
        assert_eq!(shared_repository(Path::new("/nonexistent/repo")), None);
    }
}
