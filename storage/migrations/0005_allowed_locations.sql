-- Extra location prefixes (besides the warehouse location) where the warehouse's tables and
-- views may be created, moved, registered and keep their metadata (GROWLER_ALLOWED_LOCATIONS
-- for the default warehouse). Everything else is refused.
ALTER TABLE warehouse ADD COLUMN allowed_locations text[] NOT NULL DEFAULT '{}';

-- A purge deletes only under the dropped table's location and its metadata directory (which
-- write.metadata.path may put elsewhere); the job remembers the latter.
ALTER TABLE purge_job ADD COLUMN metadata_path text;
