"""The console in a real browser (issue 38): Debian's Chromium driven by Selenium against gunicorn
with PostgreSQL and S3, the table's data written by Spark (the suite's shared 3.5 driver, started
in the background when collection ends), the view by PyIceberg.

One browser session (the ``browser`` fixture, tests/integration/browser_support.py) walks the
whole story (a browser start costs a second or two): sign in with a client id and secret,
warehouse -> namespace -> table, the schema, a chart with one point per snapshot, two snapshots
compared, the table's change events and maintenance pages, the preview equal to the rows Spark
wrote, a view, a table undropped from the recycle bin, the admin page, sign out; axe-core
(vendored: tests/integration/vendor) checks each main page for serious or critical accessibility
violations. The sign-in through an identity provider (Keycloak) in the same browser:
tests/integration/test_oidc_keycloak.py. Screenshots go to ``.test-artifacts/console/``
(GROWLER_TEST_ARTIFACTS to move them); with GROWLER_CONSOLE_SCREENSHOTS_TO_DOCS=1 the README's two
are refreshed in docs/.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET, TEST_CREDENTIAL
from tests.integration.browser_support import WAIT_S, assert_accessible

REPO = Path(__file__).resolve().parents[2]
NS = ("shop", "sales")
EXPIRY = "system.snapshot-expiry"


@pytest.fixture
def artifacts() -> Path:
    where = Path(os.environ.get("GROWLER_TEST_ARTIFACTS") or REPO / ".test-artifacts") / "console"
    where.mkdir(parents=True, exist_ok=True)
    return where


def write_data(server, line: str) -> list[tuple[str, ...]]:
    """Spark creates the table, appends twice, adds a column, appends twice more (four snapshots,
    two schema versions); PyIceberg makes a view. Returns the rows Spark wrote as the preview shows
    values (text, ``null``)."""
    from tests.integration.spark_support import DRIVERS

    spark, name = DRIVERS.catalog(line, server.url, server.warehouse, credential=TEST_CREDENTIAL)
    table = f"{name}.{'.'.join(NS)}.orders"
    spark.sql(f"CREATE NAMESPACE {name}.{NS[0]}")
    spark.sql(f"CREATE NAMESPACE {name}.{'.'.join(NS)}")
    spark.sql(
        f'CREATE TABLE {table} (id bigint COMMENT "The order\'s id", category string, amount double)'
        " USING iceberg TBLPROPERTIES ('team' = 'sales')"
    )
    rows = [(1, "books", 12.5, None), (2, "games", 40.0, None), (3, "books", 7.25, "gift"), (4, "toys", 3.0, None)]
    for row in rows[:2]:
        spark.sql(f"INSERT INTO {table} VALUES ({row[0]}, '{row[1]}', {row[2]})")
    spark.sql(f"ALTER TABLE {table} ADD COLUMN note string COMMENT 'Free text'")
    for row in rows[2:]:
        note = f"'{row[3]}'" if row[3] is not None else "NULL"
        spark.sql(f"INSERT INTO {table} VALUES ({row[0]}, '{row[1]}', {row[2]}, {note})")
    catalog = RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)
    catalog.create_view(
        (*NS, "big_orders"),
        Schema(NestedField(1, "id", LongType(), required=False)),
        ViewVersion(
            version_id=1,
            schema_id=0,
            timestamp_ms=1_700_000_000_000,
            summary={"engine-name": "spark"},
            representations=[
                ViewRepresentation(
                    SQLViewRepresentation(
                        type="sql", sql="SELECT id FROM shop.sales.orders WHERE amount > 10", dialect="spark"
                    )
                )
            ],
            default_namespace=list(NS),
        ),
    )
    return [tuple("null" if value is None else str(value) for value in row) for row in rows]


def maintain(server) -> int:
    """An expiry policy on the namespace above the table and a dry run of it: what the maintenance
    page shows (through the management API, as the test admin)."""
    policy = {"enable": True, "config": {"min_snapshot_to_keep": 10}}
    securable = {"type": "namespace", "warehouse": server.warehouse, "namespace": [NS[0]]}
    body = {"policy-type": EXPIRY, "securable": securable, "content": policy}
    assert httpx.put(f"{server.url}/management/v1/maintenance/policies", json=body, timeout=30).status_code == 200
    table = (
        f"{server.url}/management/v1/maintenance/warehouses/{server.warehouse}/namespaces/shop%1Fsales/tables/orders"
    )
    run = httpx.post(f"{table}/runs", json={"policy-type": EXPIRY, "dry-run": True}, timeout=60)
    assert run.status_code == 202, run.text  # a job (issue 49): the server's job runner claims it
    location = f"{server.url}{run.headers['Location']}"
    deadline = time.monotonic() + 120
    while httpx.get(location, timeout=30).json()["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, "the dry run never finished"
        threading.Event().wait(0.2)
    return run.json()["id"]


@pytest.mark.parametrize("line", ["3.5"], ids=lambda line: f"spark{line}")
def test_the_console_in_a_browser(server, clean_catalog, browser, artifacts, line) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    written = write_data(server, line)
    run_id = maintain(server)
    wait = WebDriverWait(browser, WAIT_S)

    def accessible(page: str) -> None:
        assert_accessible(browser, page)

    def shot(name: str, height: int = 1000) -> None:
        """The page from its top, ``height`` pixels of it (the README's pictures are tall)."""
        browser.set_window_size(1400, height)
        browser.execute_script("window.scrollTo(0, 0)")
        browser.save_screenshot(str(artifacts / f"{name}.png"))
        if os.environ.get("GROWLER_CONSOLE_SCREENSHOTS_TO_DOCS"):
            browser.save_screenshot(str(REPO / "docs" / f"console-{name}.png"))
        browser.set_window_size(1400, 1000)

    # sign in: any console page sends the browser to the form, and back after it
    browser.get(f"{server.url}/ui/")
    wait.until(ec.presence_of_element_located((By.ID, "sign-in-form")))
    accessible("sign-in")
    browser.find_element(By.ID, "client_id").send_keys(TEST_CLIENT_ID)
    browser.find_element(By.ID, "client_secret").send_keys(TEST_CLIENT_SECRET)
    browser.find_element(By.ID, "sign-in").click()
    assert wait.until(ec.presence_of_element_located((By.ID, "principal"))).text == TEST_CLIENT_ID
    accessible("home")

    # warehouse -> namespace -> child namespace -> table
    browser.find_element(By.LINK_TEXT, server.warehouse).click()
    wait.until(ec.presence_of_element_located((By.ID, "namespaces")))
    browser.find_element(By.LINK_TEXT, "shop").click()
    wait.until(ec.presence_of_element_located((By.ID, "children"))).find_element(By.LINK_TEXT, "sales").click()
    wait.until(ec.presence_of_element_located((By.ID, "tables")))
    accessible("namespace")
    browser.find_element(By.LINK_TEXT, "orders").click()

    # the schema as the table has it now (the column added later included, docs shown)
    schema = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#schema table")))
    rows = [
        [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in schema.find_elements(By.CSS_SELECTOR, "tbody tr")
    ]
    assert [(r[0], r[1].strip(), r[2]) for r in rows] == [
        ("1", "id", "long"),
        ("2", "category", "string"),
        ("3", "amount", "double"),
        ("4", "note", "string"),
    ]
    assert rows[0][4] == "The order's id"
    assert browser.find_element(By.ID, "snapshot-count").text == "4"
    # a chart with one point per snapshot: uPlot drew it from the page's data
    chart = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#chart-total-records canvas")))
    assert chart.is_displayed()
    assert browser.find_element(By.ID, "chart-total-records").get_attribute("data-points") == "4"
    records = browser.execute_script(
        "return JSON.parse(document.getElementById('chart-data').textContent).series[0].values"
    )
    assert records == [1, 2, 3, 4]
    # compare the first and the last snapshot
    snapshots = [o.get_attribute("value") for o in Select(browser.find_element(By.ID, "cmp-a")).options]
    Select(browser.find_element(By.ID, "cmp-a")).select_by_value(snapshots[-1])
    Select(browser.find_element(By.ID, "cmp-b")).select_by_value(snapshots[0])
    browser.find_element(By.ID, "compare-button").click()
    comparison = wait.until(ec.presence_of_element_located((By.ID, "comparison")))
    changed = {
        row.find_element(By.TAG_NAME, "td").text.split(" ")[0]
        for row in comparison.find_elements(By.CSS_SELECTOR, "tr.differs")
    }
    assert "total-records" in changed
    assert "added" in comparison.text and "note" in comparison.text  # the schema change between them
    accessible("table")
    shot("table", 1900)

    # the table's change events: Spark's create and its five commits, in commit order
    browser.find_element(By.ID, "table-events-link").click()
    events = wait.until(ec.presence_of_element_located((By.ID, "events")))
    operations = [cell.text for cell in events.find_elements(By.CSS_SELECTOR, "td.event-op")]
    assert operations == ["create-table"] + ["update-table"] * 5, operations
    assert {cell.text for cell in events.find_elements(By.CSS_SELECTOR, "td.event-object a")} == {"shop.sales.orders"}
    accessible("events")
    shot("events")
    # its maintenance: the namespace's policy in effect, the health report, the dry run
    browser.find_element(By.LINK_TEXT, "shop.sales.orders").click()
    wait.until(ec.presence_of_element_located((By.ID, "table-maintenance-link"))).click()
    effective = wait.until(ec.presence_of_element_located((By.ID, "effective-policies")))
    assert EXPIRY in effective.text and "inherited from the namespace" in effective.text
    assert "4 (0 expirable now)" in browser.find_element(By.ID, "table-health").text
    run = browser.find_element(By.ID, f"run-{run_id}")
    assert "yes" in run.text and run.find_element(By.CSS_SELECTOR, "td.run-status").text
    accessible("maintenance")
    shot("maintenance", 1300)
    browser.find_element(By.LINK_TEXT, "The table's page").click()

    # the data preview: the rows Spark wrote, read by the server under the caller's read privilege
    wait.until(ec.presence_of_element_located((By.ID, "preview-link"))).click()
    preview = wait.until(ec.presence_of_element_located((By.ID, "preview")))
    headers = [th.text for th in preview.find_elements(By.CSS_SELECTOR, "thead th")]
    assert headers == ["id", "category", "amount", "note"]
    shown = [
        tuple(td.text for td in tr.find_elements(By.TAG_NAME, "td"))
        for tr in preview.find_elements(By.CSS_SELECTOR, "tbody tr")
    ]
    assert sorted(shown) == sorted(written)

    # the view: its SQL and schema
    browser.find_element(By.LINK_TEXT, "sales").click()
    wait.until(ec.presence_of_element_located((By.ID, "views"))).find_element(By.LINK_TEXT, "big_orders").click()
    sql = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "code.sql")))
    assert sql.text == "SELECT id FROM shop.sales.orders WHERE amount > 10"
    accessible("view")

    # undrop a table: dropped through the API, back from the bin page's confirmed form, same uuid
    catalog = RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)
    dropped = catalog.create_table((*NS, "old_orders"), Schema(NestedField(1, "id", LongType(), required=False)))
    catalog.drop_table((*NS, "old_orders"))
    browser.find_element(By.LINK_TEXT, "Recycle bin").click()
    wait.until(ec.presence_of_element_located((By.ID, "bin-warehouses"))).find_element(
        By.LINK_TEXT, server.warehouse
    ).click()
    unit = wait.until(ec.presence_of_element_located((By.XPATH, "//tr[td='shop.sales.old_orders']")))
    accessible("bin")
    unit.find_element(By.CSS_SELECTOR, "input[name=confirm]").click()
    unit.find_element(By.CSS_SELECTOR, "form.undrop button").click()
    assert wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "h1"), "old_orders"))
    assert catalog.load_table((*NS, "old_orders")).metadata.table_uuid == dropped.metadata.table_uuid

    # the admin page (the test admin may manage), then sign out
    browser.find_element(By.LINK_TEXT, "Admin").click()
    principals = wait.until(ec.presence_of_element_located((By.ID, "principals")))
    assert TEST_CLIENT_ID in principals.text
    assert "secret-access-key" not in browser.page_source
    # a role, made and granted read on the namespace through the forms (their CSRF tokens)
    browser.find_element(By.ID, "r-name").send_keys("analysts")
    browser.find_element(By.CSS_SELECTOR, "#new-role button").click()
    wait.until(ec.presence_of_element_located((By.ID, "g-priv")))
    Select(browser.find_element(By.ID, "g-priv")).select_by_visible_text("read")
    Select(browser.find_element(By.ID, "g-type")).select_by_visible_text("namespace")
    browser.find_element(By.ID, "g-wh").send_keys(server.warehouse)
    browser.find_element(By.ID, "g-ns").send_keys("shop")
    browser.find_element(By.CSS_SELECTOR, "form.stack button").click()
    # the role page had a (still empty) grants table before the form posted: wait for the new row
    assert wait.until(ec.text_to_be_present_in_element((By.ID, "grants"), "read"))
    accessible("role")
    browser.find_element(By.LINK_TEXT, "Admin").click()
    assert wait.until(ec.text_to_be_present_in_element((By.ID, "roles"), "analysts"))
    accessible("admin")
    shot("admin", 900)
    browser.find_element(By.ID, "sign-out").click()
    wait.until(ec.presence_of_element_located((By.ID, "sign-in-form")))
    browser.get(f"{server.url}/ui/w/{server.warehouse}")
    wait.until(ec.presence_of_element_located((By.ID, "sign-in-form")))
    assert "/ui/sign-in" in browser.current_url
