//! The runner's part in the effects Eagle carries out for a worker
//! ([`crate::policy::effect`]): it checks an effect's parameters before the
//! request is recorded (a push to another branch, or a merge at a head Eagle
//! has not seen, is refused and leaves nothing behind), carries out an
//! approved `push_branch` itself (the runner is on the host of the worker's
//! checkout: [`crate::executor::carrier::push`]), and for the others waits
//! until Eagle's carrier has done them, so that `eagle request` answers with
//! the outcome: the pushed sha, the PR's number and address, the comment's
//! address.

use crate::executor::repos::git::GitAuth;
use std::time::Duration;

use super::attempt::SocketCtx;
use crate::executor::carrier::push::{PushPlan, Pushed, mirror_path, push};
use crate::ground::wire::{Answer, Status};
use crate::policy::effect::{Carried, Effect};
use crate::store::{Request, RequestStatus, StoreError, short_sha};

/// The run's branch: the one its runner recorded, else `eagle/run-<id>`.
pub(super) async fn run_branch(ctx: &SocketCtx) -> Result<String, StoreError> {
    let run = {
        let mut tx = ctx.shared.store.begin_read().await?;
        tx.tasks().run(ctx.fence.run).await?
    };
    Ok(run
        .and_then(|r| r.branch_name)
        .unwrap_or_else(|| format!("eagle/run-{}", ctx.fence.run)))
}

/// Before a request is recorded: an answer when its parameters cannot be
/// carried out (nothing is recorded then).
pub(super) async fn precheck(
    ctx: &SocketCtx,
    action: &str,
    body: &str,
) -> Result<Option<Answer>, StoreError> {
    // Free text is the old form (the demo worker, a protocol line): an
    // approval as before, nothing carried out.
    if !body.trim_start().starts_with('{') {
        return Ok(None);
    }
    let effect = match Effect::parse(action, body) {
        Ok(Some(effect)) => effect,
        Ok(None) => return Ok(None),
        Err(why) => return Ok(Some(Answer::new(Status::Denied, why))),
    };
    if let Effect::MergePr { sha: asked } = &effect {
        return merge_refusal(ctx, asked.as_deref()).await;
    }
    if let Effect::PushBranch {
        branch: Some(asked),
        ..
    } = &effect
    {
        let branch = run_branch(ctx).await?;
        let asked = asked.strip_prefix("refs/heads/").unwrap_or(asked);
        if asked != branch {
            return Ok(Some(Answer::new(
                Status::Denied,
                format!(
                    "Eagle pushes only to this run's branch {branch}, not to {}: nothing was pushed \
                     (git push origin HEAD:{branch})",
                    crate::ground::text::one_line(asked, 100)
                ),
            )));
        }
    }
    Ok(None)
}

/// A merge is of the head Eagle's PR loop saw, which its approver is shown
/// (the request is bound to it): asked before Eagle saw one, or for
/// another commit, it is refused here and nothing is recorded.
async fn merge_refusal(ctx: &SocketCtx, asked: Option<&str>) -> Result<Option<Answer>, StoreError> {
    let head = {
        let mut tx = ctx.shared.store.begin_read().await?;
        tx.tasks()
            .run(ctx.fence.run)
            .await?
            .and_then(|r| r.head_sha)
    };
    let why = match (asked, head.as_deref()) {
        (_, None) => "Eagle has not seen the head of this run's PR yet (it looks at the PR once \
                      the run reports [DONE: pr_ready]), so a merge now would be of no commit an \
                      approver could check: nothing was asked"
            .to_string(),
        (Some(asked), Some(head)) if asked != head => format!(
            "the head of this run's PR that Eagle saw last is {}, not {}: Eagle merges only at \
             the head it saw, nothing was asked",
            short_sha(head),
            short_sha(asked)
        ),
        _ => return Ok(None),
    };
    Ok(Some(Answer::new(Status::Denied, why)))
}

