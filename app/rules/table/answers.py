"""What loadTable answers - and createTable, registerTable and updateTable, which answer the same
LoadTableResult - as values, and the ETag of each answer. Pure: no I/O.

The services that answer with a table (loading, committing, creating: app/tables/) build these
values themselves, and the edge renders them (``app.edge.responses.render_table``); kept here,
below every one of them, so that a commit builds its answer without passing through loadTable's
module.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

# The variant of an answer that delegates nothing (``Delegation.variant``, app/storage_access/delegation.py):
# what a commit, a create or a register answers unless the client asked for credentials or signing.
PLAIN = "plain"


@dataclass(frozen=True)
class NotModified:
    """loadTable's answer when the client's ``If-None-Match`` names what it would get (304)."""

    etag: str
    metadata_location: str


@dataclass(frozen=True)
class LoadedTable:
    """What loadTable answers; ``metadata`` is the stored JSON text, not re-parsed
    (``app.edge.responses`` renders it)."""

    metadata_location: str | None
    metadata: str
    config: dict[str, str]
    credentials: list[dict[str, Any]]
    etag: str | None = None
    read_restrictions: dict[str, Any] | None = None  # the spec's, for a restricted trusted engine


def etag_for(metadata_location: str, variant: str) -> str:
    digest = hashlib.sha256(f"{metadata_location}|{variant}".encode()).hexdigest()[:32]
    return f'"{digest}"'


def load_etag(
    metadata_location: str,
    snapshots: str | None,
    delegation: str = PLAIN,
    planning_mode: str | None = None,
    restrictions: str | None = None,
) -> str:
    """loadTable's ETag: the metadata version and what of it the response shows (``snapshots``,
    the delegation's variant, the digest of the read restrictions it carries).

    The configured ``scan-planning-mode`` is in the response's config, so it is part of the tag:
    after a restart with another mode, a client's cached table (and config) is not revalidated.
    """
    variant = f"{snapshots or 'all'}|{delegation}" + (f"|r:{restrictions}" if restrictions else "")
    return etag_for(metadata_location, f"{variant}|{planning_mode}" if planning_mode else variant)


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    candidates = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in candidates or etag in candidates
