-- Moving a table home with a copy of its files (issue 50, app/table_moves/copying.py): the move's
-- metadata_location is then the copy's, registered in the native warehouse under its own location,
-- and source_metadata_location the remote's version that was copied (what an undo checks the remote
-- still holds). NULL: the table was moved in place (its files and metadata file are the remote's).
ALTER TABLE table_move ADD COLUMN source_metadata_location text;
