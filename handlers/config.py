"""GET /v1/config: how clients should talk to a warehouse."""

from handlers._context import advertised_endpoints, catalog


def get_config(warehouse: str | None = None):
    return catalog().config(warehouse, advertised_endpoints()), 200
