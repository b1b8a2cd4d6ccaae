"""The console browses a federated warehouse (issue 50, app/console/federated.py): its namespaces,
tables and views as its remote - Iceberg's own REST catalog server - answers them, under Growler's
grants, through the whole server as a browser reaches it (gunicorn, the auth middleware's session).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import httpx

from tests.api.test_console import sign_in
from tests.api.test_read_restrictions import view_body
from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET
from tests.integration.proc_support import wait_for
from tests.integration.test_federation import (
    SCHEMA,
    SETTLE_S,
    _catalog,
    _create_warehouse,
    _grant,
    new_principal,
)


def _browser(server, client_id: str, secret: str) -> httpx.Client:
    browser = httpx.Client(base_url=server.url, timeout=30)
    signed_in = sign_in(browser, client_id, secret)
    assert signed_in.status_code == 303, signed_in.text
    return browser


def _listed(page: str, list_id: str) -> list[str]:
    found = re.search(rf'id="{list_id}">(.*?)</ul>', page, re.S)
    return [html.unescape(name) for name in re.findall(r">([^<]+)</a></li>", found.group(1))] if found else []


def test_the_console_browses_a_federated_warehouse_as_its_remote_answers_under_growlers_grants(
    server, reference, tmp_path: Path
) -> None:
    federated = _create_warehouse(server, {"uri": reference.url, "warehouse": "remote", "timeout-ms": 5000})
    catalog = _catalog(server, federated)
    catalog.create_namespace("shop", {"owner": "sales"})
    catalog.create_namespace(("shop", "eu"))
    orders = catalog.create_table(("shop", "orders"), schema=SCHEMA)
    catalog.create_table(("shop", "secret"), schema=SCHEMA)

    admin = _browser(server, TEST_CLIENT_ID, TEST_CLIENT_SECRET)
    warehouse = admin.get(f"/ui/w/{federated}")
    assert warehouse.status_code == 200, warehouse.text
    assert _listed(warehouse.text, "namespaces") == ["shop"]
    namespace = admin.get(f"/ui/w/{federated}/namespace", params={"ns": "shop"})
    assert namespace.status_code == 200, namespace.text
    assert _listed(namespace.text, "tables") == ["orders", "secret"]
    assert _listed(namespace.text, "children") == ["eu"]
    assert 'id="federated-note"' in namespace.text and "owner" in namespace.text and "sales" in namespace.text
    table = admin.get(f"/ui/w/{federated}/table", params={"ns": "shop", "name": "orders"})
    assert table.status_code == 200, table.text
    assert str(orders.metadata.table_uuid) in table.text and orders.metadata_location in table.text
    assert 'id="preview-link"' not in table.text  # Growler's keys do not read a remote's files
    missing = admin.get(f"/ui/w/{federated}/table", params={"ns": "shop", "name": "nothing"})
    assert missing.status_code == 404  # the remote's NoSuchTableException, passed on
    view = view_body("recent", "SELECT id FROM shop.orders", "shop")
    created = httpx.post(f"{server.url}/v1/{federated}/namespaces/shop/views", json=view)
    assert created.status_code == 200, created.text
    listed = admin.get(f"/ui/w/{federated}/namespace", params={"ns": "shop"})
    assert _listed(listed.text, "views") == ["recent"]
    view_page = admin.get(f"/ui/w/{federated}/view", params={"ns": "shop", "name": "recent"})
    assert view_page.status_code == 200, view_page.text
    assert "SELECT id FROM shop.orders" in html.unescape(view_page.text)
    assert created.json()["metadata-location"] in view_page.text

    # a principal that may read one table sees that table only, and is refused the other's page
    name, role, secret = new_principal(server)
    _grant(server, role, "read", {"type": "table", "warehouse": federated, "namespace": ["shop"], "name": "orders"})
    reader = _browser(server, name, secret)
    wait_for(
        lambda: _listed(reader.get(f"/ui/w/{federated}/namespace", params={"ns": "shop"}).text, "tables") == ["orders"],
        "the grant to reach the workers",
        SETTLE_S,
    )
    assert _listed(reader.get(f"/ui/w/{federated}").text, "namespaces") == ["shop"]
    assert reader.get(f"/ui/w/{federated}/table", params={"ns": "shop", "name": "orders"}).status_code == 200
    assert reader.get(f"/ui/w/{federated}/table", params={"ns": "shop", "name": "secret"}).status_code == 403
