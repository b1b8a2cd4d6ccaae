"""Events: what a change records, the change feed, push delivery (publisher, NATS, Kafka, webhooks)."""
