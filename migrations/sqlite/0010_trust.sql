-- Whom Eagle listens to on GitHub. SQLite flavour; keep
-- ../postgres/0010_trust.sql in step.

-- The repository the run's PR's head branch is in, as the PR loop last saw
-- it (`head.repo.full_name`): the escalation of a merge says where the head
-- comes from.
ALTER TABLE executor_runs ADD COLUMN pr_head_repo TEXT;

-- What an approved request waits for before Eagle carries it out (a merge
-- waiting for its required checks, and until when), as the run's topic was
-- told it: told once, not at every try.
ALTER TABLE worker_requests ADD COLUMN carry_waiting TEXT;
