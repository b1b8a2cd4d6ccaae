-- A recycle bin and deletion protection (issue 35; the rules are app/recycle_bin.py and
-- app/protection.py, the statements storage/bin_rows.py and storage/protection_rows.py).
--
-- Each warehouse has a deletion policy: 'hard' (an entry is removed at once, as before) or 'soft'
-- (the default): a dropped table, view or recursively dropped namespace moves out of the name
-- space into the bin, keeping its id, uuid, documents and grants, until ``retention_s`` has passed
-- (default 7 days); then housekeeping forgets it, purging its files only where a purge was asked.
ALTER TABLE warehouse
    ADD COLUMN deletion_policy text NOT NULL DEFAULT 'soft' CHECK (deletion_policy IN ('soft', 'hard')),
    ADD COLUMN retention_s bigint NOT NULL DEFAULT 604800 CHECK (retention_s BETWEEN 1 AND 315360000),
    -- refuse to sign DELETE requests and vend credentials without s3:DeleteObject
    ADD COLUMN refuse_deletes boolean NOT NULL DEFAULT false,
    ADD COLUMN protected boolean NOT NULL DEFAULT false;

-- Protection marks: drop, purge, unregister, rename and recursive drop are refused (409) for
-- everyone while the entry, one of its namespaces or its warehouse carries one. A column, not a
-- property: any writer may change properties, only manage-grants removes a mark.
ALTER TABLE namespace ADD COLUMN protected boolean NOT NULL DEFAULT false;
ALTER TABLE catalog_entry ADD COLUMN protected boolean NOT NULL DEFAULT false;

-- One drop = one unit: a table, a view, or a namespace with everything under it.
CREATE TABLE bin_unit (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    warehouse_id    bigint NOT NULL REFERENCES warehouse (id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('table', 'view', 'namespace')),
    -- the namespace an entry was in; a namespace unit's own path
    namespace       text[] COLLATE "C" NOT NULL,
    -- the entry's name (NULL for a namespace unit)
    name            text COLLATE "C",
    dropped_at      timestamptz NOT NULL DEFAULT now(),
    dropped_by      text,
    expires_at      timestamptz NOT NULL,
    purge_requested boolean NOT NULL DEFAULT false,
    -- set when its purge began (expiry or an administrator's purge): no undrop from then on
    purging_since   timestamptz,
    CHECK ((kind = 'namespace') = (name IS NULL))
);
CREATE INDEX bin_unit_due ON bin_unit (expires_at) WHERE purging_since IS NULL;
CREATE INDEX bin_unit_by_place ON bin_unit (warehouse_id, namespace);

-- The namespaces of a namespace unit, as they were (ids kept: grants point at them).
CREATE TABLE bin_namespace (
    id          bigint PRIMARY KEY,
    unit_id     bigint NOT NULL REFERENCES bin_unit (id) ON DELETE CASCADE,
    path        text[] COLLATE "C" NOT NULL,
    parent_id   bigint,
    properties  jsonb NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX bin_namespace_by_unit ON bin_namespace (unit_id);

-- Tables and views in the bin, as they were (id, uuid, documents). They keep owning their
-- locations (storage/placement.py reads them with the live entries) until they are forgotten.
CREATE TABLE bin_entry (
    id                bigint PRIMARY KEY,
    unit_id           bigint NOT NULL REFERENCES bin_unit (id) ON DELETE CASCADE,
    namespace_id      bigint NOT NULL,
    name              text COLLATE "C" NOT NULL,
    kind              text NOT NULL CHECK (kind IN ('table', 'view')),
    uuid              uuid NOT NULL,
    location          text NOT NULL,
    metadata_location text NOT NULL,
    metadata          text NOT NULL,
    version           bigint NOT NULL,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
CREATE INDEX bin_entry_by_unit ON bin_entry (unit_id);
CREATE INDEX bin_entry_location_key ON bin_entry
    ((rtrim(regexp_replace(location, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C");
CREATE INDEX bin_entry_metadata_dir_key ON bin_entry
    ((regexp_replace(regexp_replace(metadata_location, '^[A-Za-z0-9]+:/*', ''), '/[^/]*$', '')) COLLATE "C");

-- The functions of a namespace unit.
CREATE TABLE bin_function (
    id                bigint PRIMARY KEY,
    unit_id           bigint NOT NULL REFERENCES bin_unit (id) ON DELETE CASCADE,
    namespace_id      bigint NOT NULL,
    name              text COLLATE "C" NOT NULL,
    uuid              uuid NOT NULL,
    metadata_location text NOT NULL,
    metadata          text NOT NULL,
    created_at        timestamptz NOT NULL
);
CREATE INDEX bin_function_by_unit ON bin_function (unit_id);

-- The grants on what a unit holds, kept with it and given back by an undrop (a dropped role's go).
CREATE TABLE bin_grant (
    id            bigint PRIMARY KEY,
    unit_id       bigint NOT NULL REFERENCES bin_unit (id) ON DELETE CASCADE,
    role_id       bigint NOT NULL REFERENCES role (id) ON DELETE CASCADE,
    privilege     text NOT NULL,
    securable     text NOT NULL,
    warehouse_id  bigint NOT NULL,
    namespace_id  bigint NOT NULL,
    entry_id      bigint,
    created_at    timestamptz NOT NULL
);
CREATE INDEX bin_grant_by_unit ON bin_grant (unit_id);

-- A purge that comes from the bin names the binned table it purges: the row is forgotten when
-- the purge finished, and the purge leaves everything else (live or binned) alone.
ALTER TABLE purge_job ADD COLUMN bin_entry_id bigint;

-- The new privilege: undrop (and list the bin), inherited like the others.
ALTER TABLE role_grant DROP CONSTRAINT role_grant_privilege;
ALTER TABLE role_grant ADD CONSTRAINT role_grant_privilege CHECK (
    privilege IN ('read', 'write', 'create', 'drop', 'manage-properties', 'manage-grants', 'create-principal', 'undrop')
    AND (privilege <> 'create-principal' OR securable = 'catalog')
);
