"""Bad input gets a clear 4xx with the Iceberg error body and leaves nothing behind."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.composition.services import services_of

NS = "/v1/test/namespaces"


def namespace_count(db) -> int:
    return db.execute("SELECT count(*) FROM namespace").fetchone()[0]


def assert_iceberg_error(response, status: int, error_type: str | None = None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == status
    assert isinstance(error["message"], str) and error["message"]
    assert "Traceback" not in error["message"]
    if error_type:
        assert error["type"] == error_type


@pytest.mark.parametrize(
    "body",
    [
        b'{"namespace": ["a"',  # truncated
        b"not json at all",
        b'{"namespace": ["a"]}}',
    ],
)
def test_malformed_json(client, db, body):
    response = client.post(NS, content=body, headers={"content-type": "application/json"})
    assert_iceberg_error(response, 400, "BadRequestException")
    assert namespace_count(db) == 0


@pytest.mark.parametrize(
    "body",
    [
        {"namespace": "flat-string"},
        {"namespace": [1, 2]},
        {"namespace": ["ok"], "properties": {"k": 1}},
        {"namespace": ["ok"], "properties": ["k"]},
        {},
        {"namespace": ["ok"], "unknown-field": True},
        [],
    ],
)
def test_wrong_types_and_unknown_fields(client, db, body):
    assert_iceberg_error(client.post(NS, json=body), 400, "BadRequestException")
    assert namespace_count(db) == 0


@pytest.mark.parametrize(
    "levels",
    [[], [""], ["a", ""], ["a\x00b"], ["tab\there"], ["bell\x07"], ["del\x7f"], ["x" * 300]],
)
def test_invalid_namespace_levels(client, db, levels):
    assert_iceberg_error(client.post(NS, json={"namespace": levels}), 400, "BadRequestException")
    assert namespace_count(db) == 0


@pytest.mark.parametrize("path", ["a%1F%1Fb", "%1Fa", "a%1F", "a%00b"])
def test_empty_or_control_levels_in_path(client, path):
    assert_iceberg_error(client.get(f"{NS}/{path}"), 400, "BadRequestException")


def test_ten_megabyte_body_is_refused(client, db):
    big = b'{"namespace": ["big"], "properties": {"k": "' + b"x" * (10 * 1024 * 1024) + b'"}}'
    response = client.post(NS, content=big, headers={"content-type": "application/json"})
    assert_iceberg_error(response, 413)
    assert namespace_count(db) == 0


@pytest.mark.parametrize("size", ["0", "-1", "1000000000", "abc"])
def test_bad_page_size(client, size):
    assert_iceberg_error(client.get(NS, params={"pageToken": "", "pageSize": size}), 400, "BadRequestException")
    assert_iceberg_error(client.get(NS, params={"pageSize": size}), 400, "BadRequestException")


@pytest.mark.parametrize("token", ["!!!", "bm90LWpzb24", "e30", "WzFd"])
def test_bad_page_token(client, token):
    assert_iceberg_error(client.get(NS, params={"pageToken": token}), 400, "BadRequestException")


def test_unknown_query_parameter(client):
    assert_iceberg_error(client.get(NS, params={"bogus": "1"}), 400, "BadRequestException")


def test_unknown_warehouse(client, db):
    assert_iceberg_error(client.post("/v1/nope/namespaces", json={"namespace": ["a"]}), 404, "NoSuchWarehouseException")
    assert namespace_count(db) == 0


@pytest.mark.parametrize(
    "method, path",
    [
        ("POST", "/v1/test//namespaces"),
        ("GET", "/v1//config"),
        ("GET", "/v1/test/namespaces//x"),
        ("DELETE", "/v1/test/namespaces/a//tables/t"),
    ],
)
def test_an_empty_path_segment_is_no_route_not_a_redirect(client, db, method, path):
    """Flask would answer 308 to the path with the slashes merged (no Location, an error body of
    type InternalServerError); every other unknown path is a 404, and so is this one."""
    response = client.request(method, path, json={"namespace": ["a"]} if method == "POST" else None)
    assert_iceberg_error(response, 404, "NotFoundException")
    assert response.json()["error"]["message"] == f"No route for {method} {path}"
    assert "location" not in response.headers
    assert namespace_count(db) == 0


def _with_doubled_leading_slash() -> list[tuple[str, str, dict]]:
    """Every operation of both yamls (and the app's own routes), its path with a doubled leading
    slash: ``//v1/...``, ``//management/v1/...``."""
    from tests.api.test_closed_by_default import CHECKED, request_of

    cases = [("POST", "//v1/oauth/tokens", {"data": {"grant_type": "client_credentials"}})]  # getToken
    for operation in CHECKED:
        url, kwargs = request_of(operation, {"t": "s3://b/t.json", "v": "s3://b/v.json"})
        cases.append((operation.method.upper(), "/" + url, kwargs))
    cases += [(method, "/" + path, {}) for method, path in (("GET", "/healthz"), ("GET", "/readyz"))]
    cases += [("GET", "//metrics", {}), ("GET", "//ui/", {}), ("GET", "///v1/config", {})]
    return cases


DOUBLED = _with_doubled_leading_slash()


@pytest.mark.parametrize("method, path, kwargs", DOUBLED, ids=[f"{m} {p}" for m, p, _ in DOUBLED])
def test_a_doubled_leading_slash_is_no_route_for_every_operation(client, db, method, path, kwargs):
    """``GET //v1/config`` was a 500 ("Working outside of operation context"): werkzeug strips
    leading slashes before it matches, so the request reached connexion's view for /v1/config
    without connexion's routing. Now it is what a path with an empty segment anywhere else is: a
    404 with the Iceberg error body, saying what to fix; nothing runs, nothing is written."""
    # the test client would read "//v1/config" as a URL with host "v1": the path is sent whole
    response = client.request(method, f"http://testserver{path}", **kwargs)
    if method == "HEAD":  # no body to read
        assert response.status_code == 404
        return
    assert_iceberg_error(response, 404, "NotFoundException")
    message = response.json()["error"]["message"]
    assert message.startswith(f"No route for {method} {path.split('?')[0]}: ")
    assert "remove the trailing slash from the catalog URI" in message
    assert namespace_count(db) == 0


def test_a_doubled_leading_slash_without_credentials_is_401_not_500(app, clean_catalog):
    """Authentication runs first, as for any path: no token, 401 (never the 500 of before)."""
    response = app.anonymous_client().get("http://testserver//v1/config")
    assert_iceberg_error(response, 401, "NotAuthorizedException")


def test_unknown_route_and_wrong_method(client):
    assert_iceberg_error(client.get("/v1/test/nothing-here"), 404, "NotFoundException")
    assert_iceberg_error(client.get("/totally/unknown"), 404, "NotFoundException")
    assert_iceberg_error(client.put("/v1/config", json={}), 405, "MethodNotAllowedException")


def test_wrong_content_type(client, db):
    response = client.post(NS, content=b"namespace=a", headers={"content-type": "text/plain"})
    assert 400 <= response.status_code < 500
    assert response.json()["error"]["code"] == response.status_code
    assert namespace_count(db) == 0


def test_unexpected_exception_is_a_500_without_stack_trace(client, app, monkeypatch, caplog):
    service = services_of(app.app).namespaces

    def explode(*_args, **_kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(service, "load_namespace", explode)
    response = client.get(f"{NS}/anything", headers={"X-Request-Id": "req-123"})
    assert_iceberg_error(response, 500, "InternalServerError")
    assert "secret internals" not in response.text
    assert "req-123" in response.json()["error"]["message"]
    assert response.headers["x-request-id"] == "req-123"
    assert any("req-123" in record.getMessage() for record in caplog.records)


def test_request_id_is_generated(client):
    response = client.get("/v1/config")
    assert len(response.headers["x-request-id"]) == 32


@pytest.mark.parametrize("path", [f"{NS}/a%0Ab", f"{NS}/a%0Ab/tables", "/v1/test%0A/namespaces"])
def test_control_characters_in_path(client, path):
    assert_iceberg_error(client.get(path), 400, "BadRequestException")


def test_body_that_is_not_utf8(client, db):
    response = client.post(NS, content=b'{"namespace": ["\xff\xfe"]}', headers={"content-type": "application/json"})
    assert_iceberg_error(response, 400, "BadRequestException")
    assert namespace_count(db) == 0


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("GET", "/v1/config?warehouse=%00", None),
        ("POST", NS, {"namespace": ["x"], "properties": {"k": "a\u0000"}}),
        ("POST", NS, {"namespace": ["x\u0000y"]}),
    ],
)
def test_nul_characters_are_400(client, db, method, path, body):
    response = client.request(method, path, json=body) if body is not None else client.request(method, path)
    assert 400 <= response.status_code < 500, response.text
    assert namespace_count(db) == 0


