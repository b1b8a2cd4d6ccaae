"""What each server does beyond the workloads: cheap yes/no checks for the fairness notes, run after
the workloads (the probe changes state)."""

from __future__ import annotations

from typing import Any

from bench.plan import NS_W1, NS_W3, NS_W8_SMALL
from bench.targets import Target, http_json


def probe(target: Target) -> dict[str, bool | None]:
    """Cheap yes/no checks of features around the workloads, for the fairness notes."""
    h = target.headers
    api = target.api
    found: dict[str, bool | None] = {}

    def status(method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        code, hdrs, parsed = http_json(method, api(path), body, headers={**h, **(headers or {})})
        return code, (hdrs, parsed)

    wide = f"namespaces/{NS_W3}/tables/wide"
    code, (hdrs, full) = status("GET", wide)
    found["loadTable ETag + If-None-Match -> 304"] = (
        bool({k.lower() for k in hdrs} & {"etag"})
        and status("GET", wide, headers={"If-None-Match": hdrs.get("ETag") or hdrs.get("etag") or '"x"'})[0] == 304
    )
    found["/v1/config lists its endpoints"] = bool(getattr(target, "config", {}).get("endpoints"))
    code, (_, refs) = status("GET", wide + "?snapshots=refs")
    found["loadTable snapshots=refs"] = bool(
        code == 200
        and full
        and refs
        and len(refs["metadata"].get("snapshots") or []) < len(full["metadata"].get("snapshots") or [])
    )
    code, (_, page) = status("GET", f"namespaces/{NS_W8_SMALL}/tables?pageToken=&pageSize=10")
    found["listTables pagination"] = bool(code == 200 and page and page.get("next-page-token"))
    code, (_, page) = status("GET", "namespaces?pageToken=&pageSize=10")
    found["listNamespaces pagination"] = bool(code == 200 and page and page.get("next-page-token"))
    code, _ = status("POST", "namespaces", {"namespace": [NS_W1, "child"]})
    found["nested namespaces"] = code == 200 and status("GET", f"namespaces?parent={NS_W1}")[0] == 200
    code, _ = status("POST", f"namespaces/{NS_W1}/properties", {"updates": {"k": "v"}, "removals": []})
    found["updateNamespaceProperties"] = code == 200
    code, _ = status("HEAD", wide)
    found["tableExists (HEAD)"] = code in (200, 204)
    code, (hdrs, body) = status("GET", wide, headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    found["vended credentials"] = bool(
        body and (body.get("storage-credentials") or any("secret-access-key" in k for k in (body.get("config") or {})))
    )
    code, _ = status(
        "POST",
        "tables/rename",
        {
            "source": {"namespace": [NS_W8_SMALL], "name": "t099"},
            "destination": {"namespace": [NS_W8_SMALL], "name": "t099_renamed"},
        },
    )
    found["renameTable"] = code == 204
    code, _ = status(
        "POST",
        "transactions/commit",
        {
            "table-changes": [
                {
                    "identifier": {"namespace": [NS_W8_SMALL], "name": "t001"},
                    "requirements": [],
                    "updates": [{"action": "set-properties", "updates": {"bench": "1"}}],
                },
                {
                    "identifier": {"namespace": [NS_W8_SMALL], "name": "t002"},
                    "requirements": [],
                    "updates": [{"action": "set-properties", "updates": {"bench": "1"}}],
                },
            ]
        },
    )
    found["multi-table transactions"] = code in (200, 204)
    code, _ = status("GET", f"namespaces/{NS_W1}/views")
    found["views (listViews)"] = code == 200
    return found
