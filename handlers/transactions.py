"""Multi-table commits."""

from __future__ import annotations

from app.edge.context import no_content, services
from app.rules.requests.tables import CommitTransactionRequest


def commit_transaction(prefix: str, body: CommitTransactionRequest):
    services().tables.commit_transaction(prefix, body)
    return no_content()
