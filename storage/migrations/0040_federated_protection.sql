-- Protection marks on a federated warehouse's namespaces, tables and views (issue 50: "the rest of
-- Growler on top"; docs/federation.md "Protection"). The objects live in the remote, so a mark is
-- kept by path, as read restrictions of federated tables are (migration 0038): while a mark is on an
-- object or one of its namespaces, Growler refuses to forward its drop, purge and rename (and a
-- move home that drops the remote's copy) for every principal, administrators included. The
-- warehouse's own mark stays in warehouse.protected. A namespace's mark has the name ''.
CREATE TABLE federated_protection (
    warehouse_id bigint NOT NULL REFERENCES warehouse (id) ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('namespace', 'table', 'view')),
    namespace    text[] COLLATE "C" NOT NULL,
    name         text COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (warehouse_id, namespace, name, kind)
);
