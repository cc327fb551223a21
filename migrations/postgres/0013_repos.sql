-- Several repositories (issue 25). PostgreSQL flavour; keep
-- ../sqlite/0013_repos.sql in step.

-- The repository a task belongs to, by the name the executor's profile
-- gives it (`[[runner.repos]] name`); NULL: the executor's first.
ALTER TABLE executor_queue ADD COLUMN repo TEXT;

-- The repositories executors work in, as each executor announces them when
-- it starts: what `!queue --repo` may name, and what `!status` shows.
-- Names and plain URLs only, never a credential.
CREATE TABLE repos (
    name            TEXT NOT NULL PRIMARY KEY,
    url             TEXT NOT NULL,
    github          TEXT,
    base            TEXT NOT NULL,
    executor        TEXT NOT NULL,
    announced_at    TIMESTAMPTZ NOT NULL
);

-- How a run's setup phase went (`!status run N`): "ran", "cached",
-- "failed: …", or NULL when its repository has no setup.
ALTER TABLE executor_runs ADD COLUMN setup_outcome TEXT;
