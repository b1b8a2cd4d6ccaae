"""The audit trail (issue 51, docs/audit.md): a durable record of every decision, and its query."""
