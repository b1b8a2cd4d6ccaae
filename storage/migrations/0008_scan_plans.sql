-- Server-side scan plans (planTableScan): kept here, not in a worker's memory, so any worker or
-- replica answers fetchPlanningResult / fetchScanTasks / cancelPlanning for any plan. A plan
-- belongs to one catalog entry: dropping (or unregistering) the table forgets its plans.
CREATE TABLE scan_plan (
    id          uuid PRIMARY KEY,
    entry_id    bigint NOT NULL REFERENCES catalog_entry (id) ON DELETE CASCADE,
    status      text NOT NULL CHECK (status IN ('submitted', 'completed', 'failed', 'cancelled')),
    -- pages of tasks (scan_plan_page) once completed; the first is sent with the result
    pages       integer NOT NULL DEFAULT 0,
    -- the Iceberg error body of a failed plan
    error       jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- bumped by the planning worker while it works: a submitted plan that stops being bumped
    -- was interrupted (its worker died) and is reported failed
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX scan_plan_expiry ON scan_plan (expires_at);
CREATE INDEX scan_plan_entry ON scan_plan (entry_id);

-- One page of file scan tasks (a ScanTasks JSON body); page n > 0 is the plan task "<id>:<n>".
CREATE TABLE scan_plan_page (
    plan_id uuid NOT NULL REFERENCES scan_plan (id) ON DELETE CASCADE,
    page    integer NOT NULL,
    body    text NOT NULL,
    PRIMARY KEY (plan_id, page)
);