# Every operation of the catalog and management APIs that takes a JSON body (a valid one here).
BODY_OPERATIONS = [
    ("POST", NS, {"namespace": ["x"]}),
    ("POST", f"{NS}/db/properties", {"updates": {"a": "b"}}),
    ("POST", f"{NS}/db/tables", {"name": "u", "schema": {"type": "struct", "fields": []}}),
    ("POST", f"{NS}/db/register", {"name": "r", "metadata-location": "s3://growler-test-warehouse/x.json"}),
    ("POST", f"{NS}/db/tables/t", {"requirements": [], "updates": []}),
    (
        "POST",
        "/v1/test/tables/rename",
        {"source": {"namespace": ["db"], "name": "t"}, "destination": {"namespace": ["db"], "name": "t2"}},
    ),
    ("POST", f"{NS}/db/tables/t/metrics", {"report-type": "scan-report"}),
    ("POST", "/v1/test/transactions/commit", {"table-changes": []}),
    ("POST", f"{NS}/db/tables/t/sign", {"method": "GET", "uri": "http://x/b/k", "region": "us-east-1", "headers": {}}),
    ("POST", f"{NS}/db/tables/t/plan", {}),
    ("POST", f"{NS}/db/views", {"name": "v"}),
    ("POST", f"{NS}/db/views/v", {"requirements": [], "updates": []}),
    (
        "POST",
        "/v1/test/views/rename",
        {"source": {"namespace": ["db"], "name": "v"}, "destination": {"namespace": ["db"], "name": "v2"}},
    ),
    ("POST", "/management/v1/principals", {"name": "p1"}),
    ("POST", "/management/v1/roles", {"name": "r1"}),
]


