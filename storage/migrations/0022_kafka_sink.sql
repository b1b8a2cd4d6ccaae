-- The change feed's Kafka sink (app/publisher_kafka.py): a third kind of event sink, and the
-- settings a kind has beyond its url (Kafka: the topic template, security protocol, SASL mechanism
-- and user, the CA certificate). Its secret (the SASL password) goes in event_sink.secret,
-- encrypted like a webhook's signing key; nothing secret goes in options.
ALTER TABLE event_sink DROP CONSTRAINT event_sink_kind_check;
ALTER TABLE event_sink ADD CONSTRAINT event_sink_kind_check CHECK (kind IN ('nats', 'webhook', 'kafka'));
ALTER TABLE event_sink ADD COLUMN options jsonb NOT NULL DEFAULT '{}';
