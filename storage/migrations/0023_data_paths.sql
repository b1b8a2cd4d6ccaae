-- A table's data path (issue 46): ``write.data.path`` (else Java's deprecated
-- ``write.object-storage.path`` or ``write.folder-storage.path``) when its properties set one.
-- It is a folder the table owns like its location and metadata directory (storage/placement.py
-- claims it; signing and STS serve it), so it is kept beside them, indexed the same way: another
-- entry's claim finds a data path at, under or above its own folders with an index scan.
ALTER TABLE catalog_entry ADD COLUMN data_path text;
ALTER TABLE bin_entry ADD COLUMN data_path text;
ALTER TABLE staged_table ADD COLUMN data_path text;

CREATE INDEX catalog_entry_data_path_key ON catalog_entry
    ((rtrim(regexp_replace(data_path, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C") WHERE data_path IS NOT NULL;
CREATE INDEX bin_entry_data_path_key ON bin_entry
    ((rtrim(regexp_replace(data_path, '^[A-Za-z0-9]+:/*', ''), '/')) COLLATE "C") WHERE data_path IS NOT NULL;

-- The tables that set one already (only documents that name one of the properties are parsed).
UPDATE catalog_entry SET data_path = nullif(coalesce(
        (metadata::jsonb)->'properties'->>'write.data.path',
        (metadata::jsonb)->'properties'->>'write.object-storage.path',
        (metadata::jsonb)->'properties'->>'write.folder-storage.path'), '')
    WHERE kind = 'table' AND (metadata LIKE '%"write.data.path"%' OR metadata LIKE '%"write.object-storage.path"%'
        OR metadata LIKE '%"write.folder-storage.path"%');
UPDATE bin_entry SET data_path = nullif(coalesce(
        (metadata::jsonb)->'properties'->>'write.data.path',
        (metadata::jsonb)->'properties'->>'write.object-storage.path',
        (metadata::jsonb)->'properties'->>'write.folder-storage.path'), '')
    WHERE kind = 'table' AND (metadata LIKE '%"write.data.path"%' OR metadata LIKE '%"write.object-storage.path"%'
        OR metadata LIKE '%"write.folder-storage.path"%');
