-- Authorization (issue 16), continued: every change that can alter a decision bumps
-- ``auth_state.version`` in its own transaction, by trigger, so no writer can forget it.
--
-- Each worker caches a principal's grants resolved to paths (warehouse name, namespace path,
-- entry name) and drops the cache when the version moves (app/authorization.py). So the version
-- must move when a grant, a role or a membership changes (including rows removed by a cascade:
-- a dropped table or namespace takes its grants with it) and when something a grant points at
-- changes its path (a renamed table or view, a renamed warehouse). Row triggers: a statement
-- that touches no grant (a drop of a table nobody was granted) bumps nothing.
CREATE FUNCTION growler_bump_auth_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE auth_state SET version = version + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER role_changed AFTER INSERT OR UPDATE OR DELETE ON role
    FOR EACH ROW EXECUTE FUNCTION growler_bump_auth_version();
CREATE TRIGGER role_member_changed AFTER INSERT OR UPDATE OR DELETE ON role_member
    FOR EACH ROW EXECUTE FUNCTION growler_bump_auth_version();
CREATE TRIGGER role_grant_changed AFTER INSERT OR UPDATE OR DELETE ON role_grant
    FOR EACH ROW EXECUTE FUNCTION growler_bump_auth_version();
-- TRUNCATE fires no row trigger (a restore, a test resetting the catalog): bump once for it.
CREATE TRIGGER role_truncated AFTER TRUNCATE ON role
    FOR EACH STATEMENT EXECUTE FUNCTION growler_bump_auth_version();
CREATE TRIGGER role_member_truncated AFTER TRUNCATE ON role_member
    FOR EACH STATEMENT EXECUTE FUNCTION growler_bump_auth_version();
CREATE TRIGGER role_grant_truncated AFTER TRUNCATE ON role_grant
    FOR EACH STATEMENT EXECUTE FUNCTION growler_bump_auth_version();

-- A rename moves the path a cached grant was resolved to: bump when a grant points at the entry.
CREATE FUNCTION growler_bump_auth_version_if_granted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM role_grant WHERE entry_id = OLD.id) THEN
        UPDATE auth_state SET version = version + 1;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER catalog_entry_moved AFTER UPDATE OF namespace_id, name ON catalog_entry
    FOR EACH ROW WHEN (OLD.namespace_id IS DISTINCT FROM NEW.namespace_id OR OLD.name IS DISTINCT FROM NEW.name)
    EXECUTE FUNCTION growler_bump_auth_version_if_granted();

CREATE TRIGGER warehouse_renamed AFTER UPDATE OF name ON warehouse
    FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name)
    EXECUTE FUNCTION growler_bump_auth_version();

-- The one lookup on a cache miss: a principal's roles by membership (role_member_by_principal)
-- or by name (role.name is unique), then their grants (role_grant_by_role).

-- Idempotency keys are per principal: the same key sent by another principal is its own request
-- (never a replay of someone else's answer). '' when authentication is off.
ALTER TABLE idempotency_key ADD COLUMN principal text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE idempotency_key DROP CONSTRAINT idempotency_key_pkey;
ALTER TABLE idempotency_key ADD PRIMARY KEY (key, principal);
