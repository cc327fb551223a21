-- The analyzer, the GitHub PR loop and Asana intake. SQLite flavour; keep
-- ../postgres/0003_analyzer_pr_loop_intake.sql in step.

-- Why a task was skipped: 'filter' (a filter plugin) or 'analysis' (the
-- analysis command), with every filter's reason kept as JSON
-- ([{"plugin": "default-filter 0.1.0", "reason": "…"}]).
ALTER TABLE executor_queue ADD COLUMN skipped_by TEXT CHECK (skipped_by IN ('filter', 'analysis'));
ALTER TABLE executor_queue ADD COLUMN skip_reasons TEXT;
-- An analysis answer that could not be read, kept as it was.
ALTER TABLE executor_queue ADD COLUMN analysis_raw TEXT;
-- Put back by a re-analysis: its conclusion goes into one summary, not a
-- message of its own.
ALTER TABLE executor_queue ADD COLUMN quiet_analysis INTEGER NOT NULL DEFAULT 0;
-- The task in the system it came from (an Asana permalink) and when that
-- system last changed it.
ALTER TABLE executor_queue ADD COLUMN external_url TEXT;
ALTER TABLE executor_queue ADD COLUMN external_modified_at TEXT;
CREATE INDEX executor_queue_pending ON executor_queue (status, id);

-- The PR loop: the PR (repository, number, head), what a worker must do
-- about it next (nothing while CI runs: the run then holds no worker slot),
-- and why it waits, for !status.
ALTER TABLE executor_runs ADD COLUMN pr_repo TEXT;
ALTER TABLE executor_runs ADD COLUMN head_sha TEXT;
ALTER TABLE executor_runs ADD COLUMN pr_work TEXT CHECK (pr_work IN ('fix_ci', 'fix_comments', 'pr_review'));
ALTER TABLE executor_runs ADD COLUMN pr_status TEXT;
ALTER TABLE executor_runs ADD COLUMN pr_checked_at TEXT;
-- The head a pr-review worker found green.
ALTER TABLE executor_runs ADD COLUMN review_green_sha TEXT;
-- The newest PR comment already considered (a human comment after it on a
-- complete draft PR sends the run back to pr).
ALTER TABLE executor_runs ADD COLUMN pr_comments_seen_at TEXT;
-- The last poll's mark (JSON: what the REST view looked like, when review
-- threads were read), when the current head was first seen (CI gets a grace
-- before it counts as never ran), the head CI was re-triggered for, and when
-- the PR was merged or closed (nothing more to watch).
ALTER TABLE executor_runs ADD COLUMN pr_poll TEXT;
ALTER TABLE executor_runs ADD COLUMN head_seen_at TEXT;
ALTER TABLE executor_runs ADD COLUMN ci_triggered_sha TEXT;
ALTER TABLE executor_runs ADD COLUMN pr_closed_at TEXT;
-- The head the last fix-ci or fix-comments worker ended on, and when: the
-- same work is not asked again for that head before the CI grace is over
-- (its push may not have reached GitHub yet).
ALTER TABLE executor_runs ADD COLUMN pr_work_done_sha TEXT;
ALTER TABLE executor_runs ADD COLUMN pr_work_done_at TEXT;
-- PR workers asked for so far (every kind): past github.max_rounds the run
-- is held for its owner, so that a review that keeps asking for changes
-- nobody makes cannot go round for ever.
ALTER TABLE executor_runs ADD COLUMN pr_rounds INTEGER NOT NULL DEFAULT 0;
CREATE INDEX executor_runs_pr_work ON executor_runs (state, pr_work);

-- What Eagle carries out itself once a request is approved (a merge, an
-- Asana comment): the head a merge is bound to, and what happened.
ALTER TABLE worker_requests ADD COLUMN bound_sha TEXT;
ALTER TABLE worker_requests ADD COLUMN carried_out_at TEXT;
ALTER TABLE worker_requests ADD COLUMN carried_out TEXT;
-- Who is carrying it out now, until when: one Eagle instance at a time,
-- also when a lease changes hands in the middle of a merge.
ALTER TABLE worker_requests ADD COLUMN carrying_by TEXT;
ALTER TABLE worker_requests ADD COLUMN carrying_until TEXT;

-- Conditional requests: the last ETag and body per URL, so an unchanged
-- resource costs no quota, also after a restart.
CREATE TABLE http_cache (
    url                 TEXT PRIMARY KEY,
    etag                TEXT NOT NULL,
    body                TEXT NOT NULL,
    -- The answer's `rel="next"` page: a 304 carries no `link` header.
    next_page           TEXT,
    stored_at           TEXT NOT NULL
);

-- Work asked of the analyzer from chat (`!reanalyze`): it runs the filters
-- outside any chat transaction and answers in the asker's conversation.
-- `count` changes nothing; `reanalyze` puts the tasks back and, once they
-- are analysed again, posts one summary.
CREATE TABLE analyzer_jobs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                TEXT NOT NULL CHECK (kind IN ('count', 'reanalyze')),
    requested_by        TEXT NOT NULL,
    -- Where the answer goes: the identity that posts it and a channel topic
    -- or the direct-message recipients (JSON list of user ids).
    reply_identity      TEXT NOT NULL,
    reply_channel       TEXT,
    reply_topic         TEXT,
    reply_user_ids      TEXT,
    created_at          TEXT NOT NULL,
    -- The tasks put back, as JSON, while their re-analysis runs.
    reopened            TEXT,
    done_at             TEXT
);
CREATE INDEX analyzer_jobs_open ON analyzer_jobs (done_at, id);
