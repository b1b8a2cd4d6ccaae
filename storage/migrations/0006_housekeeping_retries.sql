-- Housekeeping handles each pending object on its own: one whose deletion keeps failing (a
-- location the store refuses, a bucket that is gone) is retried later, with a growing delay,
-- and never holds up the others. last_error says why, for operators.
ALTER TABLE pending_object
    ADD COLUMN attempts        integer NOT NULL DEFAULT 0,
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN last_error      text;
