-- Maintenance runs that outlive their runner or their table's name (issue 37, app/maintenance_lease.py).
--
-- A run records the holder of the lease it ran under: a run still 'running' whose holder no longer
-- holds a live lease on its table was left by a runner that died (SIGKILL, a lost host); the next
-- runner to take the table's lease, or housekeeping, marks it failed ("abandoned: runner died").
ALTER TABLE maintenance_run ADD COLUMN holder text;
CREATE INDEX maintenance_run_running ON maintenance_run (entry_id) WHERE status = 'running';

-- A table dropped into the recycle bin keeps its id (migration 0017) and comes back with it on
-- undrop: its runs are kept (and a run the drop interrupted can still record why it stopped)
-- instead of vanishing with the catalog_entry row. Recorded runs are forgotten after 30 days.
ALTER TABLE maintenance_run DROP CONSTRAINT maintenance_run_entry_id_fkey;

-- Runs the commit path made due (app/maintenance_trigger.py) are recorded with the trigger 'commits'.
ALTER TABLE maintenance_run DROP CONSTRAINT maintenance_run_trigger_check;
ALTER TABLE maintenance_run ADD CONSTRAINT maintenance_run_trigger_check
    CHECK (trigger IN ('schedule', 'request', 'commits'));
