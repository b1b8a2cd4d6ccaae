-- Authentication (issue 15): service principals, the keys that sign Growler's own tokens, and one
-- counter that every worker polls (about once a second) to learn that either changed.
--
-- A principal's secret is kept only as an argon2id hash. ``generation`` goes up with every secret
-- rotation and is written into each token issued for the principal, so a rotation invalidates
-- every token issued before it; a deleted principal keeps its row (deleted_at set) so its client
-- id is never handed to someone else while old tokens are still around.
CREATE TABLE principal (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client_id   text COLLATE "C" NOT NULL UNIQUE,
    secret_hash text NOT NULL,
    generation  integer NOT NULL DEFAULT 1,
    is_admin    boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    rotated_at  timestamptz,
    deleted_at  timestamptz
);

-- Signing keys of Growler's own tokens: the private key encrypted (PKCS#8, with the password from
-- GROWLER_TOKEN_KEY_PASSWORD), the public one in the clear. The newest key not retired signs; a
-- retired key still verifies until every token it signed has expired (``verify_until``).
CREATE TABLE signing_key (
    kid           text COLLATE "C" PRIMARY KEY,
    algorithm     text NOT NULL,
    public_pem    text NOT NULL,
    private_pem   bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    retired_at    timestamptz,
    verify_until  timestamptz
);

-- One row; bumped in the same transaction as every change to principal or signing_key.
CREATE TABLE auth_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version   bigint NOT NULL
);
INSERT INTO auth_state (singleton, version) VALUES (true, 1);
