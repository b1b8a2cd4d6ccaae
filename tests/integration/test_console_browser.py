"""The console in a real browser (issue 38): Debian's Chromium driven by Selenium against gunicorn
with PostgreSQL and S3, data written by PyIceberg.

One browser session walks the whole story (a browser start costs a second or two): sign in,
warehouse -> namespace -> table, the schema, a chart with one point per snapshot, two snapshots
compared, the preview equal to the rows written, a view, a table undropped from the recycle bin,
the admin page, sign out; axe-core (vendored: tests/integration/vendor) checks each main page
for serious or critical accessibility violations. Screenshots go to ``.test-artifacts/console/`` (GROWLER_TEST_ARTIFACTS
to move them); with GROWLER_CONSOLE_SCREENSHOTS_TO_DOCS=1 the README's two are refreshed in docs/.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET, TEST_CREDENTIAL

REPO = Path(__file__).resolve().parents[2]
AXE = Path(__file__).with_name("vendor") / "axe-core-4.14.1" / "axe.min.js"
NS = ("shop", "sales")
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
WAIT_S = 20


def _binaries() -> tuple[str, str]:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (os.access(chromium, os.X_OK) and os.access(driver, os.X_OK)):
        if os.environ.get("GROWLER_TEST_BROWSER_REQUIRED"):  # make test installed them
            pytest.fail("chromium or chromedriver not found although make test installed them")
        pytest.skip("chromium and chromium-driver are not installed (make test installs them)")
    return chromium, driver


@pytest.fixture
def browser(tmp_path) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = _binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROME_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    session = webdriver.Chrome(service=Service(driver), options=options)
    session.set_page_load_timeout(WAIT_S)
    try:
        yield session
    finally:
        session.quit()


@pytest.fixture
def artifacts() -> Path:
    where = Path(os.environ.get("GROWLER_TEST_ARTIFACTS") or REPO / ".test-artifacts") / "console"
    where.mkdir(parents=True, exist_ok=True)
    return where


def write_data(server) -> list[tuple[str, ...]]:
    """Three appends and a schema change in between (four snapshots, two schema versions), a view."""
    catalog = RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)
    catalog.create_namespace(NS[:1])
    catalog.create_namespace(NS)
    schema = Schema(
        NestedField(1, "id", LongType(), required=False, doc="The order's id"),
        NestedField(2, "category", StringType(), required=False),
        NestedField(3, "amount", DoubleType(), required=False),
    )
    table = catalog.create_table((*NS, "orders"), schema, properties={"owner": "sales-team"})
    rows = [(1, "books", 12.5), (2, "games", 40.0), (3, "books", 7.25)]
    for batch in ([rows[0]], [rows[1]]):
        table.append(
            pa.Table.from_pylist(
                [{"id": i, "category": c, "amount": a} for i, c, a in batch], table.schema().as_arrow()
            )
        )
    with table.update_schema() as update:
        update.add_column("note", StringType(), doc="Free text")
    table = catalog.load_table((*NS, "orders"))
    table.append(
        pa.Table.from_pylist(
            [{"id": 3, "category": "books", "amount": 7.25, "note": "gift"}], table.schema().as_arrow()
        )
    )
    table.append(
        pa.Table.from_pylist([{"id": 4, "category": "toys", "amount": 3.0, "note": None}], table.schema().as_arrow())
    )
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
    return [
        ("1", "books", "12.5", "null"),
        ("2", "games", "40.0", "null"),
        ("3", "books", "7.25", "gift"),
        ("4", "toys", "3.0", "null"),
    ]


def test_the_console_in_a_browser(server, clean_catalog, browser, artifacts) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    written = write_data(server)
    wait = WebDriverWait(browser, WAIT_S)
    axe_source = AXE.read_text()

    def accessible(page: str) -> None:
        browser.execute_script(axe_source)
        result = browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document, {resultTypes: ['violations']}).then(r => done(JSON.stringify(r.violations)))"
            ".catch(e => done(JSON.stringify([{id: 'axe-error', impact: 'critical', help: String(e)}])));"
        )
        bad = [(v["id"], v["help"]) for v in json.loads(result) if v.get("impact") in ("serious", "critical")]
        assert bad == [], f"{page}: {bad}"

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

    # the data preview: the rows written, read by the server under the caller's read privilege
    browser.find_element(By.ID, "preview-link").click()
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
