-- Warehouses managed through the management API (issue 16): each may have storage keys of its
-- own. They are kept encrypted (Fernet, with the key from GROWLER_SECRETS_KEY) in a column of
-- their own, so the ``storage`` settings, which are shown to administrators and clients, never
-- hold a secret. NULL: the warehouse uses the keys of the environment (GROWLER_S3_*).
ALTER TABLE warehouse ADD COLUMN storage_secret bytea;
