-- The audit trail exported through the change feed's sinks, as a stream of its own (issue 51,
-- docs/audit.md "Export"). A sink whose filters ask for it delivers the records in the order of
-- their transactions: ``tx`` is the id of the transaction that wrote the record (every batch one
-- statement, one transaction), and a reader takes only records of transactions older than every
-- transaction still running (``pg_snapshot_xmin``), so what it has read can never be joined by a
-- record that commits later with a smaller (tx, id) - no record is skipped, without a counter row
-- that would serialise the workers' batches. ``tx`` is the 64-bit transaction id (xid8, epoch
-- included: it never wraps) as a bigint, so that a BRIN index serves the readers: transaction ids
-- grow with the table's physical order, and a BRIN index costs a write next to nothing (a btree on
-- (tx, id) would cost every audited request another index insert).
ALTER TABLE audit_record ADD COLUMN tx bigint NOT NULL DEFAULT pg_current_xact_id()::text::bigint;
CREATE INDEX audit_record_tx ON audit_record USING brin (tx);

-- Where each sink's audit stream stands: the (tx, id) of the last record delivered.
CREATE TABLE audit_sink_cursor (
    sink_id bigint PRIMARY KEY REFERENCES event_sink (id) ON DELETE CASCADE,
    tx      bigint NOT NULL,
    id      bigint NOT NULL
);
