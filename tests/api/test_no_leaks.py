"""No leaks: page tokens and /v1/config tell a caller nothing of what it may not see.

A caller that sees a subset pages through a namespace holding hidden and visible namespaces and
tables one item at a time: the pages are exactly the visible names, in order, and no token (nor
its base64 decoding, nor any answer) holds a hidden name. Tokens are sealed
(app/ground/page_tokens.py) with the installation's key kept in PostgreSQL, so another app on
the same database (another worker, replica, or the server after a restart) reads them; an
altered token, or one of another listing, is a 400. /v1/config answers a caller that cannot see
a warehouse the same whether the warehouse exists or not.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import pytest

from tests.api.authz_support import PREFIX, WAREHOUSE, Principals, denied
from tests.api.tables_support import create_request

pytestmark = pytest.mark.usefixtures("clean_catalog")

HIDDEN_NAMESPACES = ["b_secret", "d_secret", "zz_secret"]
VISIBLE_NAMESPACES = ["a_open", "c_open", "shared"]
HIDDEN_TABLES = ["t0_secret", "t2_secret", "t3_secret", "t6_secret", "t7_secret"]
VISIBLE_TABLES = ["t1", "t4", "t5"]
HIDDEN = HIDDEN_NAMESPACES + HIDDEN_TABLES + ["n_secret"]


@pytest.fixture(scope="module")
def principals(app, settings):
    made = Principals(app, settings.database_url)
    yield made
    made.close()


@pytest.fixture
def subset(app, principals):
    """The catalog above and a caller that sees a_open, c_open (namespace grants), shared (its
    table grants), the tables t1, t4, t5 of shared and the namespace shared.n_open."""
    admin = app.test_client()
    for namespace in sorted(HIDDEN_NAMESPACES + VISIBLE_NAMESPACES):
        assert admin.post(f"{PREFIX}/namespaces", json={"namespace": [namespace]}).status_code == 200
    for nested in ("m_secret", "n_open", "n_secret", "o_secret"):
        assert admin.post(f"{PREFIX}/namespaces", json={"namespace": ["shared", nested]}).status_code == 200
    for table in sorted(HIDDEN_TABLES + VISIBLE_TABLES):
        created = admin.post(f"{PREFIX}/namespaces/shared/tables", json=create_request(table))
        assert created.status_code == 200, created.text
    caller = principals.new("pager")
    for namespace in ("a_open", "c_open"):
        principals.grant_role(caller.role, "read", *_namespace(namespace))
    principals.grant_role(caller.role, "read", *_namespace("shared", "n_open"))
    for table in VISIBLE_TABLES:
        principals.grant_role(caller.role, "read", "table", WAREHOUSE, ("shared",), table)
    principals.settle()
    return caller


def _namespace(*levels: str) -> tuple[Any, ...]:
    return ("namespace", WAREHOUSE, levels)


def _decodings(token: str) -> list[bytes]:
    """The token and every way of reading it as base64."""
    found = [token.encode()]
    for decode in (base64.urlsafe_b64decode, base64.b64decode):
        try:
            found.append(decode(token + "=" * (-len(token) % 4)))
        except (ValueError, binascii.Error):
            pass
    return found


def _walk(client, url: str, key: str, size: int, **params: str) -> tuple[list[Any], list[str], list[str]]:
    """Every page of a listing: the items in order, the tokens, the answers' texts."""
    items: list[Any] = []
    tokens: list[str] = []
    texts: list[str] = []
    token = ""
    while token is not None:
        response = client.get(url, params={**params, "pageToken": token, "pageSize": size})
        assert response.status_code == 200, response.text
        body = response.json()
        items += body[key]
        texts.append(response.text)
        token = body.get("next-page-token")
        if token is not None:
            assert body[key], "a page with nothing on it, and a token that leads on"
            tokens.append(token)
        assert len(texts) <= 20, "the pages never end"
    return items, tokens, texts


def _assert_no_hidden_name(tokens: list[str], texts: list[str]) -> None:
    for token in tokens:
        for reading in _decodings(token):
            for name in HIDDEN:
                assert name.encode() not in reading, (name, token)
                assert name.encode().hex().encode() not in reading.lower()
    for text in texts:
        for name in HIDDEN:
            assert name not in text, (name, text)


