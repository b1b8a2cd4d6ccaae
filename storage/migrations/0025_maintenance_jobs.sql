-- Maintenance runs as jobs (issue 49, app/maintenance_jobs.py, storage/maintenance_jobs.py).
--
-- A run asked for by hand is queued here and answered 202 at once; a job runner in any worker of
-- any replica claims it (one statement under an advisory lock: the limits on concurrent runs per
-- warehouse and overall are counted and the table's lease taken together), runs it under the
-- table's lease (renewed while it lives: the heartbeat) and records its progress. A runner that
-- died leaves its claimed job 'running' only until its lease runs out: the job goes back to
-- 'queued' (taken over by another runner, at most three attempts) or, past them, fails.
-- A cancel marks a queued job 'cancelled' at once, and asks a running one to stop at its next
-- commit point (cancel_requested).
ALTER TABLE maintenance_run DROP CONSTRAINT maintenance_run_status_check;
ALTER TABLE maintenance_run ADD CONSTRAINT maintenance_run_status_check
    CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'skipped', 'cancelled'));
ALTER TABLE maintenance_run
    ADD COLUMN queued_at        timestamptz,          -- set for a job (a run asked for by hand)
    ADD COLUMN warehouse_id     bigint,               -- what the per-warehouse limit counts
    ADD COLUMN requested_by     text,
    ADD COLUMN attempts         integer NOT NULL DEFAULT 0,
    ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false,
    ADD COLUMN progress         jsonb NOT NULL DEFAULT '{}'::jsonb;
CREATE INDEX maintenance_run_queued ON maintenance_run (id) WHERE status = 'queued';
CREATE INDEX maintenance_run_running_by_warehouse ON maintenance_run (warehouse_id) WHERE status = 'running';
