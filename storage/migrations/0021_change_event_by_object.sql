-- A table's or view's change events by its uuid (issue 38: the console's timeline on a table's
-- page). Without it the timeline walked the stream's primary key backwards and had to stop
-- somewhere (it looked through the stream's last 100,000 positions), so an old table's events
-- went missing from its page. With it, the newest events of one object are a backward scan of
-- this index however long the stream, bounded by the page size (storage/events.py ``latest_of``).
-- Namespace and management events have no uuid and stay out of it.
--
-- Built in the migration's transaction (migrations run one transaction per file), so writers of
-- change events wait while it builds: on an installation with many millions of events, build it
-- first by hand with CREATE INDEX CONCURRENTLY under this name, and this statement does nothing.
CREATE INDEX IF NOT EXISTS change_event_by_object ON change_event (stream, object_uuid, position)
    WHERE object_uuid IS NOT NULL;