@pytest.mark.parametrize("content_type", [None, "", "  "], ids=["missing", "empty", "blank"])
@pytest.mark.parametrize(("method", "path", "body"), BODY_OPERATIONS, ids=[p for _, p, _ in BODY_OPERATIONS])
def test_a_json_body_without_a_content_type_is_400(client, db, method, path, body, content_type):
    import json

    headers = {} if content_type is None else {"content-type": content_type}
    before = (
        db.execute("SELECT count(*) FROM namespace").fetchone()[0],
        db.execute("SELECT count(*) FROM principal").fetchone()[0],
    )
    response = client.request(method, path, content=json.dumps(body).encode(), headers=headers)
    assert_iceberg_error(response, 400, "BadRequestException")
    assert "Content-Type" in response.json()["error"]["message"]
    after = (
        db.execute("SELECT count(*) FROM namespace").fetchone()[0],
        db.execute("SELECT count(*) FROM principal").fetchone()[0],
    )
    assert after == before


@pytest.mark.parametrize(
    "uri",
    ["http://[::1/x", "http://[zz]/b/k", "http://host:99999/b/k", "http://host:port/b/k", "http://[::1]:x/b/k"],
)
def test_a_malformed_uri_to_sign_is_400(client, uri):
    assert client.post(NS, json={"namespace": ["db"]}).status_code == 200
    from tests.api.tables_support import create_request

    assert client.post(f"{NS}/db/tables", json=create_request("t")).status_code == 200
    request = {"method": "GET", "uri": uri, "region": "us-east-1", "headers": {}}
    response = client.post(f"{NS}/db/tables/t/sign", json=request)
    assert_iceberg_error(response, 400, "BadRequestException")


HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
@given(content_type=st.one_of(st.none(), HEADER_TEXT, st.sampled_from(["application/json; charset=x", "*/*"])))
def test_any_content_type_is_never_a_500(client, content_type):
    headers = {} if content_type is None else {"content-type": content_type}
    response = client.post(NS, content=b'{"namespace": ["fuzz"]}', headers=headers)
    assert response.status_code < 500, response.text
    client.delete(f"{NS}/fuzz")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
@given(
    rest=st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=40),
    scheme=st.sampled_from(["http://", "https://", "", "s3://", "http://["]),
    header=HEADER_TEXT,
)
def test_any_uri_or_header_to_sign_is_never_a_500(client, rest, scheme, header):
    if client.head(f"{NS}/db").status_code == 404:
        from tests.api.tables_support import create_request

        assert client.post(NS, json={"namespace": ["db"]}).status_code == 200
        assert client.post(f"{NS}/db/tables", json=create_request("t")).status_code == 200
    request = {"method": "GET", "uri": scheme + rest, "region": "us-east-1", "headers": {"x-amz-meta": [header]}}
    response = client.post(f"{NS}/db/tables/t/sign", json=request)
    assert response.status_code < 500, response.text
