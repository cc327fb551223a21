-- Talking with Eagle (SQLite flavour; keep ../postgres/0008_conversations.sql
-- in step): questions put to the language backend, the tasks it proposes
-- until their asker confirms, the one line per milestone told in a task's
-- own conversation, and what a worker last said it was doing.

-- A mention or direct message handed to the language backend. Written in
-- the transaction that claims the message; answered by the conversation
-- loop outside any transaction, then concluded once.
CREATE TABLE conversations (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    identity            TEXT NOT NULL,
    message_id          INTEGER NOT NULL,
    transport           TEXT NOT NULL,
    asker_id            INTEGER NOT NULL,
    asker_email         TEXT NOT NULL,
    asker_name          TEXT NOT NULL,
    asker_approver      INTEGER NOT NULL DEFAULT 0,
    -- Where the question was asked, which is where the answer goes.
    channel             TEXT,
    topic               TEXT,
    dm_user_ids         TEXT,
    private             INTEGER NOT NULL DEFAULT 0,
    text                TEXT NOT NULL,
    asked_at            TEXT NOT NULL,
    status              TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'answered', 'proposed', 'captured', 'failed', 'refused')),
    claimed_by          TEXT,
    claimed_until       TEXT,
    concluded_at        TEXT,
    -- A request for work, as the backend understood it, until its asker confirms.
    proposed_title      TEXT,
    proposed_description TEXT,
    task_id             INTEGER,
    backend             TEXT,
    model               TEXT,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    cost_usd            REAL NOT NULL DEFAULT 0,
    reference           TEXT,
    UNIQUE (identity, message_id)
);
CREATE INDEX conversations_open ON conversations (status, id);
CREATE INDEX conversations_asker ON conversations (asker_id, asked_at);

-- One line per milestone of a run in its task's own conversation: the key
-- (started, escalation:<request>, held, failed, pr, complete) is told once.
CREATE TABLE milestones (
    run_id              INTEGER NOT NULL REFERENCES executor_runs (id),
    milestone           TEXT NOT NULL,
    told_at             TEXT NOT NULL,
    PRIMARY KEY (run_id, milestone)
);

-- The worker's latest [STATUS: …] lines (a JSON array of {at, text}, newest
-- last), for `!status run N` and questions about the run.
ALTER TABLE executor_runs ADD COLUMN worker_status TEXT;

-- A topic's posts (questions about a run read its topic's last messages),
-- and the runs changed since a time (milestones, the digest).
CREATE INDEX outbox_topic ON outbox (ordering_key, id);
CREATE INDEX executor_runs_updated ON executor_runs (updated_at);

-- Who asked, by email too: an escalation @-mentions the requester besides
-- the owner only when they are an approver, and approvers may be named by
-- email.
ALTER TABLE executor_queue ADD COLUMN requested_by_email TEXT;
