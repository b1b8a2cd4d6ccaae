-- Metadata objects written for a commit that has not (yet) happened. A row is inserted before the
-- object is written and deleted in the same transaction that makes the object current, so a row
-- that outlives its commit's deadline names an object no table will ever point to: the sweeper
-- deletes the object, then the row.
CREATE TABLE pending_object (
    location   text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pending_object_age ON pending_object (created_at);

-- Idempotency-Key: the first request with a key runs and its final response is kept; a retry
-- with the key gets that response back without running again.
CREATE TABLE idempotency_key (
    key         uuid PRIMARY KEY,
    operation   text NOT NULL,
    fingerprint text NOT NULL,
    state       text NOT NULL CHECK (state IN ('running', 'done')),
    status      integer,
    headers     jsonb,
    body        bytea,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX idempotency_key_expiry ON idempotency_key (expires_at);
