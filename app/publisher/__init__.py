"""Push delivery of the change feed: the publisher loop (every worker runs one; the lease holder
delivers) and its targets: NATS, Kafka, webhooks (and where a webhook may go)."""
