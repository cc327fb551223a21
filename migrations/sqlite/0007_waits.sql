-- Attempts of a run that ended waiting for decisions (escalated or still
-- pending): past runner.max_waits the run is held for its owner, so that a
-- worker cannot be resumed for ever. `!retry` starts it afresh. SQLite
-- flavour; keep ../postgres/0007_waits.sql in step.
ALTER TABLE executor_runs ADD COLUMN waits INTEGER NOT NULL DEFAULT 0;
