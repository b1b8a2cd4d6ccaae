"""What every deleting operation shares (issue 35): the warehouse's policy, who drops, and one
log line and one count per drop, undrop, expiry, purge, protection change and refusal.

The operations themselves are the services' (``Entries.drop_into_bin``, ``TableService.drop_table``,
``ViewService.drop_view``, app/recycle_bin/service.py, app/protection/service.py); each calls ``recorded`` once its
transaction committed, so a change event (issue 36) can be written next to it. A refusal by a
protection mark is counted by ``app.ground.events.refusals_counted``.
"""

from __future__ import annotations

import logging
from typing import Any

from app.ground import metrics
from app.ground.callers import current_principal
from storage.bin_rows import BinDrop
from storage.warehouses import WarehouseRow

log = logging.getLogger("growler.recycle_bin")

SOFT, HARD = "soft", "hard"


def is_soft(warehouse: WarehouseRow) -> bool:
    return warehouse.deletion_policy == SOFT


def caller() -> str | None:
    principal = current_principal.get()
    return principal.name if principal is not None else None


def bin_drop(warehouse: WarehouseRow, purge: bool) -> BinDrop:
    """A soft drop by the caller, kept for the warehouse's retention."""
    return BinDrop(caller(), warehouse.retention_s, purge)


def recorded(action: str, kind: str, policy: str, target: dict[str, Any]) -> None:
    """One log line (logger growler.recycle_bin) and one count of a committed change."""
    metrics.BIN_EVENTS.labels(action, kind, policy).inc()
    log.info("%s %s", action, kind, extra={"fields": {"event": f"bin-{action}", "by": caller(), **target}})


def protection_changed(action: str, kind: str, target: dict[str, Any]) -> None:
    metrics.PROTECTION_EVENTS.labels(action, kind).inc()
    log.info("%s %s", action, kind, extra={"fields": {"event": action, "by": caller(), **target}})
