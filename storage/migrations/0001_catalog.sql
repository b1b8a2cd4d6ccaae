-- Warehouses, namespaces, and the tables and views they hold.
-- Everything is keyed by warehouse, so /v1/{prefix}/... selects one.

CREATE TABLE warehouse (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text COLLATE "C" NOT NULL UNIQUE,
    location    text NOT NULL,
    -- non-secret storage settings handed to clients (endpoint, region, path-style)
    storage     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE namespace (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    warehouse_id bigint NOT NULL REFERENCES warehouse (id) ON DELETE CASCADE,
    -- the levels, e.g. {accounting,tax}; "C" collation gives a byte order for keyset paging
    path         text[] COLLATE "C" NOT NULL CHECK (cardinality(path) > 0),
    -- the parent must exist while the child does (RESTRICT makes drop of a parent fail)
    parent_id    bigint REFERENCES namespace (id) ON DELETE RESTRICT,
    properties   jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (warehouse_id, path)
);
-- listNamespaces: children of one parent (or the top level) in path order
CREATE INDEX namespace_children ON namespace (warehouse_id, parent_id, path);

-- Tables and views share one identifier space per namespace: one row per name.
CREATE TABLE catalog_entry (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace_id      bigint NOT NULL REFERENCES namespace (id) ON DELETE RESTRICT,
    name              text COLLATE "C" NOT NULL,
    kind              text NOT NULL CHECK (kind IN ('table', 'view')),
    uuid              uuid NOT NULL,
    location          text NOT NULL,
    metadata_location text NOT NULL,
    -- the metadata document exactly as written to storage, served without re-parsing
    metadata          text NOT NULL,
    version           bigint NOT NULL DEFAULT 1,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (namespace_id, name)
);
-- listTables / listViews: one kind in one namespace in name order
CREATE INDEX catalog_entry_by_kind ON catalog_entry (namespace_id, kind, name);
