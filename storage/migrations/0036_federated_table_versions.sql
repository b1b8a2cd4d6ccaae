-- What Growler last saw of each table of a federated warehouse (issue 50, docs/federation.md "The
-- change feed"): the metadata location a load answered or a write through Growler made. A load
-- that answers another one found a change made behind Growler's back (on the remote directly):
-- the row moves on and the change is recorded in the warehouse's feed in the same transaction, once
-- (the row is locked: two workers loading the same new version record it once). A write through
-- Growler moves the row with its own events, so it is never taken for an outside change; a drop,
-- a rename or a transaction forgets the rows it touched (the next load sees the table anew).
CREATE TABLE federated_table_version (
    warehouse_id      bigint NOT NULL REFERENCES warehouse (id) ON DELETE CASCADE,
    namespace         text[] COLLATE "C" NOT NULL,
    name              text COLLATE "C" NOT NULL,
    metadata_location text NOT NULL,
    PRIMARY KEY (warehouse_id, namespace, name)
);
