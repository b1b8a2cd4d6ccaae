"""Function operations (read-only in the REST spec; registration is ``python -m scripts.functions``)."""

from __future__ import annotations

import json

from app.composition.services import Services
from app.edge.responses import JSON, Rendered
from app.rules.identifiers import parse_namespace


def list_functions(
    services: Services, prefix: str, namespace: str, pageToken: str | None = None, pageSize: int | None = None
):
    levels = parse_namespace(namespace, services.namespace_separator)
    page = services.functions.list_names(prefix, levels, pageToken, pageSize)
    body = {"identifiers": [[*levels, name] for name in page.items]}  # CatalogObjectIdentifier: a path
    if page.next_page_token:
        body["next-page-token"] = page.next_page_token
    return body, 200


def load_function(services: Services, prefix: str, namespace: str, function: str):
    row = services.functions.load(prefix, parse_namespace(namespace, services.namespace_separator), function)
    body = f'{{"metadata-location":{json.dumps(row.metadata_location)},"metadata":{row.metadata}}}'
    return Rendered(200, body.encode(), {"Content-Type": JSON})
