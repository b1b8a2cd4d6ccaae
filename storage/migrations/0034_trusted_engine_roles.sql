-- Roles as trusted engines (issue 51, docs/read-restrictions.md): every principal holding a marked
-- role applies read restrictions itself - a principal of the catalog's own by membership, and an
-- identity provider's principal, which has no row here, through its token's roles claim. A change
-- bumps auth_state.version through the role table's trigger (0011), as any change of a role.
ALTER TABLE role ADD COLUMN trusted_engine boolean NOT NULL DEFAULT false;
