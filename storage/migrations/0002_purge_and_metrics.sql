-- Work queued by dropTable(purgeRequested=true): every object under the location is deleted
-- by a background purger. A row stays until its purge finished, so an interrupted purge resumes.
CREATE TABLE purge_job (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    location     text NOT NULL,
    -- metadata files may live outside the location (write.metadata.path); purged too
    extra_objects text[] NOT NULL DEFAULT '{}',
    requested_at timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    not_before   timestamptz NOT NULL DEFAULT now(),
    last_error   text
);
CREATE INDEX purge_job_due ON purge_job (not_before);

-- Scan and commit reports sent by clients (reportMetrics), kept for operators to query.
CREATE TABLE metrics_report (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    warehouse_id bigint NOT NULL REFERENCES warehouse (id) ON DELETE CASCADE,
    namespace    text[] NOT NULL,
    table_name   text NOT NULL,
    report_type  text NOT NULL,
    report       jsonb NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX metrics_report_by_table ON metrics_report (warehouse_id, namespace, table_name, received_at);
