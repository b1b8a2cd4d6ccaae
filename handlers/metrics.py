"""``GET /metrics``: Prometheus exposition of every worker's metrics (outside the Iceberg spec).

Not exposed through nginx (deploy/nginx.conf); scrape gunicorn's address directly.
"""

from flask import Response

from app.ground.metrics import render


def metrics() -> Response:
    body, content_type = render()
    return Response(body, content_type=content_type)
