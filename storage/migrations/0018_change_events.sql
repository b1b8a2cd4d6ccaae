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

-- Push delivery (storage/deliveries.py, app/publisher.py): where events go (NATS JetStream or a
-- webhook), how far each sink has delivered each stream, what it gave up on (dead letters an
-- administrator lists and replays), and the lease that lets one publisher at a time deliver.
CREATE TABLE event_sink (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text COLLATE "C" NOT NULL UNIQUE,
    kind         text NOT NULL CHECK (kind IN ('nats', 'webhook')),
    url          text NOT NULL,
    secret       bytea,                        -- a webhook's signing key, encrypted (app/ground/secrets.py)
    filters      jsonb NOT NULL DEFAULT '{}',  -- warehouses, operation-types, catalog-objects-by-name
    max_attempts integer NOT NULL DEFAULT 8 CHECK (max_attempts BETWEEN 1 AND 100),
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE event_sink_cursor (
    sink_id  bigint NOT NULL REFERENCES event_sink (id) ON DELETE CASCADE,
    stream   bigint NOT NULL,
    position bigint NOT NULL,
    PRIMARY KEY (sink_id, stream)
);

CREATE TABLE event_dead_letter (
    sink_id    bigint NOT NULL REFERENCES event_sink (id) ON DELETE CASCADE,
    stream     bigint NOT NULL,
    position   bigint NOT NULL,
    event_id   uuid NOT NULL,
    attempts   integer NOT NULL,
    last_error text NOT NULL,
    replay     boolean NOT NULL DEFAULT false,  -- an administrator asked for it to be delivered again
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sink_id, stream, position)
);

CREATE TABLE event_publisher_lease (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);
