"""Reading a table through views (loadTable's ``referenced-by``, issue 51, docs/read-restrictions.md
"Views"): a view's definer lets a trusted engine read the view's tables for a caller that may read
only the view, with the definer's restrictions on the table applied as well as the caller's.

The definer is whoever last set the view's definition: a writer replacing it becomes the definer
(and its rights are what count), an undropped view has none, and a caller that is not a trusted
engine, or cannot read the outermost view, is refused (403), with nothing of the table answered.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.authz_support import Caller
from tests.api.tables_support import PREFIX, table_url, tables_url
from tests.api.test_read_restrictions import EU_ONLY, PEOPLE, restrict, trust
from tests.api.test_read_restrictions import view_body as restricted_view_body

MANAGEMENT = "/management/v1"
PEOPLE_URL = table_url("people", "hr")


def view_body(name: str, sql: str) -> dict[str, Any]:
    return restricted_view_body(name, sql, "reports")


def through(*views: str) -> dict[str, str]:
    return {"referenced-by": ",".join(f"reports\x1f{view}" for view in views)}


@pytest.fixture
def setting(client, principals) -> dict[str, Caller]:
    """hr.people; a definer that reads it and makes reports.eu_people; a trusted reader of the
    view only; an untrusted one; a writer of the view that cannot read the table."""
    for namespace in (["hr"], ["reports"]):
        assert client.post(f"{PREFIX}/namespaces", json={"namespace": namespace}).status_code == 200
    assert client.post(tables_url("hr"), json={"name": "people", "schema": PEOPLE}).status_code == 200
    callers = {label: principals.new(label) for label in ("definer", "reader", "untrusted", "writer")}
    principals.grant(callers["definer"], "read", "table", "test", ("hr",), "people")
    principals.grant(callers["definer"], "create", "namespace", "test", ("reports",))
    made = callers["definer"].client.post(
        f"{PREFIX}/namespaces/reports/views", json=view_body("eu_people", "SELECT id FROM hr.people")
    )
    assert made.status_code == 200, made.text
    for label in ("reader", "untrusted"):
        principals.grant(callers[label], "read", "view", "test", ("reports",), "eu_people")
    principals.grant(callers["writer"], "write", "view", "test", ("reports",), "eu_people")
    assert trust(client, callers["reader"].name).status_code == 200
    principals.settle()
    return callers


def test_a_trusted_reader_of_the_view_loads_its_table_with_the_definers_restrictions(client, principals, setting):
    reader, definer = setting["reader"], setting["definer"]
    assert reader.client.get(PEOPLE_URL).status_code in (403, 404)  # not its table
    assert restrict(client, ("role", definer.role), _table_of_people(), **{"row-filter": EU_ONLY}).status_code == 200
    principals.settle()

    loaded = reader.client.get(PEOPLE_URL, params=through("eu_people"))
    assert loaded.status_code == 200, loaded.text
    assert loaded.json()["read-restrictions"] == {"required-row-filter": EU_ONLY}
    assert reader.client.get(f"{PEOPLE_URL}/credentials", params=through("eu_people")).status_code == 200
    # the definer's own load carries its restriction; its restriction is not lifted by the view
    assert definer.client.get(PEOPLE_URL).status_code == 403  # restricted, not a trusted engine


def test_refusals_name_the_hop_that_failed_and_answer_nothing_of_the_table(client, principals, setting):
    reader, untrusted = setting["reader"], setting["untrusted"]
    refused = untrusted.client.get(PEOPLE_URL, params=through("eu_people"))
    assert refused.status_code == 403
    assert "only a trusted engine may" in refused.json()["error"]["message"]
    assert "metadata" not in refused.text

    unknown = reader.client.get(PEOPLE_URL, params=through("other_view"))
    assert unknown.status_code == 403
    assert "lacks read on view test:reports.other_view" in unknown.json()["error"]["message"]
    bad = reader.client.get(PEOPLE_URL, params={"referenced-by": "no-separator-here"})
    assert bad.status_code == 400


def test_a_writer_replacing_the_view_becomes_its_definer(client, principals, setting):
    reader, writer = setting["reader"], setting["writer"]
    assert reader.client.get(PEOPLE_URL, params=through("eu_people")).status_code == 200
    replace = {
        "requirements": [],
        "updates": [
            {
                "action": "add-view-version",
                "view-version": {
                    **view_body("eu_people", "SELECT * FROM hr.people")["view-version"],
                    "version-id": 2,
                    "schema-id": 0,
                },
            },
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }
    replaced = writer.client.post(f"{PREFIX}/namespaces/reports/views/eu_people", json=replace)
    assert replaced.status_code == 200, replaced.text
    refused = reader.client.get(PEOPLE_URL, params=through("eu_people"))
    assert refused.status_code == 403
    assert "the definer of reports.eu_people lacks read on table test:hr.people" in refused.json()["error"]["message"]


def test_a_chain_of_views_and_an_undropped_view_without_a_definer(client, principals, setting, db):
    reader, definer = setting["reader"], setting["definer"]
    second = principals.new("definer2")
    principals.grant(second, "read", "view", "test", ("reports",), "eu_people")
    principals.grant(second, "create", "namespace", "test", ("reports",))
    made = second.client.post(f"{PREFIX}/namespaces/reports/views", json=view_body("top", "SELECT * FROM eu_people"))
    assert made.status_code == 200, made.text
    principals.grant(reader, "read", "view", "test", ("reports",), "top")
    assert reader.client.get(PEOPLE_URL, params=through("top", "eu_people")).status_code == 200
    # the outer view's definer must read the inner view: without that grant, the chain breaks there
    principals.revoke(second, "read", "view", "test", ("reports",), "eu_people")
    broken = reader.client.get(PEOPLE_URL, params=through("top", "eu_people"))
    assert broken.status_code == 403
    assert "the definer of reports.top lacks read on view test:reports.eu_people" in broken.json()["error"]["message"]

    assert client.delete(f"{PREFIX}/namespaces/reports/views/eu_people").status_code == 204
    unit = client.get(f"{MANAGEMENT}/warehouses/test/bin").json()["units"][0]["id"]
    assert client.post(f"{MANAGEMENT}/warehouses/test/bin/{unit}/undrop", json={}).status_code == 200
    principals.settle()
    gone = reader.client.get(PEOPLE_URL, params=through("eu_people"))
    assert gone.status_code == 403
    assert "view reports.eu_people has no definer" in gone.json()["error"]["message"]
    assert definer.name not in {row[0] for row in db.execute("SELECT principal FROM view_definer").fetchall()}


def _table_of_people() -> dict[str, Any]:
    return {"type": "table", "namespace": ["hr"], "name": "people"}


def test_a_restriction_on_a_view_holds_for_the_tables_read_through_it(client, principals, setting):
    """A restriction attached to the view (docs/read-restrictions.md "Views"): a trusted engine
    loading the view's table through it gets it with the table's own and the definer's; reading
    the table directly, or through another view, it does not apply."""
    reader, definer = setting["reader"], setting["definer"]
    on_view = {"type": "view", "namespace": ["reports"], "name": "eu_people"}
    policy = {"row-filter": EU_ONLY, "columns": [{"name": "salary", "action": "hide"}]}
    assert restrict(client, ("role", reader.role), on_view, **policy).status_code == 200
    principals.settle()
    loaded = reader.client.get(PEOPLE_URL, params=through("eu_people"))
    assert loaded.status_code == 200, loaded.text
    salary = next(field["id"] for field in PEOPLE["fields"] if field["name"] == "salary")
    assert loaded.json()["read-restrictions"] == {
        "required-row-filter": EU_ONLY,
        "required-column-projections": [{"action": "replace-with-null", "field-id": salary}],
    }
    # the view's restriction is the reader's, read through that view: not the definer's, not elsewhere
    assert definer.client.get(PEOPLE_URL).status_code == 200
    assert "read-restrictions" not in definer.client.get(PEOPLE_URL).json()
    # an untrusted reader with a restriction on the view: refused, nothing of the table
    untrusted = setting["untrusted"]
    assert restrict(client, ("role", untrusted.role), on_view, **policy).status_code == 200
    principals.settle()
    refused = untrusted.client.get(PEOPLE_URL, params=through("eu_people"))
    assert refused.status_code == 403 and "metadata" not in refused.text
