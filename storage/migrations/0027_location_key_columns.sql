-- The location keys of 0014, 0017 and 0023 as stored generated columns (issue 47).
--
-- Every create looks up the entries at, under or above its location (location_holders, 0024) by
-- these keys. As index expressions they were computed anew for every row a plan read: the
-- planner prices regexp_replace like an addition, so while a warehouse holds a few hundred tables
-- the generic plan a connection keeps (force_generic_plan) is a scan of every row with six regular
-- expressions each - 17-35 ms of PostgreSQL's CPU per create at 300-600 tables (auto_explain on
-- W5), the plan never revisited as the table grows. Stored, a key is computed once when its row is
-- written; a scan compares plain text, and the indexes are plain btrees on the columns.

ALTER TABLE catalog_entry
    ADD COLUMN location_key text COLLATE "C"
        GENERATED ALWAYS AS (rtrim(regexp_replace(location, '^[A-Za-z0-9]+:/*', ''), '/')) STORED,
    ADD COLUMN metadata_dir_key text COLLATE "C"
        GENERATED ALWAYS AS (regexp_replace(regexp_replace(metadata_location, '^[A-Za-z0-9]+:/*', ''), '/[^/]*$', '')) STORED,
    ADD COLUMN data_path_key text COLLATE "C"
        GENERATED ALWAYS AS (rtrim(regexp_replace(data_path, '^[A-Za-z0-9]+:/*', ''), '/')) STORED;

ALTER TABLE bin_entry
    ADD COLUMN location_key text COLLATE "C"
        GENERATED ALWAYS AS (rtrim(regexp_replace(location, '^[A-Za-z0-9]+:/*', ''), '/')) STORED,
    ADD COLUMN metadata_dir_key text COLLATE "C"
        GENERATED ALWAYS AS (regexp_replace(regexp_replace(metadata_location, '^[A-Za-z0-9]+:/*', ''), '/[^/]*$', '')) STORED,
    ADD COLUMN data_path_key text COLLATE "C"
        GENERATED ALWAYS AS (rtrim(regexp_replace(data_path, '^[A-Za-z0-9]+:/*', ''), '/')) STORED;

DROP INDEX catalog_entry_location_key, catalog_entry_metadata_dir_key, catalog_entry_data_path_key,
    bin_entry_location_key, bin_entry_metadata_dir_key, bin_entry_data_path_key;

CREATE INDEX catalog_entry_location_key ON catalog_entry (location_key);
CREATE INDEX catalog_entry_metadata_dir_key ON catalog_entry (metadata_dir_key);
CREATE INDEX catalog_entry_data_path_key ON catalog_entry (data_path_key) WHERE data_path_key IS NOT NULL;
CREATE INDEX bin_entry_location_key ON bin_entry (location_key);
CREATE INDEX bin_entry_metadata_dir_key ON bin_entry (metadata_dir_key);
CREATE INDEX bin_entry_data_path_key ON bin_entry (data_path_key) WHERE data_path_key IS NOT NULL;

-- location_holders (0024) on the columns: the same rows, the same order of statements, and index
-- scans whatever the table's size. A generic plan estimates "= ANY($1)" at a tenth of a percent of
-- the rows or more, so a connection that planned while the warehouse was small kept a scan of every
-- row (2,000 rows each time at W5's end, 1.8 ms a lookup) until the next ANALYZE; the lookup is
-- a handful of index probes at any size, so scans are off for it.
CREATE OR REPLACE FUNCTION location_holders(p_at text[], p_lo text[], p_hi text[], p_me bigint, p_binned text)
RETURNS TABLE (id bigint, kind text, uuid text, location text, metadata_location text, data_path text,
    binned boolean)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_lo, 1), 0) LOOP
        RETURN QUERY SELECT e.id, e.kind, e.uuid::text, e.location, e.metadata_location, e.data_path, false
            FROM catalog_entry e WHERE e.id IS DISTINCT FROM p_me AND (
                e.location_key = ANY(p_at) OR e.metadata_dir_key = ANY(p_at) OR e.data_path_key = ANY(p_at)
             OR (e.location_key >= p_lo[i] AND e.location_key < p_hi[i])
             OR (e.metadata_dir_key >= p_lo[i] AND e.metadata_dir_key < p_hi[i])
             OR (e.data_path_key >= p_lo[i] AND e.data_path_key < p_hi[i]));
        IF p_binned <> 'none' THEN
            RETURN QUERY SELECT e.id, e.kind, e.uuid::text, e.location, e.metadata_location, e.data_path, true
                FROM bin_entry e WHERE e.id IS DISTINCT FROM p_me AND (
                    e.location_key = ANY(p_at) OR e.metadata_dir_key = ANY(p_at) OR e.data_path_key = ANY(p_at)
                 OR (e.location_key >= p_lo[i] AND e.location_key < p_hi[i])
                 OR (e.metadata_dir_key >= p_lo[i] AND e.metadata_dir_key < p_hi[i])
                 OR (e.data_path_key >= p_lo[i] AND e.data_path_key < p_hi[i]))
                AND (p_binned = 'all' OR EXISTS (SELECT 1 FROM bin_unit u WHERE u.id = e.unit_id
                    AND u.purging_since IS NOT NULL));
        END IF;
    END LOOP;
