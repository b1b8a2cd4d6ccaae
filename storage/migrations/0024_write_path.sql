-- The change feed's positions from a sequence instead of a counter row per stream (issue 47).
--
-- The counter row of 0018 was locked by every change of a warehouse from its event's statement
-- to its commit: every writer of one warehouse waited for that one row (5.5 ms of wall time per
-- createTable at 16 connections). Now a writer takes its positions from one sequence, with no
-- row to wait for; what readers relied on - "a page that ends at n is final: no event with a
-- position at or below n commits later" - is kept by an advisory lock per stream instead:
--
--  * a writer holds the stream's lock SHARED from just before it takes its positions until its
--    transaction ends (writers never wait for each other);
--  * a reader takes it EXCLUSIVE for one statement (``change_event_horizon``): it waits until
--    every writer that already took positions has committed or rolled back, reads the
--    sequence's last value - the horizon - and lets go. Every position of the stream at or below
--    the horizon is then committed or will never be; a later writer takes the lock after the
--    reader released it, so its positions are above. Readers read only up to the horizon.
--
-- The wait is bounded (the reader's ``lock_timeout``; storage/events.py answers 503 with
-- Retry-After past it). Positions stay strictly increasing per stream, but are no longer
-- consecutive (one sequence serves every stream): nothing counted on that (docs/events.md).

CREATE SEQUENCE change_event_position AS bigint CACHE 1;  -- CACHE 1: positions in the order taken
-- Above every position already stored, in every stream.
SELECT setval('change_event_position', greatest(coalesce((SELECT max(last_position) FROM event_stream), 0), 1));

ALTER TABLE event_stream DROP COLUMN last_position;  -- the streams (and their retention) remain

-- The lock's key: (class, stream) in the two-integer space of advisory locks (placement's and the
-- migrations' keys are single bigints, another space). A stream id past 2^31 shares a key with a
-- smaller one: more waiting, never a skipped event.

-- A writer: called by storage/events.py ``record_events`` as the last statement of the change's
-- transaction, once per stream. One round trip, and a plan PostgreSQL keeps (plpgsql caches it).
CREATE FUNCTION record_change_events(p_stream bigint, p_events jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1163280724, (p_stream % 2147483647)::integer);
    -- The stream's row (for retention and the sinks' cursors): written by its first event only;
    -- afterwards a conflict that writes and locks nothing.
    INSERT INTO event_stream (stream) VALUES (p_stream) ON CONFLICT (stream) DO NOTHING;
    INSERT INTO change_event (stream, position, event_id, request_id, request_event_count, operation_type,
        object_type, namespace, name, object_uuid, actor, operation)
    SELECT p_stream, nextval('change_event_position'), (e.doc->>'event-id')::uuid, e.doc->>'request-id',
        (e.doc->>'request-event-count')::integer, e.doc->>'operation-type', e.doc->>'object-type',
        CASE WHEN e.doc ? 'namespace' THEN ARRAY(SELECT jsonb_array_elements_text(e.doc->'namespace')) END,
        e.doc->>'name', (e.doc->>'uuid')::uuid, e.doc->'actor', e.doc->'operation'
    FROM jsonb_array_elements(p_events) AS e(doc);
END $$;

-- A reader: the stream's horizon, waiting at most p_wait_ms for the writers in flight (past it:
-- lock_not_available). Run as a statement of its own (autocommit), the lock is held only for it.
CREATE FUNCTION change_event_horizon(p_stream bigint, p_wait_ms integer) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('lock_timeout', p_wait_ms::text || 'ms', true);
    PERFORM pg_advisory_xact_lock(1163280724, (p_stream % 2147483647)::integer);
    RETURN (SELECT last_value FROM change_event_position);
END $$;

-- ---------------------------------------------------------------------------------------------
-- Exclusive locations (storage/placement.py): the lookups of every create, in functions whose
-- plans PostgreSQL keeps.
--
-- The lookup of the entries at, under or above a location was one statement of twelve UNION
-- branches written out per call (one range per root), sent unprepared so that each range was
-- planned for its values: its planning - matching each branch against the expression indexes of
-- 0014 and 0023 - cost 8 ms of PostgreSQL's CPU per createTable (pg_stat_statements,
-- track_planning), five times its execution. Here each branch is a statement of its own with a
-- fixed text: plpgsql prepares it once per connection, and its generic plan is the same index
-- scan (an equality on an array, a range between two values).

-- (the entries, live and as the bin holds them, whose location, metadata directory or data path
-- key is one of p_at - the roots' prefixes: at or above a root - or lies in [p_lo[i], p_hi[i]) -
-- under root i; p_binned: which binned entries count: all, purging (their purge runs), none)
CREATE FUNCTION location_holders(p_at text[], p_lo text[], p_hi text[], p_me bigint, p_binned text)
RETURNS TABLE (id bigint, kind text, uuid text, location text, metadata_location text, data_path text,
    binned boolean)
