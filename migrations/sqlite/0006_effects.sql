-- What Eagle carried out for a worker, as the worker learns it (JSON: the
-- pushed sha and branch, the PR's number and address, the comment's
-- address). SQLite flavour; keep ../postgres/0006_effects.sql in step.
ALTER TABLE worker_requests ADD COLUMN carried_result TEXT;
