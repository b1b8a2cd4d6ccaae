-- User-defined functions (the REST spec's listFunctions/loadFunction). Their own identifier
-- space per namespace: engines resolve functions and relations separately, so a function may
-- share a name with a table or view. RESTRICT keeps a namespace with functions from being dropped.
CREATE TABLE catalog_function (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace_id      bigint NOT NULL REFERENCES namespace (id) ON DELETE RESTRICT,
    name              text COLLATE "C" NOT NULL,
    uuid              uuid NOT NULL,
    metadata_location text NOT NULL,
    -- the metadata document as validated at registration, served without re-parsing
    metadata          text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (namespace_id, name)
);
