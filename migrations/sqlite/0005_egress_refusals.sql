-- The egress proxy's refusals: a worker's attempts to reach a host its
-- profile does not allow, one row per run and destination, repeats counted
-- (coalesced, so a loop cannot flood the database). SQLite flavour; keep
-- ../postgres/0005_egress_refusals.sql in step.
CREATE TABLE egress_refusals (
    run_id      INTEGER NOT NULL REFERENCES executor_runs (id),
    -- The host as the worker named it (a name, or an IP literal), or '*'
    -- for every destination past the per-attempt cap.
    host        TEXT NOT NULL,
    port        INTEGER NOT NULL,
    -- Why the last one was refused.
    reason      TEXT NOT NULL,
    first_at    TEXT NOT NULL,
    last_at     TEXT NOT NULL,
    count       INTEGER NOT NULL,
    PRIMARY KEY (run_id, host, port)
);
