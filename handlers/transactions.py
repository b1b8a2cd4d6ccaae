"""Multi-table commits."""

from app.edge.context import no_content, tables


def commit_transaction(prefix: str, body: dict):
    tables().commit_transaction(prefix, body["table-changes"])
    return no_content()