/// After a request was approved: `None` when it is no effect Eagle carries
/// out (the answer is the approval); else the answer with the outcome, a
/// denial saying why Eagle did not do it, or a stop when it is not done
/// within the wait (the worker learns the outcome when resumed).
pub(super) async fn after_approval(
    ctx: &SocketCtx,
    request: &Request,
) -> Result<Option<Answer>, StoreError> {
    if request.status != RequestStatus::Approved {
        return Ok(None);
    }
    if !request.body.trim_start().starts_with('{') {
        return Ok(None);
    }
    let effect = match Effect::parse(&request.action, &request.body) {
        Ok(Some(effect)) => effect,
        Ok(None) => return Ok(None),
        Err(why) => {
            return Ok(Some(Answer {
                request: Some(request.id),
                ..Answer::new(Status::Denied, format!("Eagle cannot carry it out: {why}"))
            }));
        }
    };
    // A push is carried out here, for this request, even when it reused a
    // human's earlier approval (the worker that asked first had stopped);
    // the others by the carrier, as the request whose approval it reused.
    let id = match &effect {
        Effect::PushBranch { sha, .. } => {
            if request.carried_out_at.is_none() {
                carry_push(ctx, request, sha).await?;
            }
            request.id
        }
        _ => request.bound_to.unwrap_or(request.id),
    };
    let deadline = tokio::time::Instant::now() + ctx.shared.settings.request_wait;
    let mut changes = ctx.shared.store.changes();
    loop {
        changes.mark_seen();
        let carried = ctx
            .shared
            .store
            .requests()
            .request(id)
            .await?
            .filter(|r| r.carried_out_at.is_some());
        if let Some(carried) = carried {
            let text = carried.carried_out.clone().unwrap_or_default();
            let result = ctx.shared.store.carried().carried_result(id).await?;
            let mut tx = ctx.shared.store.begin_write().await?;
            tx.requests().mark_delivered(&[request.id]).await?;
            tx.commit().await?;
            let Some(result) = result else {
                return Ok(Some(Answer {
                    request: Some(request.id),
                    ..Answer::new(Status::Denied, text)
                }));
            };
            return Ok(Some(Answer {
                request: Some(request.id),
                note: request.note.clone(),
                outcome: serde_json::from_str(&result).ok(),
                ..Answer::new(Status::Approved, text)
            }));
        }
        if tokio::time::Instant::now() >= deadline || ctx.stop.borrow().is_some() {
            return Ok(Some(Answer {
                request: Some(request.id),
                ..Answer::new(
                    Status::Stop,
                    format!(
                        "{} (request {}) is approved and Eagle carries it out; it has not yet: \
                         stop now and end your turn; you will be resumed with the outcome",
                        request.action, request.id
                    ),
                )
            }));
        }
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

/// Pushes an approved commit and records how it went, with its post.
async fn carry_push(ctx: &SocketCtx, request: &Request, sha: &str) -> Result<(), StoreError> {
    let shared = &ctx.shared;
    let branch = run_branch(ctx).await?;
    let (task, dry_run) = {
        let mut tx = shared.store.begin_read().await?;
        match tx.tasks().run(ctx.fence.run).await? {
            Some(run) => (tx.tasks().task_by_gid(&run.task_gid).await?, run.dry_run),
            None => (None, false),
        }
    };
    let repo = crate::executor::repos::of_task(&shared.settings.repos, task.as_ref());
    let result = match repo {
        Err(why) => Err(why),
        Ok(None) => Err(
            "the executor has no repository (runner.repos): Eagle has no remote to push to"
                .to_string(),
        ),
        Ok(Some(repo)) => {
            let pushed_before: Vec<String> = shared
                .store
                .carried()
                .carried_results(ctx.fence.run, "push_branch")
                .await?
                .iter()
                .filter_map(|r| serde_json::from_str::<Carried>(r).ok()?.sha)
                .collect();
            let mirror = mirror_path(&shared.data_dir, ctx.fence.run);
            let cache = crate::executor::repos::cache_path(&shared.data_dir, &repo.name);
            match GitAuth::of(repo, shared.github_token.as_ref(), &shared.data_dir).await {
                Err(why) => Err(why),
                Ok(auth) => {
                    push(&PushPlan {
                        remote: &repo.url.as_git(),
                        auth: &auth,
                        cache: Some(&cache),
                        checkout: &ctx.workdir,
                        mirror: &mirror,
                        branch: &branch,
                        sha,
                        pushed_before: &pushed_before,
                        dry_run,
                    })
                    .await
                }
            }
        }
    };
    let short = sha.get(..12).unwrap_or(sha);
    let (text, carried) = match result {
        Ok(Pushed::Pushed { forced: false }) => (
            format!("Eagle pushed {short} to {branch}"),
            Some(Carried {
                sha: Some(sha.to_string()),
                branch: Some(branch.clone()),
                ..Carried::default()
            }),
        ),
        Ok(Pushed::Pushed { forced: true }) => (
            format!("Eagle pushed {short} to {branch}, over its own earlier push"),
            Some(Carried {
                sha: Some(sha.to_string()),
                branch: Some(branch.clone()),
                ..Carried::default()
            }),
        ),
        Ok(Pushed::Already) => (
            format!("{branch} is at {short} already"),
            Some(Carried {
                sha: Some(sha.to_string()),
                branch: Some(branch.clone()),
                ..Carried::default()
            }),
        ),
        Ok(Pushed::DryRun(stat)) => (
            format!(
                "Dry run: Eagle did not push {short} to {branch}; approved, it would have pushed \
                 that commit ({stat}) and nothing else"
            ),
            Some(Carried {
                sha: Some(sha.to_string()),
                branch: Some(branch.clone()),
                ..Carried::default()
            }),
        ),
        Err(why) => (format!("Eagle did not push {short}: {why}"), None),
    };
    let mut tx = shared.store.begin_write().await?;
    let run = tx.tasks().run(ctx.fence.run).await?;
    if tx
        .carried()
        .record_carried_out(request.id, &text, carried.is_some())
        .await?
    {
        if let Some(carried) = &carried {
            let json = serde_json::to_string(carried).unwrap_or_default();
            tx.carried()
                .record_carried_result(request.id, &json)
                .await?;
        }
        if let Some(run) = run {
            let line = format!(
                "{} (run:{} req:{})",
                crate::ground::text::neutralize_mentions(&crate::ground::text::one_line(
                    &text, 400
                )),
                run.id,
                request.id
            );
            shared.poster.post(&mut tx, &run.topic(), &line).await?;
        }
        tx.commit().await?;
    }
    Ok(())
}

/// Links `git-remote-eagle`, `gh` and `eagle` (for `eagle request`) to the binary in the run's
/// own `eagle/bin` (Eagle's directory: the worker cannot change them) and
/// puts that directory first on the worker's `PATH`.
pub(super) fn put_shims_first(
    env: &mut std::collections::BTreeMap<String, String>,
    eagle_dir: &std::path::Path,
    exe: &std::path::Path,
) -> std::io::Result<()> {
    use crate::ground::wire::{GH, REMOTE_HELPER};
    let bin = eagle_dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    crate::ground::host::chmod(&bin, 0o755)?;
    for name in [REMOTE_HELPER, GH, "eagle"] {
        let link = bin.join(name);
        if std::fs::read_link(&link).ok().as_deref() != Some(exe) {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(exe, &link)?;
        }
    }
    let path = env.get("PATH").cloned().unwrap_or_default();
    env.insert("PATH".into(), format!("{}:{path}", bin.display()));
    Ok(())
}
