"""GET /v1/config: how clients should talk to a warehouse."""

from app.composition.services import Services


def get_config(services: Services, warehouse: str | None = None):
    body = services.namespaces.config(warehouse, services.endpoints)
    mode = services.namespaces.settings.scan_planning_mode
    if mode:  # a default: a client's own setting wins (clients that read only catalog properties: PyIceberg)
        body["defaults"]["scan-planning-mode"] = mode
    return body, 200
