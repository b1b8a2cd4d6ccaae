"""GET /v1/config: how clients should talk to a warehouse."""

from app.edge.context import advertised_endpoints, namespaces, plans


def get_config(warehouse: str | None = None):
    body = namespaces().config(warehouse, advertised_endpoints())
    mode = plans().config.scan_planning_mode
    if mode:  # a default: a client's own setting wins
        body["defaults"]["scan-planning-mode"] = mode
    return body, 200
