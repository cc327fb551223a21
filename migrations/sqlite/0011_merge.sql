-- `!merge`: the head Eagle named to a run's owner. SQLite flavour; keep
-- ../postgres/0012_merge.sql in step. (0011 is left to another change.)

-- The head of the run's PR that Eagle last named to its owner when it
-- offered the merge (the one message that the PR is ready, or a refused
-- `!merge` naming the new head): `!merge <run>` merges exactly that
-- commit, never one the owner was not shown.
ALTER TABLE executor_runs ADD COLUMN merge_offered_sha TEXT;
