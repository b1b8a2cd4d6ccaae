"""The PyIceberg table tests' fixtures: a catalog with the namespace ``shop`` (``access_catalog``: each
way PyIceberg reaches storage); ``objects`` (the bucket) is tests/integration/conftest.py's."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.rest import RestCatalog

from tests.conftest import TEST_CREDENTIAL
from tests.integration.pyiceberg_support import NS, new_catalog


@pytest.fixture
def catalog(server, clean_catalog) -> RestCatalog:
    cat = new_catalog(server)
    cat.create_namespace(NS)
    return cat


@pytest.fixture(params=["vended-credentials", "remote-signing"])
def access_catalog(request, server, clean_catalog) -> RestCatalog:
    """The catalog as PyIceberg reaches the default warehouse's storage either way it can: with
    the temporary credentials it asks for by default, or through remote signing when it asks for
    that (the data then goes through its FsspecFileIO and Growler's signer, on one I/O thread:
    ``pyiceberg_io_on_one_thread`` says why)."""
    if request.param == "remote-signing":
        request.getfixturevalue("pyiceberg_io_on_one_thread")
    cat = RestCatalog(
        "growler",
        uri=server.url,
        warehouse=server.warehouse,
        credential=TEST_CREDENTIAL,
        **{"header.X-Iceberg-Access-Delegation": request.param},
    )
    cat.create_namespace(NS)
    return cat