LANGUAGE plpgsql STABLE
-- Generic plans from the first call: a plan for its values costs more than the lookup itself (the
-- six expression indexes matched anew), and PostgreSQL plans a statement for its values five
-- times per connection before it considers a generic plan - with a pool of 20-30 connections,
-- a third of a W5 run's creates paid that. The generic plan is the same BitmapOr of index scans.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    i integer;
BEGIN
    -- One statement per root and kind of row (a BitmapOr of the six index scans); a holder found
    -- by several roots comes back once per root (the caller keeps one).
    FOR i IN 1 .. coalesce(array_length(p_lo, 1), 0) LOOP
        RETURN QUERY SELECT e.id, e.kind, e.uuid::text, e.location, e.metadata_location, e.data_path, false
            FROM catalog_entry e WHERE e.id IS DISTINCT FROM p_me AND (
                (rtrim(regexp_replace(e.location, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" = ANY(p_at)
             OR (regexp_replace(regexp_replace(e.metadata_location, '^[A-Za-z0-9]+:/*', ''), '/[^/]*$', '')) COLLATE "C" = ANY(p_at)
             OR (e.data_path IS NOT NULL AND (rtrim(regexp_replace(e.data_path, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" = ANY(p_at))
             OR ((rtrim(regexp_replace(e.location, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" >= p_lo[i] AND (rtrim(regexp_replace(e.location, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" < p_hi[i])
             OR ((regexp_replace(regexp_replace(e.metadata_location, '^[A-Za-z0-9]+:/*', ''), '/[^/]*$', '')) COLLATE "C" >= p_lo[i] AND (regexp_replace(regexp_replace(e.metadata_location, '^[A-Za-z0-9]+:/*', ''), '/[^/]*$', '')) COLLATE "C" < p_hi[i])
             OR (e.data_path IS NOT NULL AND (rtrim(regexp_replace(e.data_path, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" >= p_lo[i] AND (rtrim(regexp_replace(e.data_path, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" < p_hi[i]));
        IF p_binned <> 'none' THEN
            RETURN QUERY SELECT e.id, e.kind, e.uuid::text, e.location, e.metadata_location, e.data_path, true
                FROM bin_entry e WHERE e.id IS DISTINCT FROM p_me AND (
                (rtrim(regexp_replace(e.location, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" = ANY(p_at)
             OR (regexp_replace(regexp_replace(e.metadata_location, '^[A-Za-z0-9]+:/*', ''), '/[^/]*$', '')) COLLATE "C" = ANY(p_at)
             OR (e.data_path IS NOT NULL AND (rtrim(regexp_replace(e.data_path, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" = ANY(p_at))
             OR ((rtrim(regexp_replace(e.location, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" >= p_lo[i] AND (rtrim(regexp_replace(e.location, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" < p_hi[i])
             OR ((regexp_replace(regexp_replace(e.metadata_location, '^[A-Za-z0-9]+:/*', ''), '/[^/]*$', '')) COLLATE "C" >= p_lo[i] AND (regexp_replace(regexp_replace(e.metadata_location, '^[A-Za-z0-9]+:/*', ''), '/[^/]*$', '')) COLLATE "C" < p_hi[i])
             OR (e.data_path IS NOT NULL AND (rtrim(regexp_replace(e.data_path, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" >= p_lo[i] AND (rtrim(regexp_replace(e.data_path, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C" < p_hi[i]))
            AND (p_binned = 'all' OR EXISTS (SELECT 1 FROM bin_unit u WHERE u.id = e.unit_id
                AND u.purging_since IS NOT NULL));
        END IF;
    END LOOP;
END $$;

-- The claims' hierarchical locks (storage/placement.py ``_lock``) in one round trip: p_keys in
-- the order given (by depth, then text: one order for every claim, so claims cannot deadlock),
-- each exclusive or shared as p_exclusive says. Was one statement per prefix: four to six round
-- trips per create.
CREATE FUNCTION lock_locations(p_keys text[], p_exclusive boolean[], p_seed bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        IF p_exclusive[i] THEN
            PERFORM pg_advisory_xact_lock(hashtextextended(p_keys[i], p_seed));
        ELSE
            PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_keys[i], p_seed));
        END IF;
    END LOOP;
END $$;

-- The namespaces whose location may overlap a claimed one (storage/placement.py
-- ``_namespace_places``): those with an explicit location, those at one of p_paths (a root's
-- levels under the warehouse location, and their prefixes), and those in [p_lo[i], p_hi[i]) (the
-- levels joined by p_sep). Was one UNION statement planned for its values on every create
-- (0.3-0.5 ms of planning for 0.1 ms of execution); here each part is a fixed statement on the
-- (warehouse_id, path) key, planned once per connection. A namespace may come back twice.
CREATE FUNCTION namespace_places(p_wh bigint, p_paths text[], p_lo text[], p_hi text[], p_sep text)
RETURNS TABLE (path text[], explicit text)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan  -- as location_holders: index lookups whatever the values
AS $$
#variable_conflict use_column
DECLARE
    i integer;
BEGIN
    RETURN QUERY SELECT n.path::text[], n.properties->>'location' FROM namespace n
        WHERE n.warehouse_id = p_wh AND n.properties ? 'location';
    FOR i IN 1 .. coalesce(array_length(p_paths, 1), 0) LOOP
        RETURN QUERY SELECT n.path::text[], n.properties->>'location' FROM namespace n
            WHERE n.warehouse_id = p_wh AND n.path = (string_to_array(p_paths[i], p_sep) COLLATE "C");
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(p_lo, 1), 0) LOOP
        RETURN QUERY SELECT n.path::text[], n.properties->>'location' FROM namespace n
            WHERE n.warehouse_id = p_wh AND n.path >= (string_to_array(p_lo[i], p_sep) COLLATE "C")
            AND n.path < (string_to_array(p_hi[i], p_sep) COLLATE "C");
    END LOOP;
END $$;
