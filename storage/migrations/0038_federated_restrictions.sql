-- Read restrictions in federated warehouses (issue 51, docs/read-restrictions.md "Federated
-- warehouses"): as grants there (migration 0029), a restriction on a namespace or a table of a
-- federated warehouse names it by path - the namespace's levels and the table's name - under the
-- warehouse's id, since its objects live in the remote catalog. By ids (native) or by path
-- (federated), never both; a path does not follow a rename made through the remote, so renames and
-- drops through Growler are refused to a restricted caller there.
ALTER TABLE read_restriction ADD COLUMN remote_path text[];
ALTER TABLE read_restriction ADD COLUMN remote_name text;
DO $$
DECLARE found record;
BEGIN
    FOR found IN
        SELECT conname FROM pg_constraint
        WHERE conrelid = 'read_restriction'::regclass AND contype IN ('c', 'u')
          AND (pg_get_constraintdef(oid) LIKE '%namespace_id%' OR pg_get_constraintdef(oid) LIKE '%entry_id%')
    LOOP
        EXECUTE format('ALTER TABLE read_restriction DROP CONSTRAINT %I', found.conname);
    END LOOP;
END $$;
ALTER TABLE read_restriction ADD CONSTRAINT read_restriction_namespace_part
    CHECK ((securable IN ('namespace', 'table', 'view')) = (namespace_id IS NOT NULL OR remote_path IS NOT NULL));
ALTER TABLE read_restriction ADD CONSTRAINT read_restriction_entry_part
    CHECK ((securable IN ('table', 'view')) = (entry_id IS NOT NULL OR remote_name IS NOT NULL));
ALTER TABLE read_restriction ADD CONSTRAINT read_restriction_ids_or_path
    CHECK ((remote_path IS NULL AND remote_name IS NULL) OR (namespace_id IS NULL AND entry_id IS NULL));
ALTER TABLE read_restriction ADD CONSTRAINT read_restriction_once
    UNIQUE NULLS NOT DISTINCT (role_id, principal, securable, warehouse_id, namespace_id, entry_id, remote_path, remote_name);
