-- Table maintenance (issue 37): policies the catalog executes, the runs it recorded, and the lease
-- that lets one runner at a time work on a table across workers and replicas.
--
-- A policy is attached to the catalog (every id NULL), a warehouse, a namespace (inherited by its
-- nested namespaces) or a table; per type, the nearest attachment wins (app/rules/maintenance.py).
-- Attachments point at ids, like grants: they follow a rename and die with what they are on.
CREATE TABLE maintenance_policy (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    policy_type   text NOT NULL CHECK (policy_type IN (
        'system.snapshot-expiry', 'system.orphan-file-removal',
        'system.metadata-compaction', 'system.data-compaction')),
    securable     text NOT NULL CHECK (securable IN ('catalog', 'warehouse', 'namespace', 'table')),
    warehouse_id  bigint REFERENCES warehouse (id) ON DELETE CASCADE,
    namespace_id  bigint REFERENCES namespace (id) ON DELETE CASCADE,
    entry_id      bigint REFERENCES catalog_entry (id) ON DELETE CASCADE,
    content       jsonb NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((securable = 'catalog') = (warehouse_id IS NULL)),
    CHECK ((securable IN ('namespace', 'table')) = (namespace_id IS NOT NULL)),
    CHECK ((securable = 'table') = (entry_id IS NOT NULL)),
    UNIQUE NULLS NOT DISTINCT (policy_type, warehouse_id, namespace_id, entry_id)
);
CREATE INDEX maintenance_policy_by_namespace ON maintenance_policy (namespace_id) WHERE namespace_id IS NOT NULL;
CREATE INDEX maintenance_policy_by_entry ON maintenance_policy (entry_id) WHERE entry_id IS NOT NULL;

-- One row per table maintenance has looked at: the lease (a runner holds the table until
-- lease_until; another worker or replica skips it) and when the schedule wants it next.
CREATE TABLE maintenance_lease (
    entry_id     bigint PRIMARY KEY REFERENCES catalog_entry (id) ON DELETE CASCADE,
    holder       text,
    lease_until  timestamptz NOT NULL DEFAULT '-infinity',
    next_due_at  timestamptz NOT NULL DEFAULT '-infinity'
);

-- Every run, planned or done: what it planned, what it did, how long, the error.
CREATE TABLE maintenance_run (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entry_id      bigint REFERENCES catalog_entry (id) ON DELETE CASCADE,
    policy_type   text NOT NULL,
    trigger       text NOT NULL CHECK (trigger IN ('schedule', 'request')),
    dry_run       boolean NOT NULL,
    status        text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'skipped')),
    plan          jsonb NOT NULL DEFAULT '{}'::jsonb,
    outcome       jsonb NOT NULL DEFAULT '{}'::jsonb,
    files_removed integer NOT NULL DEFAULT 0,
    error         text,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);
CREATE INDEX maintenance_run_by_entry ON maintenance_run (entry_id, id DESC);

-- The privilege to attach policies and run maintenance where it is held (app/rules/privileges.py).
ALTER TABLE role_grant DROP CONSTRAINT role_grant_privilege;
ALTER TABLE role_grant ADD CONSTRAINT role_grant_privilege CHECK (
    privilege IN ('read', 'write', 'create', 'drop', 'manage-properties', 'manage-grants', 'create-principal',
                  'undrop', 'manage-maintenance')
    AND (privilege <> 'create-principal' OR securable = 'catalog')
);
