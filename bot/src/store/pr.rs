//! The PR loop's reads and writes: which runs it watches, what each poll
//! saw (the head, why the run waits, what a worker must do next), and the
//! merge requests a new head makes stale.
//!
//! The loop never writes over a worker: every write is conditional on the
//! run being in the state the loop read and on no runner holding it, so a
//! claim that wins the race simply makes the poll's write a no-op (the next
//! tick polls again).

use chrono::{DateTime, Utc};

use super::requests::Request;
use super::tasks::{PrWork, RUN_COLUMNS, RunState, sql};
use super::{NewAuditEntry, QueryContext, Result, Run, Tx, on_pool, on_tx};

super::store_handle!(
    /// The PR loop's reads and writes: the runs it watches and what each poll saw: `store.prs()`.
    PullRequests,
    prs
);

super::tx_handle!(
    /// The PR loop's reads and writes: the runs it watches and what each poll saw, in a transaction: `tx.prs()`.
    PullRequestsTx,
    prs
);

/// The PR a worker reported (`[DONE: pr_ready] PR #12` or its URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrLink {
    pub number: i64,
    /// `https://github.com/o/r/pull/12`, when the worker gave it.
    pub url: Option<String>,
    /// `owner/name`, when the URL names it.
    pub repo: Option<String>,
}

impl PrLink {
    /// Finds the PR in a worker's line: a `…/owner/name/pull/12` URL, else
    /// `#12` or `PR 12`. `None` if it names none.
    pub fn find(text: &str) -> Option<PrLink> {
        for word in text.split_whitespace() {
            let word =
                word.trim_matches(|c: char| matches!(c, '(' | ')' | '<' | '>' | ',' | '.' | ';'));
            if let Some(at) = word.find("/pull/") {
                let digits: String = word[at + 6..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                let Ok(number) = digits.parse::<i64>() else {
                    continue;
                };
                if number <= 0 {
                    continue;
                }
                let path: Vec<&str> = word[..at].rsplit('/').take(2).collect();
                let repo = match path.as_slice() {
                    [name, owner]
                        if !owner.is_empty() && !name.is_empty() && !owner.contains(':') =>
                    {
                        Some(format!("{owner}/{name}"))
                    }
                    _ => None,
                };
                let url = word
                    .starts_with("https://")
                    .then(|| format!("{}{digits}", &word[..at + 6]));
                return Some(PrLink { number, url, repo });
            }
        }
        let words: Vec<&str> = text.split_whitespace().collect();
        for (i, word) in words.iter().enumerate() {
            let number = match word.strip_prefix('#') {
                Some(rest) => rest,
                None if word.eq_ignore_ascii_case("pr") => match words.get(i + 1) {
                    Some(next) => next.trim_start_matches('#'),
                    None => continue,
                },
                None => continue,
            };
            let digits: String = number.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(number) = digits.parse::<i64>()
                && number > 0
            {
                return Some(PrLink {
                    number,
                    url: None,
                    repo: None,
                });
            }
        }
        None
    }
}

/// What one poll of a run's PR saw, to record.
#[derive(Debug, Clone)]
pub struct PrPoll<'a> {
    pub run: i64,
    /// The state the loop read: the write happens only if it still holds.
    pub state: RunState,
    pub head_sha: &'a str,
    pub pr_url: Option<&'a str>,
    /// Why the run waits, or what happens next, for `!status`.
    pub status: &'a str,
    /// The poll's mark (JSON), for the next poll.
    pub poll: Option<&'a str>,
    /// Work to ask of a worker, or none (CI running, waiting for a human).
    pub work: Option<PrWork>,
    /// A fix-ci worker is asked for (counts against `ci_attempts`).
    pub counts_ci_attempt: bool,
    /// A PR worker is asked for anew (counts against `max_rounds`).
    pub counts_round: bool,
    /// The run's `updated_at` as the loop read it: the poll is recorded
    /// only if nothing changed the run since (a worker's end, a human).
    pub read_at: DateTime<Utc>,
    /// CI was re-triggered for this head.
    pub ci_triggered_sha: Option<&'a str>,
    /// Comments up to here have been considered.
    pub comments_seen_at: Option<DateTime<Utc>>,
    /// What the poll saw of the PR, kept for what Eagle says about a merge.
    pub seen: Option<&'a PrSeen>,
}

