-- Authorization (issue 16): roles, who holds them, and the privileges they are granted on what.
--
-- A principal holds a role by membership (``role_member.principal`` is a client id of our own or
-- the name an IdP token carries in its principal claim); an IdP token's roles claim names roles
-- directly (matched on ``role.name``). A grant gives one privilege on one securable: the catalog
-- (every warehouse), a warehouse, a namespace (inherited by its nested namespaces and everything
-- in them), a table or a view. Grants point at ids, so they follow a rename and die with the
-- thing they are on. Every change here bumps ``auth_state.version`` in the same transaction, so
-- every worker's cached decisions are dropped within a poll (app/edge/auth/state.py).
CREATE TABLE role (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text COLLATE "C" NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE role_member (
    role_id     bigint NOT NULL REFERENCES role (id) ON DELETE CASCADE,
    principal   text COLLATE "C" NOT NULL,
    PRIMARY KEY (role_id, principal)
);
CREATE INDEX role_member_by_principal ON role_member (principal);

CREATE TABLE role_grant (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    role_id       bigint NOT NULL REFERENCES role (id) ON DELETE CASCADE,
    privilege     text NOT NULL,
    securable     text NOT NULL CHECK (securable IN ('catalog', 'warehouse', 'namespace', 'table', 'view')),
    warehouse_id  bigint REFERENCES warehouse (id) ON DELETE CASCADE,
    namespace_id  bigint REFERENCES namespace (id) ON DELETE CASCADE,
    entry_id      bigint REFERENCES catalog_entry (id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((securable = 'catalog') = (warehouse_id IS NULL)),
    CHECK ((securable IN ('namespace', 'table', 'view')) = (namespace_id IS NOT NULL)),
    CHECK ((securable IN ('table', 'view')) = (entry_id IS NOT NULL)),
    UNIQUE NULLS NOT DISTINCT (role_id, privilege, securable, warehouse_id, namespace_id, entry_id)
);
CREATE INDEX role_grant_by_role ON role_grant (role_id);
CREATE INDEX role_grant_by_namespace ON role_grant (namespace_id) WHERE namespace_id IS NOT NULL;
CREATE INDEX role_grant_by_entry ON role_grant (entry_id) WHERE entry_id IS NOT NULL;
