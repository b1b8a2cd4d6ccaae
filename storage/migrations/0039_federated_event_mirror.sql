-- The remote's change feed mirrored into Growler's (issue 50, docs/federation.md "The change feed"):
-- where a federated warehouse's remote serves the events endpoint (POST /v1/{prefix}/events, as
-- Growler does), housekeeping reads it page by page and records each change made behind Growler's
-- back on the warehouse's stream. One row per federated warehouse: the remote's continuation token
-- the mirror stands at, whether the remote serves its events, and when to ask next. A page's events
-- and the row's move are one transaction (the row locked, SKIP LOCKED: one worker of the fleet mirrors
-- a warehouse at a time), so an event is recorded once, never skipped.
CREATE TABLE federated_event_cursor (
    warehouse_id       bigint PRIMARY KEY REFERENCES warehouse (id) ON DELETE CASCADE,
    continuation_token text,                          -- NULL: not started (the first read starts at the head)
    served             boolean NOT NULL DEFAULT true, -- false: the remote has no events endpoint (asked again later)
    next_at            timestamptz NOT NULL DEFAULT now()
);