/// What a poll saw of a PR, in Eagle's words: an escalation of a merge and
/// `!show` name these, never what the worker wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrSeen {
    pub title: String,
    pub head_ref: String,
    /// The repository the head branch is in (`owner/name`).
    pub head_repo: Option<String>,
    pub base_ref: String,
    /// CI on the head: `green`, `running`, `never ran`, `failed: a, b`.
    pub ci: String,
    /// Whether the PR is a draft.
    pub draft: bool,
}

/// What recording a poll did.
#[derive(Debug, Clone)]
pub struct PolledPr {
    pub run: Run,
    /// The head differs from the one recorded before.
    pub new_head: bool,
    /// Merge requests bound to an older head that this poll expired.
    pub expired: Vec<Request>,
}

impl PullRequests<'_> {
    /// The runs whose PR the loop watches, oldest first: in `pr` with no
    /// worker at them, and `complete` ones whose PR is still open (a human
    /// comment on a draft sends them back).
    pub async fn runs_to_watch(&self, limit: i64) -> Result<Vec<Run>> {
        let query = sql(&[
            "SELECT ",
            RUN_COLUMNS,
            " FROM executor_runs WHERE state IN ('pr', 'complete') AND pr_closed_at IS NULL \
             AND lease_owner IS NULL AND (state = 'pr' OR pr_number IS NOT NULL) \
             ORDER BY pr_checked_at NULLS FIRST, id LIMIT $1",
        ]);
        on_pool!(self, pool => sqlx::query_as(query).bind(limit).fetch_all(pool).await)
            .op("listing the runs whose PR is watched")
    }
}

/// A GET's last full answer, kept for conditional requests.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CachedAnswer {
    pub etag: String,
    pub body: String,
    pub next_page: Option<String>,
}

impl PullRequests<'_> {
    /// Says why a run waits in `pr` (no GitHub, no PR number, GitHub
    /// unreachable), as a poll that saw nothing; only where no worker holds
    /// the run.
    pub async fn set_pr_status(&self, run_id: i64, status: &str) -> Result<()> {
        let now = super::now();
        on_pool!(self, pool => {
            sqlx::query(
                "UPDATE executor_runs SET pr_status = $2, pr_checked_at = $3 \
                 WHERE id = $1 AND lease_owner IS NULL",
            )
            .bind(run_id)
            .bind(status)
            .bind(now)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording why a run waits")?;
        Ok(())
    }

    /// The last full answer to a GET of `url`, if kept.
    pub async fn cached_answer(&self, url: &str) -> Result<Option<CachedAnswer>> {
        on_pool!(self, pool => {
            sqlx::query_as("SELECT etag, body, next_page FROM http_cache WHERE url = $1")
                .bind(url)
                .fetch_optional(pool)
                .await
        })
        .op("reading a cached answer")
    }

    /// Keeps the answer to a GET of `url`, replacing an older one.
    pub async fn keep_answer(&self, url: &str, answer: &CachedAnswer) -> Result<()> {
        let now = super::now();
        on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO http_cache (url, etag, body, next_page, stored_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (url) DO UPDATE SET etag = excluded.etag, body = excluded.body, \
                 next_page = excluded.next_page, stored_at = excluded.stored_at",
            )
            .bind(url)
            .bind(&answer.etag)
            .bind(&answer.body)
            .bind(&answer.next_page)
            .bind(now)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })
        .op("keeping an answer")?;
        Ok(())
    }
}

impl PullRequests<'_> {
    /// How many runs in `pr` the PR loop has not looked at since they last
    /// changed (entered `pr`, a worker finished): `eagle shell` from a pipe
    /// is not idle before it has.
    pub async fn prs_to_look_at(&self) -> Result<i64> {
        on_pool!(self, pool => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM executor_runs WHERE state = 'pr' AND lease_owner IS NULL \
                 AND pr_closed_at IS NULL AND (pr_checked_at IS NULL OR updated_at > pr_checked_at)",
            )
            .fetch_one(pool)
            .await
        })
        .op("counting the PRs to look at")
    }
}

