-- Read restrictions (issue 51, app/restrictions/, docs/read-restrictions.md): which rows and
-- columns a role or a principal may read of a table, attached to the warehouse, a namespace
-- (inherited by everything below it), a table or a view - like a grant, and pointing at ids like
-- one, so a restriction follows a rename and is gone with what it is on.
--
-- ``row_filter``: an Iceberg expression (the REST spec's Expression JSON, names as terms), which
-- may name the caller ("${principal}", "${roles}"); ``columns``: [{"name", "action"}] with the
-- spec's actions (or "hide"). Every change bumps ``auth_state.version`` (the trigger below), so
-- each worker's cached decisions, which carry the caller's restrictions, are dropped within a
-- poll, as a revoked grant is.
--
-- ``principal.trusted_engine``: a principal of Growler's own an administrator trusts to apply
-- restrictions itself (an engine); only such a caller gets a restricted table's metadata and
-- storage access, with the restrictions in the spec's ``read-restrictions``.
ALTER TABLE principal ADD COLUMN trusted_engine boolean NOT NULL DEFAULT false;

CREATE TABLE read_restriction (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    role_id       bigint REFERENCES role (id) ON DELETE CASCADE,
    principal     text COLLATE "C",
    securable     text NOT NULL CHECK (securable IN ('warehouse', 'namespace', 'table', 'view')),
    warehouse_id  bigint NOT NULL REFERENCES warehouse (id) ON DELETE CASCADE,
    namespace_id  bigint REFERENCES namespace (id) ON DELETE CASCADE,
    entry_id      bigint REFERENCES catalog_entry (id) ON DELETE CASCADE,
    row_filter    jsonb,
    columns       jsonb NOT NULL DEFAULT '[]',
    created_by    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((role_id IS NULL) <> (principal IS NULL)),
    CHECK ((securable IN ('namespace', 'table', 'view')) = (namespace_id IS NOT NULL)),
    CHECK ((securable IN ('table', 'view')) = (entry_id IS NOT NULL)),
    UNIQUE NULLS NOT DISTINCT (role_id, principal, securable, warehouse_id, namespace_id, entry_id)
);
CREATE INDEX read_restriction_by_role ON read_restriction (role_id) WHERE role_id IS NOT NULL;
CREATE INDEX read_restriction_by_principal ON read_restriction (principal) WHERE principal IS NOT NULL;
CREATE INDEX read_restriction_by_warehouse ON read_restriction (warehouse_id);
CREATE INDEX read_restriction_by_namespace ON read_restriction (namespace_id) WHERE namespace_id IS NOT NULL;
CREATE INDEX read_restriction_by_entry ON read_restriction (entry_id) WHERE entry_id IS NOT NULL;

CREATE TRIGGER read_restriction_changed AFTER INSERT OR UPDATE OR DELETE ON read_restriction
    FOR EACH ROW EXECUTE FUNCTION growler_bump_auth_version();
CREATE TRIGGER read_restriction_truncated AFTER TRUNCATE ON read_restriction
    FOR EACH STATEMENT EXECUTE FUNCTION growler_bump_auth_version();

-- A rename moves the path a cached restriction was resolved to, as for a grant.
CREATE OR REPLACE FUNCTION growler_bump_auth_version_if_granted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM role_grant WHERE entry_id = OLD.id)
       OR EXISTS (SELECT 1 FROM read_restriction WHERE entry_id = OLD.id) THEN
        UPDATE auth_state SET version = version + 1;
    END IF;
    RETURN NULL;
END $$;

-- The restrictions on what a recycle-bin unit holds go to the bin with it and come back with an
-- undrop, so an undropped table is never readable past what it was restricted to.
CREATE TABLE bin_read_restriction (
    id            bigint PRIMARY KEY,
    unit_id       bigint NOT NULL REFERENCES bin_unit (id) ON DELETE CASCADE,
    role_id       bigint REFERENCES role (id) ON DELETE CASCADE,
    principal     text COLLATE "C",
    securable     text NOT NULL,
    warehouse_id  bigint NOT NULL,
    namespace_id  bigint NOT NULL,
    entry_id      bigint,
    row_filter    jsonb,
    columns       jsonb NOT NULL,
    created_by    text,
    created_at    timestamptz NOT NULL
);
CREATE INDEX bin_read_restriction_by_unit ON bin_read_restriction (unit_id);
