-- The change feed (issue 36): every change writes its event here in the transaction of the
-- change itself (storage/events.py), so an acknowledged change always has its event and a
-- refused or rolled-back one never does.
--
-- Positions: strictly increasing per stream (a warehouse, or 0 for installation-level
-- management changes), and final when visible. The counter row below is updated by the
-- change's transaction as its last statement, so it is locked from then until the commit:
-- writers of one stream take their positions in commit order, and a reader can never see
-- position n+1 committed while n is still to come (no gap is ever exposed as final). The cost
-- is that writers of one stream serialise for that last statement and the commit (measured in
-- docs/events.md).
CREATE TABLE event_stream (
    stream        bigint PRIMARY KEY,  -- the warehouse id; 0: the installation (management changes)
    last_position bigint NOT NULL,
    -- retention (storage/events.py ``prune``) has deleted every event up to here: a continuation
    -- token before it may have missed events, and is answered 410
    pruned_through bigint NOT NULL DEFAULT 0
);

CREATE TABLE change_event (
    stream              bigint NOT NULL,
    position            bigint NOT NULL,
    event_id            uuid NOT NULL UNIQUE,
    request_id          text NOT NULL,
    request_event_count integer NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    operation_type      text NOT NULL,
    object_type         text NOT NULL,
    namespace           text[] COLLATE "C",       -- the object's namespace (or the namespace itself)
    name                text COLLATE "C",         -- table or view name; NULL for a namespace
    object_uuid         uuid,                     -- table or view uuid
    actor               jsonb,
    operation           jsonb NOT NULL,           -- the operation as the events endpoint renders it
    PRIMARY KEY (stream, position)
);
CREATE INDEX change_event_by_time ON change_event (created_at);