impl PullRequestsTx<'_> {
    /// Records a poll of a run's PR. A new head expires the open merge
    /// requests bound to another one, in this transaction. `None` if the run
    /// changed meanwhile (a runner claimed it, a human moved it).
    pub async fn record_pr_poll(&mut self, poll: &PrPoll<'_>) -> Result<Option<PolledPr>> {
        let Some(before) = self.run_for_update(poll.run).await? else {
            return Ok(None);
        };
        if before.state != poll.state
            || before.lease_owner.is_some()
            || before.updated_at != poll.read_at
        {
            return Ok(None);
        }
        let now = super::now();
        let new_head = before.head_sha.as_deref() != Some(poll.head_sha);
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET head_sha = $2, \
                 head_seen_at = CASE WHEN $3 THEN $4 ELSE head_seen_at END, \
                 pr_url = COALESCE($5, pr_url), pr_status = $6, pr_checked_at = $4, \
                 pr_poll = COALESCE($7, pr_poll), pr_work = $8, \
                 ci_attempts = ci_attempts + $9, pr_rounds = pr_rounds + $13, \
                 ci_triggered_sha = COALESCE($10, ci_triggered_sha), \
                 pr_comments_seen_at = COALESCE($11, pr_comments_seen_at), updated_at = $4, \
                 pr_title = COALESCE($14, pr_title), pr_head_ref = COALESCE($15, pr_head_ref), \
                 pr_base_ref = COALESCE($16, pr_base_ref), pr_ci = COALESCE($17, pr_ci), \
                 pr_draft = COALESCE($18, pr_draft), \
                 pr_head_repo = COALESCE($19, pr_head_repo) \
                 WHERE id = $1 AND state = $12 AND lease_owner IS NULL",
            )
            .bind(poll.run)
            .bind(poll.head_sha)
            .bind(new_head)
            .bind(now)
            .bind(poll.pr_url)
            .bind(poll.status)
            .bind(poll.poll)
            .bind(poll.work.map(PrWork::as_str))
            .bind(i64::from(poll.counts_ci_attempt))
            .bind(poll.ci_triggered_sha)
            .bind(poll.comments_seen_at)
            .bind(poll.state.as_str())
            .bind(i64::from(poll.counts_round))
            .bind(poll.seen.map(|p| p.title.as_str()))
            .bind(poll.seen.map(|p| p.head_ref.as_str()))
            .bind(poll.seen.map(|p| p.base_ref.as_str()))
            .bind(poll.seen.map(|p| p.ci.as_str()))
            .bind(poll.seen.map(|p| p.draft))
            .bind(poll.seen.and_then(|p| p.head_repo.as_deref()))
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a poll of a PR")?;
        if changed != 1 {
            return Ok(None);
        }
        let expired = if new_head {
            self.expire_stale_merges(poll.run, poll.head_sha).await?
        } else {
            Vec::new()
        };
        if poll.work.is_some() || !expired.is_empty() {
            self.notify().await?;
        }
        let run = self.tasks().run(poll.run).await?.unwrap_or(before);
        Ok(Some(PolledPr {
            run,
            new_head,
            expired,
        }))
    }

    /// Records the head of the run's PR that Eagle named to its owner when
    /// it offered the merge: what `!merge` merges.
    pub async fn record_merge_offer(&mut self, run_id: i64, sha: &str) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_runs SET merge_offered_sha = $2 WHERE id = $1")
                .bind(run_id)
                .bind(sha)
                .execute(conn)
                .await
                .map(|_| ())
        })
        .op("recording the head offered for a merge")
    }

    /// Records whether the run's PR is a draft (Eagle opened it; the PR
    /// loop's polls record it too).
    pub async fn set_pr_draft(&mut self, run_id: i64, draft: bool) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_runs SET pr_draft = $2 WHERE id = $1")
                .bind(run_id)
                .bind(draft)
                .execute(conn)
                .await
                .map(|_| ())
        })
        .op("recording whether a run's PR is a draft")
    }

    /// Records the PR a worker reported for its run. Another PR than the
    /// one known (a retried run opened a new one) starts its PR loop afresh.
    pub async fn record_pr_link(&mut self, run_id: i64, link: &PrLink) -> Result<()> {
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET \
                 ci_attempts = CASE WHEN pr_number IS DISTINCT FROM $2 THEN 0 ELSE ci_attempts END, \
                 pr_rounds = CASE WHEN pr_number IS DISTINCT FROM $2 THEN 0 ELSE pr_rounds END, \
                 pr_poll = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE pr_poll END, \
                 head_sha = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE head_sha END, \
                 ci_triggered_sha = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE ci_triggered_sha END, \
                 review_green_sha = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE review_green_sha END, \
                 pr_comments_seen_at = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE pr_comments_seen_at END, \
                 pr_work_done_sha = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE pr_work_done_sha END, \
                 pr_work = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE pr_work END, \
                 pr_draft = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE pr_draft END, \
                 pr_title = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE pr_title END, \
                 pr_head_ref = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE pr_head_ref END, \
                 pr_head_repo = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE pr_head_repo END, \
                 pr_base_ref = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE pr_base_ref END, \
                 pr_ci = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE pr_ci END, \
                 merge_offered_sha = CASE WHEN pr_number IS DISTINCT FROM $2 THEN NULL ELSE merge_offered_sha END, \
                 pr_url = CASE WHEN pr_number IS DISTINCT FROM $2 THEN $3 ELSE COALESCE($3, pr_url) END, \
                 pr_number = $2, \
                 pr_repo = $4, pr_closed_at = NULL, updated_at = $5 WHERE id = $1",
            )
            .bind(run_id)
            .bind(link.number)
            .bind(&link.url)
            .bind(&link.repo)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a run's PR")?;
        Ok(())
    }

    /// Comments up to `at` have been considered.
    pub async fn mark_comments_seen(&mut self, run_id: i64, at: DateTime<Utc>) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_runs SET pr_comments_seen_at = $2 WHERE id = $1")
                .bind(run_id)
                .bind(at)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        })
        .op("recording the comments seen")?;
        Ok(())
    }

    /// The PR was merged or closed: nothing more to watch.
    pub async fn close_pr(&mut self, run_id: i64, status: &str) -> Result<()> {
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET pr_closed_at = $2, pr_status = $3, pr_work = NULL, \
                 updated_at = $2 WHERE id = $1",
            )
            .bind(run_id)
            .bind(now)
            .bind(status)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a closed PR")?;
        Ok(())
    }

    /// A human comment on a complete draft PR: the run goes back to `pr`
    /// with a fix-comments worker to answer it, and its review must be
    /// green again.
    pub async fn reopen_pr(
        &mut self,
        run_id: i64,
        seen_at: DateTime<Utc>,
        reason: &str,
    ) -> Result<Run> {
        let run = self
            .transitions()
            .transition_run(&super::Transition {
                run: run_id,
                to: RunState::Pr,
                actor: "pr-loop",
                reason,
                fence: None,
            })
            .await?;
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET pr_work = 'fix_comments', review_green_sha = NULL, \
                 pr_comments_seen_at = $2, pr_status = $3, pr_work_done_sha = NULL WHERE id = $1",
            )
            .bind(run_id)
            .bind(seen_at)
            .bind(reason)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("sending a run back to pr")?;
        Ok(self.tasks().run(run_id).await?.unwrap_or(run))
    }
}

