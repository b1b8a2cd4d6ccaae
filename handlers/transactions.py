"""Multi-table commits."""

from __future__ import annotations

from app.edge.context import services
from app.edge.responses import no_content
from app.rules.requests.tables import CommitTransactionRequest


def commit_transaction(prefix: str, body: CommitTransactionRequest):
    services().tables.commit_transaction(prefix, body)
    return no_content()
