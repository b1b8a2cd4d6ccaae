-- The key that seals page tokens (app/ground/page_tokens.py): one per installation, made by the
-- first worker that starts (storage/page_keys.py; the others find it), so a token handed out by
-- one worker or replica is read by any other, and still after a restart.
--
-- Kept in the clear: it hides names from callers, and whoever reads this table can read every
-- name in ``namespace`` and ``catalog_entry`` anyway; a token made with it starts a listing at a
-- chosen key, which the caller's grants still filter.
CREATE TABLE page_token_key (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    key        bytea NOT NULL CHECK (length(key) = 64),
    created_at timestamptz NOT NULL DEFAULT now()
);
