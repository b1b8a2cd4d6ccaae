-- Federated warehouses (issue 50): a warehouse whose catalog operations are served by another
-- Iceberg REST catalog. ``federation`` holds the remote's non-secret settings (uri, its warehouse
-- name, how Growler authenticates, read-only, timeout), shown to administrators; NULL: a native
-- warehouse. The credential Growler uses toward the remote (a bearer token or an OAuth2 client
-- secret) is kept encrypted (Fernet, GROWLER_SECRETS_KEY, as storage_secret) in a column of its own.
ALTER TABLE warehouse ADD COLUMN federation jsonb;
ALTER TABLE warehouse ADD COLUMN federation_secret bytea;

-- Grants on what a federated warehouse holds: its namespaces, tables and views have no rows in
-- Growler (they live in the remote catalog), so a grant on one names it by path: the namespace's
-- levels (``remote_path``) and the table's or view's name (``remote_name``), under the warehouse's
-- id (it dies with the warehouse). Such grants do not follow a rename made through the remote and
-- outlive a drop there (docs/federation.md). A grant names its securable either by ids (native)
-- or by path (federated), never both.
ALTER TABLE role_grant ADD COLUMN remote_path text[];
ALTER TABLE role_grant ADD COLUMN remote_name text;
DO $$
DECLARE found record;
BEGIN
    FOR found IN
        SELECT conname FROM pg_constraint
        WHERE conrelid = 'role_grant'::regclass AND contype IN ('c', 'u')
          AND (pg_get_constraintdef(oid) LIKE '%namespace_id%' OR pg_get_constraintdef(oid) LIKE '%entry_id%')
    LOOP
        EXECUTE format('ALTER TABLE role_grant DROP CONSTRAINT %I', found.conname);
    END LOOP;
END $$;
ALTER TABLE role_grant ADD CONSTRAINT role_grant_namespace_part
    CHECK ((securable IN ('namespace', 'table', 'view')) = (namespace_id IS NOT NULL OR remote_path IS NOT NULL));
ALTER TABLE role_grant ADD CONSTRAINT role_grant_entry_part
    CHECK ((securable IN ('table', 'view')) = (entry_id IS NOT NULL OR remote_name IS NOT NULL));
ALTER TABLE role_grant ADD CONSTRAINT role_grant_ids_or_path
    CHECK ((remote_path IS NULL AND remote_name IS NULL) OR (namespace_id IS NULL AND entry_id IS NULL));
ALTER TABLE role_grant ADD CONSTRAINT role_grant_once
    UNIQUE NULLS NOT DISTINCT (role_id, privilege, securable, warehouse_id, namespace_id, entry_id, remote_path, remote_name);
