"""Event sinks (management API): where the change feed is pushed - create, list, delete, dead letters, replay."""
