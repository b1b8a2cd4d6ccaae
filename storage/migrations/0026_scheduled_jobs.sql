-- Scheduled runs are jobs too (issue 49, app/maintenance/service.py, storage/maintenance_jobs.py).
--
-- Housekeeping's due-work pass no longer runs a due table's policies inline: it queues one job per
-- enabled policy type (trigger 'schedule', or 'commits' when commits made the table due) and the
-- job runners of every worker of every replica execute them, within the same limits, with the
-- same progress, cancel and stop-at-commit-point behaviour as a run asked for by hand.
--
-- Each replica's pass may see the same table due at the same moment. The pass takes the table's
-- turn first (its schedule row moved an interval on, under that row's lock: only one pass wins
-- it), and this index is the last word: at most one queued or running scheduled job per table
-- and policy type, whoever inserts it (a second insert is a conflict, and does nothing). Jobs
-- asked for by hand are not bound by it (up to ten may wait on a table). Runs an older Growler
-- started inline (queued_at NULL) are not jobs and are left out, so a rolling upgrade never
-- trips over one.
CREATE UNIQUE INDEX maintenance_run_one_scheduled_job ON maintenance_run (entry_id, policy_type)
    WHERE status IN ('queued', 'running') AND trigger <> 'request' AND queued_at IS NOT NULL;