impl Tx {
    /// Expires the open `merge_pr` requests of a run that are bound to a
    /// head other than `head`: an approval is of the code it saw.
    async fn expire_stale_merges(&mut self, run_id: i64, head: &str) -> Result<Vec<Request>> {
        let now = super::now();
        let reason = format!("the PR's head moved to {}; ask again", short_sha(head));
        let ids: Vec<i64> = on_tx!(self, conn => {
            sqlx::query_scalar(
                "UPDATE worker_requests SET status = 'expired', decided_at = $3, \
                 decided_by = 'eagle', decision_reason = $4 \
                 WHERE run_id = $1 AND action = 'merge_pr' AND status IN ('pending', 'escalated') \
                 AND bound_sha IS NOT NULL AND bound_sha <> $2 RETURNING id",
            )
            .bind(run_id)
            .bind(head)
            .bind(now)
            .bind(&reason)
            .fetch_all(conn)
            .await
        })
        .op("expiring merge requests of an older head")?;
        let mut expired = Vec::with_capacity(ids.len());
        for id in ids {
            self.audit_log()
                .audit(&NewAuditEntry {
                    actor: "pr-loop".into(),
                    action: "request.expired".into(),
                    subject: format!("request:{id}"),
                    decision: Some("expire".into()),
                    reason: Some(reason.clone()),
                    ..NewAuditEntry::default()
                })
                .await?;
            self.step_aside(
                id,
                &format!(
                    "the PR's head moved to {}; a merge is offered at that head once it is ready",
                    short_sha(head)
                ),
            )
            .await?;
            if let Some(request) = self.requests().request(id).await? {
                expired.push(request);
            }
        }
        Ok(expired)
    }

