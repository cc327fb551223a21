-- What Eagle's PR loop last saw of a run's PR, so that an escalation and
-- `!show` say what Eagle would merge in its own words (not the worker's):
-- the title, the head and base branches, and CI on the head. SQLite flavour;
-- keep ../postgres/0004_pr_as_seen.sql in step.
ALTER TABLE executor_runs ADD COLUMN pr_title TEXT;
ALTER TABLE executor_runs ADD COLUMN pr_head_ref TEXT;
ALTER TABLE executor_runs ADD COLUMN pr_base_ref TEXT;
ALTER TABLE executor_runs ADD COLUMN pr_ci TEXT;
