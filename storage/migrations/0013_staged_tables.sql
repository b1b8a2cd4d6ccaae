-- Staged tables (issue 32): a createTable with stage-create=true, or the staged table of a
-- create (or create-or-replace) transaction, writes its data files before the create commits.
-- Remote signing and STS serve a staged table's location exactly as a committed table's, so the
-- stage is recorded here: where it is, who staged it, until when it may be written.
--
-- A stage ends when its name is taken by an entry (the create commits, or another create,
-- register or rename into the name wins: the trigger below), when its namespace goes (CASCADE),
-- or when it expires (readers ignore expired rows; housekeeping deletes them).
CREATE TABLE staged_table (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace_id  bigint NOT NULL REFERENCES namespace (id) ON DELETE CASCADE,
    name          text COLLATE "C" NOT NULL,
    -- the table location and its metadata directory (write.metadata.path) the stage may write
    location      text NOT NULL,
    metadata_path text NOT NULL,
    principal     text,  -- the caller that staged it (NULL without authentication)
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX staged_table_by_name ON staged_table (namespace_id, name);
CREATE INDEX staged_table_expiry ON staged_table (expires_at);

CREATE FUNCTION staged_table_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM staged_table WHERE namespace_id = NEW.namespace_id AND name = NEW.name;
    RETURN NULL;
END;
$$;

CREATE TRIGGER catalog_entry_ends_stages
    AFTER INSERT OR UPDATE OF namespace_id, name ON catalog_entry
    FOR EACH ROW EXECUTE FUNCTION staged_table_end();