    /// A worker on the PR finished its part. A review's verdict binds to
    /// the head it reviewed; other work remembers the head it ended on, so
    /// that the same work is not asked again before its push shows.
    pub(super) async fn pr_work_done(
        &mut self,
        run_id: i64,
        outcome: super::PrOutcome,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let (green, work) = match outcome {
            super::PrOutcome::Done => (false, None),
            super::PrOutcome::ReviewGreen => (true, None),
            super::PrOutcome::ChangesRequested => (false, Some(PrWork::FixComments)),
        };
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET pr_work = $2, \
                 review_green_sha = CASE WHEN $3 THEN head_sha ELSE NULL END, \
                 pr_work_done_sha = head_sha, pr_work_done_at = $4, pr_status = $5 WHERE id = $1",
            )
            .bind(run_id)
            .bind(work.map(PrWork::as_str))
            .bind(green)
            .bind(now)
            .bind(match outcome {
                super::PrOutcome::Done => "the worker finished; the PR is looked at again",
                super::PrOutcome::ReviewGreen => "the review is green; the PR is looked at again",
                super::PrOutcome::ChangesRequested => "the review asked for changes",
            })
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a PR worker's end")?;
        Ok(())
    }
}

/// The first 7 characters of a commit id, as GitHub shows them.
pub fn short_sha(sha: &str) -> &str {
    match sha.char_indices().nth(7) {
        Some((at, _)) => &sha[..at],
        None => sha,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pr_links_are_found_in_worker_lines() {
        let link = |n: i64, url: Option<&str>, repo: Option<&str>| {
            Some(PrLink {
                number: n,
                url: url.map(str::to_string),
                repo: repo.map(str::to_string),
            })
        };
        let cases = [
            ("PR #1234 opened, CI green", link(1234, None, None)),
            ("draft PR 12 ready", link(12, None, None)),
            ("pr #7", link(7, None, None)),
            (
                "opened https://github.com/acme/app/pull/42, CI green",
                link(
                    42,
                    Some("https://github.com/acme/app/pull/42"),
                    Some("acme/app"),
                ),
            ),
            (
                "(https://github.com/acme/app/pull/42#discussion)",
                link(
                    42,
                    Some("https://github.com/acme/app/pull/42"),
                    Some("acme/app"),
                ),
            ),
            ("see #0 and # and #x", None),
            ("nothing here", None),
            ("", None),
            ("PR", None),
            ("/pull/", None),
            ("#99999999999999999999999", None),
        ];
        for (text, want) in cases {
            assert_eq!(PrLink::find(text), want, "{text:?}");
        }
    }

    #[test]
    fn short_shas() {
        assert_eq!(short_sha("0123456789abcdef"), "0123456");
        assert_eq!(short_sha("abc"), "abc");
    }
}
