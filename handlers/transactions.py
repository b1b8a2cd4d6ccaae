"""Multi-table commits."""

from __future__ import annotations

from app.edge.context import no_content, tables
from app.rules.requests.tables import CommitTransactionRequest


def commit_transaction(prefix: str, body: CommitTransactionRequest):
    tables().commit_transaction(prefix, body)
    return no_content()
