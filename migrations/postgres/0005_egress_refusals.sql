-- The egress proxy's refusals: a worker's attempts to reach a host its
-- profile does not allow, one row per run and destination, repeats counted
-- (coalesced, so a loop cannot flood the database). PostgreSQL flavour; keep
-- ../sqlite/0005_egress_refusals.sql in step.
CREATE TABLE egress_refusals (
    run_id      BIGINT NOT NULL REFERENCES executor_runs (id),
    -- The host as the worker named it (a name, or an IP literal), or '*'
    -- for every destination past the per-attempt cap.
    host        TEXT NOT NULL,
    port        BIGINT NOT NULL,
    -- Why the last one was refused.
    reason      TEXT NOT NULL,
    first_at    TIMESTAMPTZ NOT NULL,
    last_at     TIMESTAMPTZ NOT NULL,
    count       BIGINT NOT NULL,
    PRIMARY KEY (run_id, host, port)
);
