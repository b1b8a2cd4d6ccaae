-- The stored metadata documents (tens to hundreds of KB each) are compressed by TOAST. lz4
-- decompresses several times faster than the default pglz, and loadTable decompresses one on
-- every request; new and rewritten documents use it. A server built without lz4 (or older than
-- PostgreSQL 14) keeps pglz: the catalog works the same, only slower.
DO $$
BEGIN
    ALTER TABLE catalog_entry ALTER COLUMN metadata SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'metadata stays pglz-compressed: %', SQLERRM;
END
$$;
