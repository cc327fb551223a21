-- Dry runs (issue 29). PostgreSQL flavour; keep
-- ../sqlite/0014_dry_run.sql in step.

-- A dry run: its worker works confined as always and every effect is
-- decided as usual, but Eagle carries none of them out; it says in the
-- run's topic what it would have done (`!go N --dry-run`, or an executor
-- with `[runner] dry_run = true`).
ALTER TABLE executor_runs ADD COLUMN dry_run BOOLEAN NOT NULL DEFAULT FALSE;
