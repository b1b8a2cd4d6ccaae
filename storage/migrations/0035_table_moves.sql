-- Moving a table home (issue 50, docs/federation.md "Moving a table home"): a table of a federated
-- warehouse registered in a native one, its metadata not copied. The row is written in the
-- register's transaction and says the remote's copy is read-only through Growler: every write a
-- federated warehouse forwards is refused for it, so the two copies cannot diverge through Growler.
--
-- It lives while the remote's copy does: gone once the remote dropped it (remote = 'drop'), kept
-- with remote = 'keep' (the remote's copy stays, read-only). While it lives the move can be undone
-- (unregistered from the native warehouse, if nothing was committed there since), and the native
-- entry cannot be dropped or unregistered (ON DELETE RESTRICT: the remote's copy reads the same
-- files, which a purge would delete; the undo deletes this row first, in its transaction).
CREATE TABLE table_move (
    source_warehouse_id bigint NOT NULL REFERENCES warehouse (id) ON DELETE CASCADE,
    source_namespace    text[] COLLATE "C" NOT NULL CHECK (cardinality(source_namespace) > 0),
    source_name         text COLLATE "C" NOT NULL,
    entry_id            bigint NOT NULL UNIQUE CONSTRAINT table_move_entry REFERENCES catalog_entry (id) ON DELETE RESTRICT,
    metadata_location   text NOT NULL,
    remote              text NOT NULL CHECK (remote IN ('keep', 'drop')),
    moved_by            text,
    moved_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_warehouse_id, source_namespace, source_name)
);
