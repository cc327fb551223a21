-- The owner's inbox and moving in. PostgreSQL flavour; keep
-- ../sqlite/0009_inbox.sql in step.

-- Message ids of transports without a server to number them (the shell):
-- one counter per transport, shared by all its sessions and never reset, so
-- a task key 'shell:<n>' names one message for ever, whatever session typed
-- it. It starts past every number handed out before it existed.
CREATE TABLE local_message_ids (
    transport           TEXT PRIMARY KEY,
    last_id             BIGINT NOT NULL
);
INSERT INTO local_message_ids (transport, last_id)
SELECT 'shell', COALESCE(MAX(n), 0) FROM (
    SELECT message_id AS n FROM processed_messages WHERE identity LIKE 'shell:%'
    UNION ALL
    SELECT origin_message_id AS n FROM executor_queue WHERE origin_transport = 'shell'
) AS seen;

-- Whether the run's PR was a draft when the PR loop last saw it: the
-- escalation of a merge says so, and what approving it will do.
ALTER TABLE executor_runs ADD COLUMN pr_draft BOOLEAN;

-- Runs brought in by `eagle import` from another system, by their id
-- there ('executor-v2:17'): a second import finds them and adds nothing.
ALTER TABLE executor_runs ADD COLUMN imported_from TEXT;
CREATE UNIQUE INDEX executor_runs_imported_from ON executor_runs (imported_from);