END $$;

-- The live stages at, under or above one of p_roots (storage/placement.py ``_overlapping_stages``),
-- in a function for the same reason as location_holders: sent as a statement, PostgreSQL planned it
-- anew on every create (0.2 ms, more than it takes to run: a scan of the few live stages).
CREATE FUNCTION stages_overlapping(p_roots text[])
RETURNS TABLE (warehouse_id bigint, path text[], name text, location text, metadata_path text, data_path text)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY SELECT n.warehouse_id, n.path::text[], s.name, s.location, s.metadata_path, s.data_path
        FROM staged_table s JOIN namespace n ON n.id = s.namespace_id, unnest(p_roots) r
        WHERE s.expires_at > now() AND (
            starts_with(rtrim(regexp_replace(s.location, '^[A-Za-z0-9]+:/*', ''), '/') || '/', r || '/')
         OR starts_with(r || '/', rtrim(regexp_replace(s.location, '^[A-Za-z0-9]+:/*', ''), '/') || '/')
         OR starts_with(rtrim(regexp_replace(s.metadata_path, '^[A-Za-z0-9]+:/*', ''), '/') || '/', r || '/')
         OR starts_with(r || '/', rtrim(regexp_replace(s.metadata_path, '^[A-Za-z0-9]+:/*', ''), '/') || '/')
         OR starts_with(rtrim(regexp_replace(s.data_path, '^[A-Za-z0-9]+:/*', ''), '/') || '/', r || '/')
         OR starts_with(r || '/', rtrim(regexp_replace(s.data_path, '^[A-Za-z0-9]+:/*', ''), '/') || '/'));
END $$;

-- A claim's lookups in one round trip (storage/placement.py ``claim``, after its locks): the
-- entries at, under or above its roots (location_holders), the live stages overlapping them
-- (stages_overlapping) and the namespaces whose location may (namespace_places), one row each,
-- told apart by ``source``. Three statements a create were three round trips.
CREATE FUNCTION claim_lookup(p_at text[], p_lo text[], p_hi text[], p_me bigint, p_binned text,
    p_roots text[], p_wh bigint, p_paths text[], p_ns_lo text[], p_ns_hi text[], p_sep text)
RETURNS TABLE (source text, id bigint, kind text, uuid text, location text, metadata_location text,
    data_path text, binned boolean, warehouse_id bigint, path text[], name text, metadata_path text,
    explicit text)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN QUERY SELECT 'entry'::text, h.id, h.kind, h.uuid, h.location, h.metadata_location, h.data_path,
        h.binned, NULL::bigint, NULL::text[], NULL::text, NULL::text, NULL::text
        FROM location_holders(p_at, p_lo, p_hi, p_me, p_binned) h;
    RETURN QUERY SELECT 'stage'::text, NULL::bigint, NULL::text, NULL::text, s.location, NULL::text, s.data_path,
        NULL::boolean, s.warehouse_id, s.path, s.name, s.metadata_path, NULL::text
        FROM stages_overlapping(p_roots) s;
    RETURN QUERY SELECT 'namespace'::text, NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
        NULL::boolean, p_wh, n.path, NULL::text, NULL::text, n.explicit
        FROM namespace_places(p_wh, p_paths, p_ns_lo, p_ns_hi, p_sep) n;
END $$;
