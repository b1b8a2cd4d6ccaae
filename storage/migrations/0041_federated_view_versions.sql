-- What Growler last saw of each view of a federated warehouse (issue 50, docs/federation.md "The
-- change feed"): as federated_table_version (migration 0036) for tables - a loadView answering
-- another metadata location than the one seen records the change made behind Growler's back, once;
-- a write through Growler moves the row with its own events.
CREATE TABLE federated_view_version (
    warehouse_id      bigint NOT NULL REFERENCES warehouse (id) ON DELETE CASCADE,
    namespace         text[] COLLATE "C" NOT NULL,
    name              text COLLATE "C" NOT NULL,
    metadata_location text NOT NULL,
    PRIMARY KEY (warehouse_id, namespace, name)
);
