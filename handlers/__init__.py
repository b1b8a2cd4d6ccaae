"""Thin HTTP handlers, one module per resource; ``app.resolver`` finds them by operationId."""
