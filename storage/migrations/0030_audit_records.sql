-- The audit trail (issue 51, app/audit/, docs/audit.md): one row per authenticated request and per
-- refusal that reaches the app, written before the response starts (a worker's group commit).
--
-- Only names: the principal, the operation, the object, the rule, the client's address and user
-- agent, what storage access was signed or vended (prefixes, methods, lifetime). Never a token, a
-- secret, another header, a query string or a body.
--
-- Queries read newest first by (recorded_at, id), filtered by principal, object prefix or
-- decision; retention deletes the oldest rows in batches through the time index.
CREATE TABLE audit_record (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recorded_at timestamptz NOT NULL,
    request_id text,
    principal text,
    identity_provider text,
    roles text[] NOT NULL DEFAULT '{}',
    operation text NOT NULL,
    method text NOT NULL,
    path text NOT NULL,
    object text,
    decision text NOT NULL,
    rule text,
    status integer NOT NULL,
    client text,
    user_agent text,
    access jsonb
);

CREATE INDEX audit_record_time ON audit_record (recorded_at, id);
CREATE INDEX audit_record_principal ON audit_record (principal, recorded_at, id);
CREATE INDEX audit_record_object ON audit_record (object text_pattern_ops);
CREATE INDEX audit_record_refusals ON audit_record (decision, recorded_at, id) WHERE decision <> 'allowed';
