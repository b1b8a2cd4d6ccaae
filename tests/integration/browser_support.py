"""A real browser for the console's tests: Debian's Chromium (``chromium``, ``chromium-driver``,
installed by ``make test`` when missing) driven by Selenium, headless; axe-core (vendored in
tests/integration/vendor) for accessibility checks.

The ``browser`` fixture (tests/integration/conftest.py) opens one session per test with a fresh
profile (no cookie of an earlier test). Without the binaries the test skips, unless
``GROWLER_TEST_BROWSER_REQUIRED`` says they were installed (``make test``): then it fails.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

AXE = Path(__file__).with_name("vendor") / "axe-core-4.14.1" / "axe.min.js"
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


def binaries() -> tuple[str, str]:
    """Chromium's and chromedriver's paths (or the test's skip, or its failure under make test)."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (os.access(chromium, os.X_OK) and os.access(driver, os.X_OK)):
        if os.environ.get("GROWLER_TEST_BROWSER_REQUIRED"):  # make test installed them
            pytest.fail("chromium or chromedriver not found although make test installed them")
        pytest.skip("chromium and chromium-driver are not installed (make test installs them)")
    return chromium, driver


@contextmanager
def chromium_session(profile: Path) -> Iterator[object]:
    """A headless Chromium session with its own profile directory, quit on the way out."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROME_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    session = webdriver.Chrome(service=Service(driver), options=options)
    session.set_page_load_timeout(WAIT_S)
    try:
        yield session
    finally:
        session.quit()


def assert_accessible(browser, page: str) -> None:
    """axe-core finds no serious or critical violation on the page the browser shows."""
    browser.execute_script(AXE.read_text())
    result = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then(r => done(JSON.stringify(r.violations)))"
        ".catch(e => done(JSON.stringify([{id: 'axe-error', impact: 'critical', help: String(e)}])));"
    )
    bad = [(v["id"], v["help"]) for v in json.loads(result) if v.get("impact") in ("serious", "critical")]
    assert bad == [], f"{page}: {bad}"