@pytest.mark.parametrize("size", [1, 2])
def test_paging_a_subset_shows_exactly_what_the_caller_sees(subset, size):
    namespaces, ns_tokens, ns_texts = _walk(subset.client, f"{PREFIX}/namespaces", "namespaces", size)
    assert namespaces == [[name] for name in VISIBLE_NAMESPACES]
    nested, nested_tokens, nested_texts = _walk(
        subset.client, f"{PREFIX}/namespaces", "namespaces", size, parent="shared"
    )
    assert nested == [["shared", "n_open"]]
    tables, table_tokens, table_texts = _walk(subset.client, f"{PREFIX}/namespaces/shared/tables", "identifiers", size)
    assert [identifier["name"] for identifier in tables] == VISIBLE_TABLES  # in order, each once
    # a page per `size` visible items, no more: nothing counts the hidden ones between them
    assert len(table_tokens) == -(-len(VISIBLE_TABLES) // size) - 1
    assert len(ns_tokens) == -(-len(VISIBLE_NAMESPACES) // size) - 1
    _assert_no_hidden_name(ns_tokens + nested_tokens + table_tokens, ns_texts + nested_texts + table_texts)


def test_the_admin_pages_through_everything(app, subset):
    admin = app.test_client()
    names, _, _ = _walk(admin, f"{PREFIX}/namespaces/shared/tables", "identifiers", 2)
    assert [identifier["name"] for identifier in names] == sorted(HIDDEN_TABLES + VISIBLE_TABLES)


def test_tampered_and_foreign_tokens_are_refused(app, subset):
    admin = app.test_client()
    url = f"{PREFIX}/namespaces/shared/tables"
    token = admin.get(url, params={"pageToken": "", "pageSize": 2}).json()["next-page-token"]
    assert admin.get(url, params={"pageToken": token, "pageSize": 2}).status_code == 200
    middle = len(token) // 2
    flipped = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
    old_style = base64.urlsafe_b64encode(b'"t1"').decode().rstrip("=")  # the format tokens had before
    for bad in (flipped, token[:-3], token + "AA", old_style):
        for client in (admin, subset.client):
            response = client.get(url, params={"pageToken": bad, "pageSize": 2})
            assert response.status_code == 400, (bad, response.text)
            assert response.json()["error"] == {
                "message": "Invalid pageToken",
                "type": "BadRequestException",
                "code": 400,
            }


def test_a_token_pages_only_the_listing_it_came_from(app, subset):
    admin = app.test_client()
    shared_tables = admin.get(f"{PREFIX}/namespaces/shared/tables", params={"pageToken": "", "pageSize": 1})
    token = shared_tables.json()["next-page-token"]
    for url in (
        f"{PREFIX}/namespaces/a_open/tables",  # the same listing of another namespace
        f"{PREFIX}/namespaces/shared/views",  # another listing of the same namespace
        f"{PREFIX}/namespaces/shared/functions",
        f"{PREFIX}/namespaces",
        f"{PREFIX}/namespaces?parent=shared",
    ):
        path, _, parent = url.partition("?parent=")
        response = admin.get(path, params={"pageToken": token, "pageSize": 1, **({"parent": parent} if parent else {})})
        assert response.status_code == 400 and "Invalid pageToken" in response.text, url
    top = admin.get(f"{PREFIX}/namespaces", params={"pageToken": "", "pageSize": 1}).json()["next-page-token"]
    refused = admin.get(f"{PREFIX}/namespaces", params={"parent": "shared", "pageToken": top, "pageSize": 1})
    assert refused.status_code == 400


def test_a_token_is_read_by_another_worker_and_after_a_restart(app, settings, subset, db):
    """Another app on the same database: a worker of its own, as another replica or the server
    after a restart would be. It loads the one stored key, and hands out the very same tokens."""
    from app.edge.factory import create_app
    from tests.conftest import authenticated

    other = authenticated(create_app(settings)).test_client()
    admin = app.test_client()
    url = f"{PREFIX}/namespaces/shared/tables"
    first = admin.get(url, params={"pageToken": "", "pageSize": 3}).json()
    assert other.get(url, params={"pageToken": "", "pageSize": 3}).json() == first
    following = other.get(url, params={"pageToken": first["next-page-token"], "pageSize": 3})
    assert following.status_code == 200
    assert [i["name"] for i in following.json()["identifiers"]] == sorted(HIDDEN_TABLES + VISIBLE_TABLES)[3:6]
    assert db.execute("SELECT count(*) FROM page_token_key").fetchone()[0] == 1


# -- /v1/config -----------------------------------------------------------------------------


def _answer(response) -> tuple[int, bytes, dict[str, str]]:
    headers = {k.lower(): v for k, v in response.headers.items() if k.lower() not in ("x-request-id", "date")}
    return response.status_code, response.content, headers


def test_config_is_the_same_for_a_missing_and_a_hidden_warehouse(app, principals):
    admin = app.test_client()
    assert admin.post(f"{PREFIX}/namespaces", json={"namespace": ["a"]}).status_code == 200
    nobody = principals.new("nobody")  # no grant at all
    elsewhere = principals.new("elsewhere")  # a grant in the warehouse: it sees it
    principals.grant(elsewhere, "read", "namespace", WAREHOUSE, ("a",))
    missing = "tost"  # as long as "test": the answers differ in nothing but the name asked for
    assert len(missing) == len(WAREHOUSE)
    hidden = nobody.client.get("/v1/config", params={"warehouse": WAREHOUSE})
    absent = nobody.client.get("/v1/config", params={"warehouse": missing})
    assert denied(hidden) and denied(absent)
    status, body, headers = _answer(absent)
    assert _answer(hidden) == (status, body.replace(missing.encode(), WAREHOUSE.encode()), headers)
    # the default warehouse, asked for without a name, is the same answer as by its name
    assert _answer(nobody.client.get("/v1/config")) == _answer(hidden)
    # a caller that sees the warehouse gets its config; a missing one is its 404 (nothing hidden)
    assert elsewhere.client.get("/v1/config", params={"warehouse": WAREHOUSE}).status_code == 200
    seen_missing = elsewhere.client.get("/v1/config", params={"warehouse": missing})
    assert denied(seen_missing)  # it sees the warehouse it holds a grant in, not "tost"
    assert admin.get("/v1/config", params={"warehouse": missing}).status_code == 404


# -- everything else: hidden and missing answered alike -------------------------------------

PLAN = "00000000-0000-0000-0000-000000000000"
SIGN = {"region": "us-east-1", "uri": "http://x/b/k", "method": "GET", "headers": {}}
# (method, url with {ns} and {t}, body): every read and storage-access operation inside a warehouse
INSIDE = [
    ("GET", "{p}/namespaces/{ns}", None),
    ("HEAD", "{p}/namespaces/{ns}", None),
    ("GET", "{p}/namespaces", {"parent": "{ns}"}),
    ("GET", "{p}/namespaces/{ns}/tables", None),
    ("GET", "{p}/namespaces/{ns}/views", None),
    ("GET", "{p}/namespaces/{ns}/functions", None),
    ("GET", "{p}/namespaces/{ns}/functions/{t}", None),
    ("GET", "{p}/namespaces/{ns}/tables/{t}", None),
    ("HEAD", "{p}/namespaces/{ns}/tables/{t}", None),
    ("GET", "{p}/namespaces/{ns}/views/{t}", None),
    ("GET", "{p}/namespaces/{ns}/tables/{t}/credentials", None),
    ("POST", "{p}/namespaces/{ns}/tables/{t}/sign", SIGN),
    ("POST", "{p}/namespaces/{ns}/tables/{t}/plan", {}),
    ("GET", "{p}/namespaces/{ns}/tables/{t}/plan/" + PLAN, None),
    ("POST", "{p}/namespaces/{ns}/tables/{t}/tasks", {"plan-task": f"{PLAN}:1"}),
    ("DELETE", "{p}/namespaces/{ns}/tables/{t}/plan/" + PLAN, None),
]


def _ask(client, method: str, url: str, body: Any, **names: str) -> tuple[int, bytes, dict[str, str]]:
    path = url.format(p=PREFIX, **names)
    if method == "GET" and isinstance(body, dict):  # query parameters
        return _answer(client.get(path, params={k: v.format(**names) for k, v in body.items()}))
    kwargs = {"json": body} if body is not None else {}
    return _answer(client.request(method, path, **kwargs))


@pytest.mark.parametrize(("method", "url", "body"), INSIDE)
def test_hidden_and_missing_are_answered_alike(app, principals, method, url, body):
    """A caller holding a grant elsewhere in the warehouse: for a namespace (and its table) it
    cannot see, the answer is that for a namespace that does not exist, byte for byte (but the
    name); the same for a table it cannot see in a namespace it sees."""
    admin = app.test_client()
    for namespace in ("open", "hide"):
        assert admin.post(f"{PREFIX}/namespaces", json={"namespace": [namespace]}).status_code == 200
        created = admin.post(f"{PREFIX}/namespaces/{namespace}/tables", json=create_request("tab"))
        assert created.status_code == 200, created.text
    caller = principals.new("alike")
    principals.grant(caller, "read", "table", WAREHOUSE, ("open",), "tab")  # sees open, not hide
    hidden = _ask(caller.client, method, url, body, ns="hide", t="tab")
    missing = _ask(caller.client, method, url, body, ns="gone", t="tab")
    assert hidden[0] in (403, 404), hidden
    assert hidden == (missing[0], missing[1].replace(b"gone", b"hide"), missing[2])
    if "{t}" in url:  # a table it cannot see in a namespace it sees, against one that is not there
        assert admin.post(f"{PREFIX}/namespaces/open/tables", json=create_request("sec")).status_code == 200
        hidden = _ask(caller.client, method, url, body, ns="open", t="sec")
        missing = _ask(caller.client, method, url, body, ns="open", t="non")
        assert hidden[0] in (403, 404), hidden
        assert hidden == (missing[0], missing[1].replace(b"non", b"sec"), missing[2])
