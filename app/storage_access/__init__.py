"""Storage access: client config and credentials modes (delegation), remote signing, S3 requests, bulk-delete probes."""
