-- Eagle's schema, SQLite flavour. The PostgreSQL flavour in ../postgres has
-- the same tables, columns and meaning; keep them in step.
-- Timestamps are UTC, stored as text by sqlx; names compared without regard
-- to case are stored beside a key folded in Rust (Unicode rules), never NOCASE.

-- The inbox: every task Eagle knows of, from chat or another source.
CREATE TABLE executor_queue (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    -- Unique per task: 'zulip:<message id>', 'shell:<n>', or the source's id (an Asana gid).
    task_gid            TEXT NOT NULL UNIQUE,
    added_at            TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    -- chat, or the source the notes name: my_tasks_inbox, user_reports, user_feedback_raw, ...
    source              TEXT NOT NULL,
    title               TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    notes               TEXT NOT NULL DEFAULT '',
    links               TEXT NOT NULL DEFAULT '[]',   -- JSON array of URLs
    tags                TEXT NOT NULL DEFAULT '[]',   -- JSON array of strings
    platform            TEXT,
    assignee            TEXT,
    task_state          TEXT NOT NULL DEFAULT 'open' CHECK (task_state IN ('open', 'closed')),
    status              TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'for_review', 'awaiting_go', 'approved', 'skip', 'done', 'cancelled')),
    status_reason       TEXT,
    priority            INTEGER,
    complexity          TEXT,
    feasibility         TEXT,
    analysis_summary    TEXT,
    analysis_attempts   INTEGER NOT NULL DEFAULT 0,
    analyzed_at         TEXT,
    executor_run_id     INTEGER REFERENCES executor_runs (id),
    -- Who asked, and where: the reply and later notices go there.
    requested_by        TEXT,
    requested_by_id     INTEGER,
    origin_transport    TEXT,
    origin_channel      TEXT,
    origin_topic        TEXT,
    origin_message_id   INTEGER,
    -- The analyzer's claim on the task (fenced by attempt).
    lease_owner         TEXT,
    lease_expires_at    TEXT,
    attempt             INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX executor_queue_status ON executor_queue (status);

-- A concrete run of a task by a worker.
CREATE TABLE executor_runs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    task_gid            TEXT NOT NULL REFERENCES executor_queue (task_gid),
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    started_at          TEXT,
    completed_at        TEXT,
    state               TEXT NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'in_progress', 'pr', 'complete', 'abandoned', 'cancelled')),
    state_reason        TEXT,
    held                INTEGER NOT NULL DEFAULT 0,
    -- The human the run waits on, if any: no run is silently stuck.
    waiting_on          TEXT,
    worktree_path       TEXT,
    branch_name         TEXT,
    pr_url              TEXT,
    pr_number           INTEGER,
    -- The run's topic in the executor channel, and its folded key.
    thread_id           TEXT,
    thread_key          TEXT,
    ci_attempts         INTEGER NOT NULL DEFAULT 0,
    worker_session_id   TEXT,
    worker_last_update  TEXT,
    worker_pid          INTEGER,
    worker_stuck_count  INTEGER NOT NULL DEFAULT 0,
    log_path            TEXT,
    -- The runner's claim on the run; every change after a claim is fenced by (lease_owner, attempt).
    lease_owner         TEXT,
    lease_expires_at    TEXT,
    heartbeat_at        TEXT,
    attempt             INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX executor_runs_state ON executor_runs (state);
CREATE INDEX executor_runs_task ON executor_runs (task_gid);
CREATE INDEX executor_runs_thread ON executor_runs (thread_key);

-- A worker's [REQUEST: ...] or [ESCALATE: ...] line, and the decision on it.
CREATE TABLE worker_requests (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id              INTEGER NOT NULL REFERENCES executor_runs (id),
    kind                TEXT NOT NULL CHECK (kind IN ('request', 'escalate')),
    action              TEXT NOT NULL,
    body                TEXT NOT NULL DEFAULT '',
    -- A decision binds to (run, request, params): approving one request never approves the next.
    params_hash         TEXT NOT NULL,
    source_message_id   INTEGER UNIQUE,
    created_at          TEXT NOT NULL,
    status              TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'approved', 'denied', 'escalated', 'expired')),
    decided_at          TEXT,
    decided_by          TEXT,
    decision_reason     TEXT,
    notify_owner        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX worker_requests_run ON worker_requests (run_id);

-- Who or what decided what, when and why. Append-only: the triggers below
-- refuse every UPDATE and DELETE (SQLite has no TRUNCATE; a DELETE without
-- WHERE fires the trigger too).
CREATE TABLE audit_log (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    at                  TEXT NOT NULL,
    actor               TEXT NOT NULL,
    action              TEXT NOT NULL,
    subject             TEXT NOT NULL,
    decision            TEXT,
    reason              TEXT,
    plugin_name         TEXT,
    plugin_version      TEXT,
    plugin_hash         TEXT,
    params_hash         TEXT,
    source_message_id   INTEGER,
    detail              TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_subject ON audit_log (subject);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: UPDATE refused');
END;

CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: DELETE refused');
END;

-- Inbound chat messages already handled, per identity: a message is acted on
-- only by the transaction whose insert here won.
CREATE TABLE processed_messages (
    identity            TEXT NOT NULL,
    message_id          INTEGER NOT NULL,
    processed_at        TEXT NOT NULL,
    outcome             TEXT NOT NULL,
    PRIMARY KEY (identity, message_id)
);

-- Replies, reactions and edits not yet confirmed by the chat server. Stored
-- in the transaction that records what they report; delivered in id order
-- per ordering_key (one key per channel topic or conversation).
CREATE TABLE outbox (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    identity            TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    kind                TEXT NOT NULL CHECK (kind IN ('message', 'reaction_add', 'reaction_remove', 'edit')),
    channel             TEXT,
    topic               TEXT,
    dm_user_ids         TEXT,
    content             TEXT NOT NULL DEFAULT '',
    target_message_id   INTEGER,
    ordering_key        TEXT NOT NULL,
    attempts            INTEGER NOT NULL DEFAULT 0,
    last_attempt_at     TEXT,
    next_attempt_at     TEXT NOT NULL,
    last_error          TEXT,
    delivered_at        TEXT,
    delivered_message_id INTEGER,
    -- Set when the server refused the entry for good (it is kept, and logged).
    gave_up_at          TEXT
);
CREATE INDEX outbox_pending ON outbox (identity, delivered_at, gave_up_at, id);

-- Per identity: the newest message handled (back-fill resumes after it) and
-- the current event queue.
CREATE TABLE event_bookmarks (
    identity            TEXT PRIMARY KEY,
    last_message_id     INTEGER NOT NULL,
    queue_id            TEXT,
    last_event_id       INTEGER,
    updated_at          TEXT NOT NULL
);

-- Leases for the singletons (analyzer, rescuer) when several instances run.
CREATE TABLE leases (
    name                TEXT PRIMARY KEY,
    owner               TEXT NOT NULL,
    expires_at          TEXT NOT NULL,
    fence               INTEGER NOT NULL DEFAULT 0
);

-- Switches people flip from chat (!pause, !resume).
CREATE TABLE controls (
    name                TEXT PRIMARY KEY,
    value               TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    updated_by          TEXT
);
