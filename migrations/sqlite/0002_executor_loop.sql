-- The executor loop: workers, their requests and decisions, global worker
-- slots, and the notices the runner leaves for Eagle. SQLite flavour; keep
-- ../postgres/0002_executor_loop.sql in step.

-- A task captured in a direct message (or a private channel) is shown in
-- full only where its origin is visible.
ALTER TABLE executor_queue ADD COLUMN origin_private INTEGER NOT NULL DEFAULT 0;

-- What the run's worker is and where it runs, mirrored at every step so that
-- a dead worker leaves a recoverable trail (seed 004).
ALTER TABLE executor_runs ADD COLUMN prompt_kind TEXT;
ALTER TABLE executor_runs ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executor_runs ADD COLUMN worker_pgid INTEGER;
-- Host identity: the boot id and the PID namespace, never the hostname.
ALTER TABLE executor_runs ADD COLUMN worker_host TEXT;
-- The worker's start time in clock ticks after boot (/proc/<pid>/stat field
-- 22): with the host and the group, it tells a live worker from a reused pid.
ALTER TABLE executor_runs ADD COLUMN worker_start_ticks INTEGER;
ALTER TABLE executor_runs ADD COLUMN worker_started_at TEXT;
-- Until when the worker may be alive without its runner: the worker shim
-- kills its own group by then, so nobody else may claim the run before.
ALTER TABLE executor_runs ADD COLUMN worker_alive_until TEXT;
ALTER TABLE executor_runs ADD COLUMN worker_exit_code INTEGER;
ALTER TABLE executor_runs ADD COLUMN worker_exit_file TEXT;
-- How far the runner has read the work log: nothing is relayed twice.
ALTER TABLE executor_runs ADD COLUMN log_offset INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executor_runs ADD COLUMN socket_path TEXT;
-- SHA-256 of the per-attempt token the worker holds (the token itself is never stored).
ALTER TABLE executor_runs ADD COLUMN token_sha256 TEXT;
ALTER TABLE executor_runs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
-- Claude Code reports a session's cost cumulatively across resumes: what the
-- current session had cost when the run last saw it.
ALTER TABLE executor_runs ADD COLUMN session_cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE executor_runs ADD COLUMN cost_cap_usd REAL;
ALTER TABLE executor_runs ADD COLUMN turns INTEGER NOT NULL DEFAULT 0;
-- The global worker slot the run's live worker holds.
ALTER TABLE executor_runs ADD COLUMN slot INTEGER;
CREATE INDEX executor_runs_lease ON executor_runs (lease_owner);

-- Requests: idempotent per (run, attempt, the worker's own key), bound to a
-- parameter hash, answered to the worker at most once.
ALTER TABLE worker_requests ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE worker_requests ADD COLUMN request_key TEXT NOT NULL DEFAULT '';
-- How the worker asked: 'line' (printed), 'socket' (eagle request), 'hook' (Claude Code).
ALTER TABLE worker_requests ADD COLUMN via TEXT NOT NULL DEFAULT 'line';
-- An approver's note (!approve 42 7 <note>), handed to the worker on resume.
ALTER TABLE worker_requests ADD COLUMN note TEXT;
ALTER TABLE worker_requests ADD COLUMN escalated_at TEXT;
ALTER TABLE worker_requests ADD COLUMN reminded_at TEXT;
ALTER TABLE worker_requests ADD COLUMN expires_at TEXT;
-- When the worker learnt the answer (directly, or on resume).
ALTER TABLE worker_requests ADD COLUMN delivered_at TEXT;
-- A human's decision on an identical earlier request that this one reused.
ALTER TABLE worker_requests ADD COLUMN bound_to INTEGER REFERENCES worker_requests (id);
ALTER TABLE worker_requests ADD COLUMN consumed_at TEXT;
CREATE UNIQUE INDEX worker_requests_key ON worker_requests (run_id, attempt, request_key);
CREATE INDEX worker_requests_status ON worker_requests (status);

-- The global worker limit, across every runner on every host: a worker runs
-- only while its run holds one of these rows. A row is free when it has no
-- run or its expiry has passed; expires_at covers both the runner's lease
-- and the time the worker may outlive its runner.
CREATE TABLE worker_slots (
    slot                INTEGER PRIMARY KEY,
    run_id              INTEGER,
    owner               TEXT,
    expires_at          TEXT,
    fence               INTEGER NOT NULL DEFAULT 0
);

-- What the runner needs a human to hear (a run held after too many failed
-- attempts, a cost cap reached). The executor never asks a human directly:
-- Eagle posts these, with the @-mention, exactly once.
CREATE TABLE run_notices (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id              INTEGER NOT NULL REFERENCES executor_runs (id),
    kind                TEXT NOT NULL,
    text                TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    posted_at           TEXT
);
CREATE INDEX run_notices_unposted ON run_notices (posted_at);

-- Pruning handled messages and delivered replies after the retention.
CREATE INDEX processed_messages_at ON processed_messages (processed_at);
CREATE INDEX outbox_done ON outbox (delivered_at, gave_up_at);
