"""Thin HTTP handlers, one module per resource; ``app.edge.resolver`` finds them by operationId."""
