-- Least privilege in the management API (issue 33; the rules are app/management_rights.py).
--
-- The privilege "admin" could be granted and meant nothing: being an administrator is a
-- principal's flag (principal.is_admin), never a grant, so such grants are removed and the set
-- of privileges a grant may carry is closed. "create-principal" (making principals, never
-- administrators) is new and lives on the catalog only.
DELETE FROM role_grant WHERE privilege NOT IN
    ('read', 'write', 'create', 'drop', 'manage-properties', 'manage-grants', 'create-principal');
ALTER TABLE role_grant ADD CONSTRAINT role_grant_privilege CHECK (
    privilege IN ('read', 'write', 'create', 'drop', 'manage-properties', 'manage-grants', 'create-principal')
    AND (privilege <> 'create-principal' OR securable = 'catalog')
);

-- A membership names a live principal of our own: a deleted principal's memberships stayed (and
-- were matched by name for an identity provider's user of that name). Deleting a principal now
-- removes them (storage/principals.py), and an IdP's users hold roles only through their token.
DELETE FROM role_member m WHERE NOT EXISTS (
    SELECT 1 FROM principal p WHERE p.client_id = m.principal AND p.deleted_at IS NULL
);
