"""Multi-table commits."""

from __future__ import annotations

from app.composition.services import Services
from app.edge.responses import no_content
from app.rules.requests.tables import CommitTransactionRequest


def commit_transaction(services: Services, prefix: str, body: CommitTransactionRequest):
    services.tables.commit_transaction(prefix, body)
    return no_content()
