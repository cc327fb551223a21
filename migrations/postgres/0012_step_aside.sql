-- Escalations that step aside (issue 29). PostgreSQL flavour; keep
-- ../sqlite/0013_step_aside.sql in step.

-- The outbox entry of the post that escalated a request to a human: when
-- the escalation no longer applies (expired, superseded, its run ended),
-- Eagle edits that message to say so.
ALTER TABLE worker_requests ADD COLUMN escalation_outbox_id BIGINT;

-- An edit of one of Eagle's own posts known by its outbox entry: the
-- server's message id is known only once that entry is delivered, so the
-- edit waits behind it (same ordering key) and is resolved when sent.
ALTER TABLE outbox ADD COLUMN target_outbox_id BIGINT;
