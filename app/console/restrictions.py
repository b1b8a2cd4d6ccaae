"""Read restrictions in the console (issue 51, docs/read-restrictions.md): a table page's section.

It shows the signed-in principal what it reads of the table when restricted (its own combined
restrictions, from the grants it was decided with) and, to a holder of ``manage-grants`` on the
table, every restriction attached to the table or above it, for whom and by whom: the management
API's listing under the same check, so the console never shows what the API would refuse.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint

from app.console import common
from app.ground.errors import Forbidden
from app.restrictions.service import RestrictionService
from app.rules.privileges import Kind, Securable
from app.rules.restrictions.policies import HIDE, Restrictions


def register(bp: Blueprint) -> None:
    common.TABLE_SECTIONS.append(("restrictions", "console/table_restrictions.html", "Read restrictions"))
    common.SECTION_LOADERS["restrictions"] = _section


def _section(service: RestrictionService, table: Any) -> dict[str, Any] | None:
    securable = Securable.of_entry(Kind.TABLE, table.warehouse, table.levels, table.name)
    mine = common.authorizer().grants().restrictions_on(securable)
    try:
        attached = service.on_table(table.warehouse, table.levels, table.name)
    except Forbidden:
        attached = None
    if mine is None and not attached:
        return None
    return {"mine": _described(mine) if mine is not None else None, "attached": attached}


def _described(restrictions: Restrictions) -> dict[str, Any]:
    """The caller's restrictions as the page words them: each filter as JSON, each column's rule."""
    return {
        "filters": [json.dumps(node, sort_keys=True) for node in restrictions.row_filters],
        "columns": [(rule.name, "hidden" if rule.action == HIDE else rule.action) for rule in restrictions.columns],
    }
