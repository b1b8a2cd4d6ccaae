-- Federated warehouses (issue 50): a warehouse whose catalog operations are served by another
-- Iceberg REST catalog. ``federation`` holds the remote's non-secret settings (uri, its warehouse
-- name, how Growler authenticates, read-only, timeout), shown to administrators; NULL: a native
-- warehouse. The credential Growler uses toward the remote (a bearer token or an OAuth2 client
-- secret) is kept encrypted (Fernet, GROWLER_SECRETS_KEY, as storage_secret) in a column of its own.
ALTER TABLE warehouse ADD COLUMN federation jsonb;
ALTER TABLE warehouse ADD COLUMN federation_secret bytea;
