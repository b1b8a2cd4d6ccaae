"""Multi-table commits."""

from __future__ import annotations

from app.edge.context import tables
from app.edge.responses import no_content
from app.rules.requests.tables import CommitTransactionRequest


def commit_transaction(prefix: str, body: CommitTransactionRequest):
    tables().commit_transaction(prefix, body)
    return no_content()
