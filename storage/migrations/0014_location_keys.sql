-- Exclusive locations (storage/placement.py) look up, for every create and every move, the live
-- entries at, under or above a location: by these expressions (a location without its scheme and
-- trailing slash; a metadata file's directory the same way), in byte order, so that both "under"
-- (a range) and "above" (the few prefixes of the location) are index scans, not a scan of every
-- row with a regular expression.
CREATE INDEX catalog_entry_location_key ON catalog_entry
    ((rtrim(regexp_replace(location, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C");
CREATE INDEX catalog_entry_metadata_dir_key ON catalog_entry
    ((regexp_replace(regexp_replace(metadata_location, '^[A-Za-z0-9]+:/*', ''), '/[^/]*$', '')) COLLATE "C");
-- ... and the namespaces whose location property places them explicitly (usually few).
CREATE INDEX namespace_with_location ON namespace (warehouse_id) WHERE properties ? 'location';
