"""Federated warehouses' plain parts (issue 50): the circuit breaker on a test clock, the path and
query rewritten for a remote's prefix and separator, the answers checked (listings filtered by
grants, session keys stripped, garbage refused), and the settings' checks."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from app.federation.answers import AnswerCheck
from app.federation.breaker import CircuitBreaker
from app.federation.cache import MAX_KEPT_BYTES, LoadedTables, keepable
from app.federation.mirror import MirroredWarehouses, mirrored_event, mirrored_page
from app.federation.moved import MovedCopies, written_tables
from app.federation.own_storage import OwnStorageAccess
from app.federation.remote import Answer, RemoteCatalog, RemoteSettings, Route
from app.federation.restricted import RemoteRestrictions
from app.federation.service import FederationService
from app.federation.settings import federation_settings, federation_view
from app.federation.versions import RemoteVersions
from app.ground.errors import BadGateway, BadRequest, Forbidden, Protected, ServiceUnavailable, UnsupportedOperation
from app.ground.secrets import SecretBox
from app.ground.settings import Settings
from app.rules.privileges import EffectiveGrants, Kind, Privilege, Securable
from app.rules.requests.management import FederationSettings
from tests.conftest import TEST_SECRETS_KEY


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_breaker_opens_after_consecutive_failures_and_lets_one_trial_through():
    clock = Clock()
    breaker = CircuitBreaker(threshold=3, cooldown_s=10, clock=clock)
    breaker.failed()
    breaker.failed()
    breaker.succeeded()  # a success resets the count
    breaker.failed()
    breaker.failed()
    assert breaker.refusal() is None
    breaker.failed()
    assert breaker.is_open and breaker.refusal() == 10
    clock.now += 7.5
    assert breaker.refusal() == 3
    clock.now += 3
    assert breaker.refusal() is None  # half open: one trial
    assert breaker.refusal() == 1  # the others wait for it
    breaker.failed()  # the trial failed: open again
    assert breaker.refusal() == 10
    clock.now += 10
    assert breaker.refusal() is None
    breaker.succeeded()
    assert not breaker.is_open and breaker.refusal() is None


def test_a_breaker_needs_a_threshold_and_a_cooldown():
    with pytest.raises(ValueError):
        CircuitBreaker(threshold=0)
    with pytest.raises(ValueError):
        CircuitBreaker(cooldown_s=0)


class Grants:
    """An authorizer that lets the caller see exactly ``visible``."""

    def __init__(self, visible: set[Securable]) -> None:
        self.visible = visible

    def filter(self, items: list[Any], securable_of: Any, privilege: Privilege | None = None) -> list[Any]:
        return [item for item in items if securable_of(item) in self.visible]

    def grants(self) -> EffectiveGrants:
        """No read restrictions (tests/api/test_read_restrictions_federated.py has them)."""
        return EffectiveGrants.build([])


class FakeRemote(RemoteCatalog):
    """A remote whose route is given and whose answers are queued; records what it was sent."""

    def __init__(
        self, answers: list[Answer], read_only: bool = False, separator: str = "%2E", cache_ttl_s: float = 0.0
    ) -> None:
        settings = RemoteSettings("http://remote", "w", read_only=read_only, cache_ttl_s=cache_ttl_s)
        super().__init__("fed", settings, None, CircuitBreaker())  # type: ignore[arg-type]
        self.answers = answers
        self.sent: list[tuple[str, str, str, dict[str, str], bytes | None]] = []
        self._separator = separator

    def route(self) -> Route:
        return Route("pfx", self._separator)

    def send(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes | None) -> Answer:
        self.sent.append((method, path, query, headers, body))
        return self.answers.pop(0)


def _answer(status: int, data: Any) -> Answer:
    body = json.dumps(data).encode() if data is not None else b""
    return Answer(status, data, body, {})


class Directory:
    """The warehouse directory's fresh read, which forward() asks before a drop or a rename."""

    def __init__(self, protected: bool = False) -> None:
        self.protected = protected

    def read(self, name: str) -> Any:
        return self.get(name)

    def get(self, name: str) -> Any:
        # no storage access of its own: the remote's passes (app/federation/own_storage.py)
        none = {"credentials-mode": "none"}
        return SimpleNamespace(id=7, name=name, protected=self.protected, storage=none, allowed_locations=())


class Outbox:
    """The change feed's outbox and the tables' versions (storage/federated_versions.py): the events
    a write through Growler recorded, the versions it moved, what loads found."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.versions: dict[Any, str] = {}

    def write(self, warehouse_id: int, events: list[Any], now_at: list[Any], forget: list[Any]) -> None:
        self.events.extend(events)
        self.versions.update({(warehouse_id, kind, entry): location for kind, entry, location in now_at})
        for kind, entry in forget:
            self.versions.pop((warehouse_id, kind, entry), None)

    def remember(self, warehouse_id: int, table: Any, location: str, kind: str = "table") -> None:
        self.versions.setdefault((warehouse_id, kind, table), location)

    def holds(self, warehouse_id: int, table: Any, location: str) -> bool:
        return self.versions.get((warehouse_id, "table", table)) == location

    def observe(self, warehouse_id: int, table: Any, location: str, changed: Any, kind: str = "table") -> bool:
        previous = self.versions.get((warehouse_id, kind, table))
        self.versions[(warehouse_id, kind, table)] = location
        if previous is None or previous == location:
            return False
        self.events.extend(changed(previous))
        return True


class Marks:
    """Protection marks as storage/protection_rows.py reads them for a federated warehouse: the
    warehouse's (its directory's flag), a namespace's (covering what is below it), an object's."""

    def __init__(self, directory: Directory, marked: tuple[tuple[str, tuple[str, ...], str | None], ...] = ()) -> None:
        self.directory = directory
        self.marked = marked

    def federated_protection_of(self, warehouse_id: int, namespace: tuple[str, ...], name: str | None) -> str | None:
        if self.directory.protected:
            return "warehouse fed is protected"
        for kind, levels, marked_name in self.marked:
            if kind == "namespace" and namespace[: len(levels)] == levels:
                return f"namespace {'.'.join(levels)} is protected"
            if kind != "namespace" and (levels, marked_name) == (namespace, name):
                return f"{kind} {'.'.join((*levels, name or ''))} is protected"
        return None


class NoMoves:
    """No table of the warehouse was moved home: every write goes on."""

    def __init__(self) -> None:
        self.asked: list[list[tuple[tuple[str, ...], str]]] = []

    def any_of(self, warehouse_id: int, tables: list[tuple[tuple[str, ...], str]]) -> None:
        self.asked.append(list(tables))


def _service(
    visible: set[Securable] | None = None,
    directory: Directory | None = None,
    events: Outbox | None = None,
    marked: tuple[tuple[str, tuple[str, ...], str | None], ...] = (),
    loaded: LoadedTables | None = None,
) -> FederationService:
    directory = directory or Directory()
    return FederationService(
        directory,  # type: ignore[arg-type]
        AnswerCheck(Grants(visible or set())),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        secrets=None,
        namespace_separator="%1F",
        versions=RemoteVersions(events or Outbox(), MirroredWarehouses()),  # type: ignore[arg-type]
        moved=MovedCopies(NoMoves(), "%1F"),  # type: ignore[arg-type]
        restricted=RemoteRestrictions(Grants(visible or set())),  # type: ignore[arg-type]
        protection=Marks(directory, marked),  # type: ignore[arg-type]
        loaded=loaded or LoadedTables(),
        own_storage=OwnStorageAccess(Settings(database_url=""), None, None),  # type: ignore[arg-type]
    )


def _forward(service: FederationService, remote: FakeRemote, operation: str, method: str, path: str, **values: str):
    headers = {b"authorization": [b"Bearer growler-caller"], b"x-iceberg-access-delegation": [b"vended-credentials"]}
    query = values.pop("query", "").encode()
    return service.forward(remote, operation, method, path, {"prefix": "fed", **values}, query, headers, None)


def test_paths_and_queries_are_rewritten_for_the_remote_and_the_callers_token_stays_home():
    remote = FakeRemote([_answer(200, {"metadata": {}, "metadata-location": "x", "config": {}})])
    spec = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
    _forward(_service(), remote, "loadTable", "GET", spec, namespace="a\x1fb c", table="t/1", query="snapshots=all")
    method, path, query, headers, _ = remote.sent[0]
    assert (method, path, query) == ("GET", "namespaces/a%2Eb%20c/tables/t%2F1", "snapshots=all")
    assert headers == {"x-iceberg-access-delegation": "vended-credentials"}  # never the caller's Authorization
    remote = FakeRemote([_answer(200, {"namespaces": []})], separator="%1F")
    _forward(_service(), remote, "listNamespaces", "GET", "/v1/{prefix}/namespaces", query="parent=a%1Fb&pageSize=5")
    assert remote.sent[0][2] == "parent=a%1Fb&pageSize=5"


@pytest.mark.parametrize(("namespace", "table"), [("a", ".."), ("a", "."), ("a\x1f..", "t"), ("..", "t")])
def test_dot_segments_are_refused_before_the_remote_is_asked(namespace, table):
    remote = FakeRemote([])
    spec = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
    with pytest.raises(BadRequest, match="cannot be a name"):
        _forward(_service(), remote, "dropTable", "DELETE", spec, namespace=namespace, table=table)
    assert remote.sent == []


def test_listings_are_filtered_by_grants_and_session_keys_never_reach_the_client():
    visible = {Securable.of_namespace("fed", ("a",)), Securable.of_entry(Kind.TABLE, "fed", ("a",), "open")}
    service = _service(visible)
    remote = FakeRemote([_answer(200, {"namespaces": [["a"], ["secret"]], "next-page-token": "n"})])
    listed = _forward(service, remote, "listNamespaces", "GET", "/v1/{prefix}/namespaces")
    assert listed.data == {"namespaces": [["a"]], "next-page-token": "n"}
    identifiers = [{"namespace": ["a"], "name": "open"}, {"namespace": ["a"], "name": "hidden"}]
    remote = FakeRemote([_answer(200, {"identifiers": identifiers})])
    listed = _forward(service, remote, "listTables", "GET", "/v1/{prefix}/namespaces/{namespace}/tables", namespace="a")
    assert listed.data == {"identifiers": [{"namespace": ["a"], "name": "open"}]}
    config = {"token": "remote-session", "credential": "id:secret", "s3.endpoint": "http://s3"}
    load = {"metadata": {"format-version": 2}, "metadata-location": "s3://m", "config": config}
    remote = FakeRemote([_answer(200, load)])
    spec = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
    loaded = _forward(service, remote, "loadTable", "GET", spec, namespace="a", table="open")
    assert loaded.data["config"] == {"s3.endpoint": "http://s3"}
    assert b"remote-session" not in loaded.body and b"id:secret" not in loaded.body
    # a remote echoing Growler's own credential under any key: dropped
    echoed = {
        "metadata": {},
        "metadata-location": "s3://m",
        "config": {"header.Authorization": "growler-secret", "s3.region": "eu", "odd": ["a", "list"]},
        "storage-credentials": [{"prefix": "s3://b", "config": {"s3.session-token": "growler-secret", "k": "v"}}],
    }
    remote = FakeRemote([_answer(200, echoed)])
    remote.settings = RemoteSettings("http://remote", "w", auth="bearer", secret="growler-secret")
    loaded = _forward(service, remote, "loadTable", "GET", spec, namespace="a", table="open")
    assert b"growler-secret" not in loaded.body
    assert loaded.data["config"] == {"s3.region": "eu", "odd": ["a", "list"]}
    assert loaded.data["storage-credentials"] == [{"prefix": "s3://b", "config": {"k": "v"}}]


def test_errors_pass_through_and_garbage_is_a_502_that_counts_against_the_breaker():
    service = _service()
    error = {"error": {"message": "Namespace does not exist: x", "type": "NoSuchNamespaceException", "code": 404}}
    remote = FakeRemote([_answer(404, error)])
    answer = _forward(
        service, remote, "loadNamespaceMetadata", "GET", "/v1/{prefix}/namespaces/{namespace}", namespace="x"
    )
    assert answer.status == 404 and answer.data == error
    for bad in (_answer(200, ["a list"]), _answer(500, {"no": "error"}), _answer(200, {"namespaces": [[1]]})):
        remote = FakeRemote([bad])
        with pytest.raises(BadGateway):
            _forward(service, remote, "listNamespaces", "GET", "/v1/{prefix}/namespaces")
        assert remote.breaker._failures == 1
    for status, data in ((302, None), (200, None)):  # a redirect, and an empty body where one is due
        remote = FakeRemote([_answer(status, data)])
        with pytest.raises(BadGateway):
            _forward(service, remote, "listNamespaces", "GET", "/v1/{prefix}/namespaces")
    remote = FakeRemote([_answer(204, None)])
    spec = "/v1/{prefix}/namespaces/{namespace}"
    assert _forward(service, remote, "dropNamespace", "DELETE", spec, namespace="a").status == 204
    remote = FakeRemote([_answer(200, {"metadata-location": "x"})])
    with pytest.raises(BadGateway, match="no metadata"):
        _forward(
            service,
            remote,
            "loadTable",
            "GET",
            "/v1/{prefix}/namespaces/{namespace}/tables/{table}",
            namespace="a",
            table="t",
        )


def test_read_only_and_unsupported_operations_are_refused_before_the_remote_is_asked():
    remote = FakeRemote([], read_only=True)
    with pytest.raises(Forbidden, match="read-only federation"):
        _forward(_service(), remote, "createNamespace", "POST", "/v1/{prefix}/namespaces")
    with pytest.raises(UnsupportedOperation):
        _forward(
            _service(), remote, "listFunctions", "GET", "/v1/{prefix}/namespaces/{namespace}/functions", namespace="a"
        )
    assert remote.sent == []


def test_an_open_breaker_refuses_without_a_request():
    clock = Clock()
    remote = RemoteCatalog("fed", RemoteSettings("http://remote", "w"), None, CircuitBreaker(1, 20, clock))  # type: ignore[arg-type]
    remote.breaker.failed()
    with pytest.raises(ServiceUnavailable) as refused:
        remote.send("GET", "namespaces", "", {}, None)  # no pool: a request would fail differently
    assert refused.value.retry_after == 20 and "failed repeatedly" in refused.value.message


def test_settings_are_checked_and_the_secret_sealed():
    box = SecretBox(TEST_SECRETS_KEY)
    given = FederationSettings.model_validate(
        {"uri": "https://r.example.com/", "warehouse": "w", "auth": {"type": "bearer", "token": "tok"}}
    )
    stored, sealed = federation_settings(given, box)
    assert stored == {
        "uri": "https://r.example.com",
        "warehouse": "w",
        "auth": {"type": "bearer"},
        "read-only": False,
        "timeout-ms": 10_000,
        "cache-ttl-ms": 0,
        "breaker-failures": 5,
        "breaker-cooldown-ms": 30_000,
    }
    assert sealed is not None and box.open(sealed) == {"secret": "tok"}
    assert "tok" not in json.dumps(federation_view(stored, sealed))
    with pytest.raises(BadRequest, match="GROWLER_SECRETS_KEY"):
        federation_settings(given, None)
    with pytest.raises(BadRequest, match="user info"):
        federation_settings(FederationSettings.model_validate({"uri": "https://u:p@r", "warehouse": "w"}), box)


class FakeResponse:
    def __init__(self, status: int, data: Any) -> None:
        self.status = status
        self.headers = {"ETag": '"e1"'} if status == 200 else {}
        self._body = data if isinstance(data, bytes) else json.dumps(data).encode()

    def read(self, limit: int) -> bytes:
        return self._body[:limit]

    def release_conn(self) -> None:
        pass


class FakeHttp:
    """urllib3's PoolManager.request, answering from ``answer(method, url, headers, body)``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[tuple[str, str, dict[str, str], bytes | None]] = []

    def request(self, method: str, url: str, body: bytes | None = None, headers: dict | None = None, **_: Any):
        self.requests.append((method, url, dict(headers or {}), body))
        outcome = self.answer(method, url, headers or {}, body)
        if isinstance(outcome, Exception):
            raise outcome
        return FakeResponse(*outcome)


def test_oauth2_tokens_are_cached_and_renewed_once_on_a_401():
    issued: list[str] = []

    def answer(method: str, url: str, headers: dict[str, str], body: bytes | None):
        if url.endswith("/v1/oauth/tokens"):
            issued.append(f"token-{len(issued) + 1}")
            return 200, {"access_token": issued[-1], "token_type": "bearer", "expires_in": 3600}
        if "/v1/config" in url:
            assert url == "http://remote/api/v1/config?warehouse=my%20wh"
            return 200, {"overrides": {"prefix": "p/1"}, "defaults": {"namespace-separator": "%2E"}}
        if headers.get("Authorization") == "Bearer token-1" and len(issued) == 1 and "tables" in url:
            return 401, {"error": {"message": "expired", "type": "NotAuthorizedException", "code": 401}}
        return 200, {"identifiers": []}

    http = FakeHttp(answer)
    settings = RemoteSettings("http://remote/api", "my wh", auth="oauth2", client_id="c", secret="s3cr3t")
    remote = RemoteCatalog("fed", settings, http, CircuitBreaker())  # type: ignore[arg-type]
    assert remote.send("GET", "namespaces", "", {}, None).data == {"identifiers": []}
    answered = remote.send("GET", "namespaces/a/tables", "pageSize=1", {}, None)
    assert answered.status == 200 and answered.headers == {"ETag": '"e1"'}
    urls = [url for _, url, _, _ in http.requests]
    assert urls.count("http://remote/api/v1/oauth/tokens") == 2  # once, then once more after the 401
    assert "http://remote/api/v1/p/1/namespaces/a/tables?pageSize=1" in urls
    token_bodies = [body for _, url, _, body in http.requests if url.endswith("/oauth/tokens")]
    assert all(b"client_secret=s3cr3t" in (body or b"") for body in token_bodies)
    # the secret goes to the token endpoint only; the catalog's requests carry the token
    catalog_requests = [r for r in http.requests if not r[1].endswith("/oauth/tokens")]
    assert all(
        b"s3cr3t" not in (body or b"") and "s3cr3t" not in str(headers) for _, _, headers, body in catalog_requests
    )
    assert catalog_requests[-1][2]["Authorization"] == "Bearer token-2"
    assert remote.route().separator == "%2E"


def test_a_remote_that_keeps_refusing_the_credential_is_a_502_not_a_401():
    def answer(method: str, url: str, headers: dict[str, str], body: bytes | None):
        if "/v1/config" in url:
            return 200, {"overrides": {}}
        return 401, {"error": {"message": "bad token", "type": "NotAuthorizedException", "code": 401}}

    remote = RemoteCatalog(
        "fed", RemoteSettings("http://r", "w", auth="bearer", secret="t"), FakeHttp(answer), CircuitBreaker()
    )  # type: ignore[arg-type]
    with pytest.raises(BadGateway, match="refused Growler's credential"):
        remote.send("GET", "namespaces", "", {}, None)


def test_connection_failures_are_503s_until_the_breaker_opens():
    from urllib3.exceptions import NewConnectionError

    http = FakeHttp(lambda *args: NewConnectionError(None, "refused"))  # type: ignore[arg-type]
    remote = RemoteCatalog("fed", RemoteSettings("http://r", "w"), http, CircuitBreaker(3, 30))  # type: ignore[arg-type]
    messages = []
    for _ in range(5):
        with pytest.raises(ServiceUnavailable) as refused:
            remote.send("GET", "namespaces", "", {}, None)
        messages.append(refused.value.message)
    assert len(http.requests) == 3  # the breaker answers the last two without asking
    assert "cannot be reached" in messages[0] and "failed repeatedly" in messages[-1]
    assert refused.value.retry_after >= 1


def test_a_protected_warehouse_refuses_drops_and_renames_before_the_remote_is_asked():
    remote = FakeRemote([])
    spec = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
    with pytest.raises(Protected, match="Cannot drop table a.t: warehouse fed is protected"):
        _forward(
            _service(directory=Directory(protected=True)), remote, "dropTable", "DELETE", spec, namespace="a", table="t"
        )
    with pytest.raises(Protected, match="Cannot rename a table in warehouse fed: warehouse fed is protected"):
        _forward(
            _service(directory=Directory(protected=True)), remote, "renameTable", "POST", "/v1/{prefix}/tables/rename"
        )
    assert remote.sent == []


def test_marks_on_a_remote_namespace_or_table_refuse_their_drops_and_renames_and_nothing_else():
    loaded = _answer(200, {"metadata": {"table-uuid": "u"}, "metadata-location": "x", "config": {}})
    remote = FakeRemote([loaded, _answer(204, None), _answer(204, None)])
    spec = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
    service = _service(marked=(("namespace", ("a",), None), ("table", ("b",), "t")))
    with pytest.raises(Protected, match=r"Cannot drop table a.x.t: namespace a is protected; remove the protection"):
        _forward(service, remote, "dropTable", "DELETE", spec, namespace="a\x1fx", table="t")
    with pytest.raises(Protected, match="Cannot drop namespace a: namespace a is protected"):
        _forward(service, remote, "dropNamespace", "DELETE", "/v1/{prefix}/namespaces/{namespace}", namespace="a")
    with pytest.raises(Protected, match="Cannot drop table b.t: table b.t is protected"):
        _forward(service, remote, "dropTable", "DELETE", spec, namespace="b", table="t")
    rename = json.dumps({"source": {"namespace": ["b"], "name": "t"}, "destination": {"namespace": ["b"], "name": "u"}})
    with pytest.raises(Protected, match="Cannot rename table b.t: table b.t is protected"):
        service.forward(
            remote, "renameTable", "POST", "/v1/{prefix}/tables/rename", {"prefix": "fed"}, b"", {}, rename.encode()
        )
    assert remote.sent == []
    _forward(service, remote, "dropTable", "DELETE", spec, namespace="b", table="other")  # unmarked: forwarded
    _forward(service, remote, "dropNamespace", "DELETE", "/v1/{prefix}/namespaces/{namespace}", namespace="ab")
    deleted = [path for method, path, *_ in remote.sent if method == "DELETE"]
    assert deleted == ["namespaces/b/tables/other", "namespaces/ab"]


def test_writes_through_growler_enter_the_change_feed_with_the_remotes_uuids():
    outbox = Outbox()
    service = _service(events=outbox)
    table = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
    created = {"metadata": {"table-uuid": "u-1", "location": "s3://b/t", "schemas": []}, "metadata-location": "m1"}
    remote = FakeRemote([_answer(200, created)])
    body = json.dumps({"name": "t", "schema": {"type": "struct", "fields": []}}).encode()
    service.forward(
        remote,
        "createTable",
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/tables",
        {"prefix": "fed", "namespace": "a"},
        b"",
        {},
        body,
    )
    # a drop: the uuid from a load the remote answers first, then the drop itself
    remote = FakeRemote(
        [_answer(200, {"metadata": {"table-uuid": "u-1"}, "metadata-location": "m1"}), _answer(204, None)]
    )
    _forward(service, remote, "dropTable", "DELETE", table, namespace="a", table="t")
    assert [sent[0] for sent in remote.sent] == ["GET", "DELETE"]
    assert remote.sent[0][1] == remote.sent[1][1] == "namespaces/a/tables/t"
    kinds = [(event.stream, event.operation_type, event.uuid, event.name) for event in outbox.events]
    assert kinds == [(7, "create-table", "u-1", "t"), (7, "drop-table", "u-1", "t")]
    # a refused write (the remote's 409) records nothing; reads record nothing
    remote = FakeRemote([_answer(409, {"error": {"message": "exists", "type": "AlreadyExistsException", "code": 409}})])
    service.forward(
        remote,
        "createNamespace",
        "POST",
        "/v1/{prefix}/namespaces",
        {"prefix": "fed"},
        b"",
        {},
        b'{"namespace": ["a"]}',
    )
    remote = FakeRemote([_answer(200, {"namespaces": []})])
    _forward(service, remote, "listNamespaces", "GET", "/v1/{prefix}/namespaces")
    assert len(outbox.events) == 2


def test_a_write_the_feed_cannot_record_is_a_503_saying_the_remote_made_it():
    class Down(Outbox):
        def write(self, warehouse_id: int, events: list[Any], now_at: list[Any], forget: list[Any]) -> None:
            raise OSError("database down")

    remote = FakeRemote([_answer(200, {"namespace": ["a"], "properties": {}})])
    with pytest.raises(ServiceUnavailable, match="remote catalog made the change"):
        _service(events=Down()).forward(
            remote,
            "createNamespace",
            "POST",
            "/v1/{prefix}/namespaces",
            {"prefix": "fed"},
            b"",
            {},
            b'{"namespace": ["a"]}',
        )


def test_the_writes_that_change_an_existing_table_name_it_and_the_others_do_not():
    """What a moved table's read-only mark looks at (app/federation/moved.py)."""
    values = {"prefix": "fed", "namespace": "a\x1fb", "table": "t"}
    assert written_tables("updateTable", values, None, "%1F") == [(("a", "b"), "t")]
    assert written_tables("dropTable", values, None, "%1F") == [(("a", "b"), "t")]
    rename = {"source": {"namespace": ["a"], "name": "s"}, "destination": {"namespace": ["a"], "name": "d"}}
    assert written_tables("renameTable", {"prefix": "fed"}, rename, "%1F") == [(("a",), "s")]
    changes = {
        "table-changes": [
            {"identifier": {"namespace": ["a"], "name": "x"}, "requirements": [], "updates": []},
            {"identifier": {"namespace": ["b"], "name": "y"}, "requirements": [], "updates": []},
        ]
    }
    assert written_tables("commitTransaction", {"prefix": "fed"}, changes, "%1F") == [(("a",), "x"), (("b",), "y")]
    register = {"name": "t", "metadata-location": "s3://b/m.json"}
    ns = {"prefix": "fed", "namespace": "a"}
    assert written_tables("registerTable", ns, {**register, "overwrite": True}, "%1F") == [(("a",), "t")]
    assert written_tables("registerTable", ns, register, "%1F") == []  # a new name: nothing moved is changed
    assert written_tables("createTable", ns, {"name": "t"}, "%1F") == []
    assert written_tables("renameTable", {"prefix": "fed"}, None, "%1F") == []


def test_a_write_to_a_moved_tables_copy_is_refused_and_names_where_it_went():
    moved = SimpleNamespace(
        source_namespace=("a",),
        source_name="t",
        target_warehouse="home",
        target_namespace=("landed",),
        target_name="t2",
    )

    class Moved(NoMoves):
        def any_of(self, warehouse_id: int, tables: list[tuple[tuple[str, ...], str]]) -> Any:
            super().any_of(warehouse_id, tables)
            return moved

    rows = Moved()
    copies = MovedCopies(rows, "%1F")  # type: ignore[arg-type]
    with pytest.raises(Forbidden, match="moved to warehouse home as landed.t2 and is read-only here"):
        copies.refuse_write(7, "fed", "updateTable", {"namespace": "a", "table": "t"}, {})
    copies.refuse_write(7, "fed", "createNamespace", {}, {"namespace": ["a"]})  # names no table: not asked
    assert rows.asked == [[(("a",), "t")]]


def test_a_version_loaded_that_growler_did_not_write_is_recorded_once_as_an_outside_change():
    """app/federation/versions.py: the first load is remembered, Growler's own commit moves the
    version (its own event only), a load of another version records one update-table by the
    remote, and loads of a version seen ask nothing more."""
    outbox = Outbox()
    service = _service(events=outbox)
    table = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"

    def load(location: str) -> None:
        answer = {"metadata": {"table-uuid": "u-1"}, "metadata-location": location}
        _forward(service, FakeRemote([_answer(200, answer)]), "loadTable", "GET", table, namespace="a", table="t")

    load("m1")
    assert outbox.events == []
    committed = {"metadata": {"table-uuid": "u-1"}, "metadata-location": "m2"}
    service.forward(
        FakeRemote([_answer(200, committed)]),
        "updateTable",
        "POST",
        table,
        {"prefix": "fed", "namespace": "a", "table": "t"},
        b"",
        {},
        b'{"requirements": [], "updates": []}',
    )
    load("m2")  # Growler's own commit: not an outside change
    assert [event.operation_type for event in outbox.events] == ["update-table"]
    load("m3")  # committed on the remote directly
    load("m3")
    outside = outbox.events[1:]
    assert len(outside) == 1
    assert outside[0].actor == {"source": "remote-catalog"}
    assert outside[0].operation["previous-metadata-location"] == "m2"
    assert outside[0].operation["metadata-location"] == "m3"
    assert (outside[0].stream, outside[0].uuid, outside[0].namespace, outside[0].name) == (7, "u-1", ("a",), "t")
    # a drop forgets the table: the next table of that name starts anew, with no event
    _forward(
        service,
        FakeRemote([_answer(200, committed), _answer(204, None)]),
        "dropTable",
        "DELETE",
        table,
        namespace="a",
        table="t",
    )
    load("m9")
    assert [event.operation_type for event in outbox.events[2:]] == ["drop-table"]


# -- the remote's change feed mirrored (app/federation/mirror.py) ----------------------------


def _remote_event(operation: dict, request_id: str = "r1", event_id: str = "e1") -> dict:
    return {"event-id": event_id, "request-id": request_id, "request-event-count": 1, "timestamp-ms": 1,
            "actor": {"principal": "someone"}, "operation": operation}  # fmt: skip


def test_a_remote_event_is_recorded_as_its_own_operation_with_the_remote_as_actor():
    update = {
        "operation-type": "update-table",
        "identifier": {"namespace": ["a", "b"], "name": "t"},
        "table-uuid": "9b2a0c3e-0000-4000-8000-000000000001",
        "metadata-location": "s3://b/t/metadata/2.json",
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    event, moved = mirrored_event(7, _remote_event(update))
    assert (event.stream, event.operation_type, event.object_type) == (7, "update-table", "table")
    assert (event.namespace, event.name, event.uuid) == (("a", "b"), "t", update["table-uuid"])
    assert event.operation == update and event.request_id == "r1" and event.event_id != "e1"
    assert event.actor == {"source": "remote-catalog", "remote-event-id": "e1"}  # not the remote's principal
    assert moved == ((("a", "b"), "t"), "s3://b/t/metadata/2.json")

    rename = {"operation-type": "rename-view", "source": {"namespace": ["a"], "name": "v"},
              "destination": {"namespace": ["c"], "name": "w"}, "view-uuid": "u"}  # fmt: skip
    event, moved = mirrored_event(7, _remote_event(rename))
    assert (event.object_type, event.namespace, event.name, event.uuid, moved) == ("view", ("c",), "w", "u", None)
    event, moved = mirrored_event(7, _remote_event({"operation-type": "drop-namespace", "namespace": ["a"]}))
    assert (event.object_type, event.namespace, event.name, moved) == ("namespace", ("a",), None, None)


@pytest.mark.parametrize(
    "garbage",
    [
        "not an event",
        {"operation": "x"},
        {"operation": {"operation-type": "custom", "custom-type": "x"}},
        {"operation": {"operation-type": "rebuild-galaxy"}},
        {"operation": {"operation-type": "create-table", "identifier": {"namespace": [], "name": "t"}}},
        {"operation": {"operation-type": "create-namespace", "namespace": "a"}},
        {
            "operation": {
                "operation-type": "create-table",
                "identifier": {"namespace": ["a"], "name": "t"},
                "blob": "x" * (1024 * 1024),
            }
        },  # fmt: skip
    ],
)
def test_what_is_not_an_event_growler_can_record_is_passed_over(garbage):
    assert mirrored_event(1, garbage) is None
    assert mirrored_page(1, [garbage], set()).skipped == 1


def test_a_page_passes_over_the_writes_growler_recorded_itself():
    create = {"operation-type": "create-table", "identifier": {"namespace": ["a"], "name": "t"},
              "table-uuid": "u", "metadata-location": "s3://b/t/metadata/1.json"}  # fmt: skip
    own = _remote_event({"operation-type": "create-namespace", "namespace": ["a"]}, request_id="growler-req")
    page = mirrored_page(3, [own, _remote_event(create, request_id="outside")], {"growler-req"})
    assert [event.operation_type for event in page.events] == ["create-table"] and page.skipped == 0
    assert page.versions == [((("a",), "t"), "s3://b/t/metadata/1.json")]


# -- kept loadTable answers (app/federation/cache.py) -------------------------------------------

LOAD = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"


def _load(service: FederationService, remote: FakeRemote, **headers: str) -> Answer:
    sent = {name.replace("_", "-").encode(): [value.encode()] for name, value in headers.items()}
    values = {"prefix": "fed", "namespace": "db", "table": "t"}
    return service.forward(remote, "loadTable", "GET", LOAD, values, b"", sent, None)


def _loaded(location: str, etag: str | None = '"v1"', **extra: Any) -> Answer:
    data = {"metadata-location": location, "metadata": {"table-uuid": "u"}, "config": {}, **extra}
    return Answer(200, data, json.dumps(data).encode(), {"ETag": etag} if etag else {})


def test_a_kept_answer_is_validated_with_its_etag_and_a_304_serves_it():
    remote = FakeRemote([_loaded("s3://b/t/m1.json"), Answer(304, None, b"", {"ETag": '"v1"'})])
    service = _service()
    first, second = _load(service, remote), _load(service, remote)
    assert "if-none-match" not in remote.sent[0][3]
    assert remote.sent[1][3]["if-none-match"] == '"v1"'
    assert second.status == 200 and second.data == first.data and second.body == first.body


def test_a_changed_table_is_answered_in_full_and_kept_anew():
    remote = FakeRemote([_loaded("s3://b/t/m1.json"), _loaded("s3://b/t/m2.json", '"v2"'), _loaded("x", None)])
    service = _service()
    _load(service, remote)
    assert _load(service, remote).data["metadata-location"] == "s3://b/t/m2.json"
    _load(service, remote)
    assert remote.sent[2][3]["if-none-match"] == '"v2"'


def test_a_clients_own_validator_is_the_remotes_to_answer():
    remote = FakeRemote([_loaded("s3://b/t/m1.json"), Answer(304, None, b"", {"ETag": '"v1"'})])
    service = _service()
    _load(service, remote)
    answer = _load(service, remote, if_none_match='"theirs"')
    assert remote.sent[1][3]["if-none-match"] == '"theirs"'
    assert (answer.status, answer.body, answer.headers) == (304, b"", {"ETag": '"v1"'})


def test_within_the_ttl_the_remote_is_not_asked_while_the_recorded_version_is_the_kept_one():
    outbox = Outbox()
    remote = FakeRemote([_loaded("s3://b/t/m1.json"), _loaded("s3://b/t/m2.json", '"v2"')], cache_ttl_s=60)
    service = _service(events=outbox)
    _load(service, remote)
    assert _load(service, remote).data["metadata-location"] == "s3://b/t/m1.json"
    assert len(remote.sent) == 1
    # a commit through Growler (any worker) moved the recorded version: the kept answer is not used
    outbox.versions[(7, "table", (("db",), "t"))] = "s3://b/t/m2.json"
    assert _load(service, remote).data["metadata-location"] == "s3://b/t/m2.json"
    assert len(remote.sent) == 2 and remote.sent[1][3]["if-none-match"] == '"v1"'


def test_past_the_ttl_or_without_one_the_remote_is_asked():
    clock = Clock()
    remote = FakeRemote(
        [_loaded("s3://b/t/m1.json"), Answer(304, None, b"", {}), Answer(304, None, b"", {})], cache_ttl_s=5
    )
    service = _service(loaded=LoadedTables(clock))
    _load(service, remote)
    clock.now += 4.9
    _load(service, remote)
    assert len(remote.sent) == 1
    clock.now += 0.2
    _load(service, remote)
    assert len(remote.sent) == 2
    clock.now += 4.9  # the 304 confirmed it: fresh again
    _load(service, remote)
    assert len(remote.sent) == 2


def test_answers_with_credentials_or_too_large_are_not_kept():
    assert keepable(_loaded("m"))
    assert not keepable(_loaded("m", **{"storage-credentials": [{"prefix": "s3://b/", "config": {"x": "y"}}]}))
    assert not keepable(_loaded("m", config={"s3.session-token": "t"}))
    assert not keepable(_loaded("m", config={"s3.secret-access-key": "k"}))
    assert not keepable(_loaded("m", padding="x" * MAX_KEPT_BYTES))
    vended = _loaded("m", config={"s3.access-key-id": "a"})
    remote = FakeRemote([vended, vended])
    service = _service()
    _load(service, remote)
    _load(service, remote)
    assert "if-none-match" not in remote.sent[1][3]


def test_a_kept_answer_is_per_query_and_access_delegation():
    remote = FakeRemote([_loaded("m"), _loaded("m")])
    service = _service()
    _load(service, remote)
    _load(service, remote, x_iceberg_access_delegation="remote-signing")
    assert "if-none-match" not in remote.sent[1][3]


def test_a_mirrored_warehouses_load_remembers_a_version_for_kept_answers_and_records_no_event():
    outbox, mirrored = Outbox(), MirroredWarehouses()
    mirrored.found(frozenset({7}))
    versions = RemoteVersions(outbox, mirrored)  # type: ignore[arg-type]
    versions.loaded(7, (("db",), "t"), {"metadata-location": "s3://b/t/m1.json", "metadata": {}})
    versions.loaded(7, (("db",), "t"), {"metadata-location": "s3://b/t/m2.json", "metadata": {}})
    assert outbox.events == []  # the mirror records changes, not the loads
    assert outbox.versions == {(7, "table", (("db",), "t")): "s3://b/t/m1.json"}  # remembered once, moved by the mirror


def test_a_remotes_breaker_and_cache_settings_are_the_warehouses():
    given = FederationSettings.model_validate(
        {"uri": "https://r.example.com", "warehouse": "w", "cache-ttl-ms": 5000, "breaker-failures": 2,
         "breaker-cooldown-ms": 90_000}
    )  # fmt: skip
    stored, _ = federation_settings(given, None)
    view = federation_view(stored, None)
    assert (view["cache-ttl-ms"], view["breaker-failures"], view["breaker-cooldown-ms"]) == (5000, 2, 90_000)
    row = SimpleNamespace(id=3, name="fed", federation=stored, federation_secret=None)
    made: list[tuple[int, float]] = []

    def breaker(threshold: int, cooldown_s: float) -> CircuitBreaker:
        made.append((threshold, cooldown_s))
        return CircuitBreaker(threshold, cooldown_s)

    service = FederationService(
        Directory(),  # type: ignore[arg-type]
        AnswerCheck(Grants(set())),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        secrets=None,
        namespace_separator="%1F",
        versions=RemoteVersions(Outbox(), MirroredWarehouses()),  # type: ignore[arg-type]
        moved=MovedCopies(NoMoves(), "%1F"),  # type: ignore[arg-type]
        restricted=RemoteRestrictions(Grants(set())),  # type: ignore[arg-type]
        protection=Marks(Directory()),  # type: ignore[arg-type]
        loaded=LoadedTables(),
        own_storage=OwnStorageAccess(Settings(database_url=""), None, None),  # type: ignore[arg-type]
        breaker=breaker,
    )
    remote = service._remote(row)  # type: ignore[arg-type]
    assert made == [(2, 90.0)] and remote.settings.cache_ttl_s == 5.0


def test_growlers_own_reads_never_take_a_kept_answer_the_remote_did_not_confirm():
    """A move registers the metadata location it reads: within the TTL it still asks the remote
    (a 304 to the kept ETag confirms the kept answer; a new answer replaces it)."""
    outbox = Outbox()
    remote = FakeRemote([_loaded("s3://b/t/m1.json"), _loaded("s3://b/t/m2.json", '"v2"')], cache_ttl_s=60)
    service = _service(events=outbox)
    _load(service, remote)
    values = {"prefix": "fed", "namespace": "db", "table": "t"}
    current = service.forward(remote, "loadTable", "GET", LOAD, values, b"", {}, None, within_ttl=False)
    assert current.data["metadata-location"] == "s3://b/t/m2.json"
    assert len(remote.sent) == 2 and remote.sent[1][3]["if-none-match"] == '"v1"'


def test_kept_answers_stay_within_their_byte_budget_least_recently_used_first():
    tables = LoadedTables(budget=3 * len(_loaded("m").body))
    for name in ("a", "b", "c"):
        tables.keep((7, ("db",), name), ("", ""), _loaded("m"))
    assert tables.kept((7, ("db",), "a"), ("", "")) is not None  # a used again: b is the oldest now
    tables.keep((7, ("db",), "d"), ("", ""), _loaded("m"))
    assert [tables.kept((7, ("db",), n), ("", "")) is not None for n in "abcd"] == [True, False, True, True]
    assert tables.kept_bytes == 3 * len(_loaded("m").body)
    tables.keep((7, ("db",), "a"), ("", ""), _loaded("m", config={"s3.session-token": "t"}))  # not keepable
    assert tables.kept((7, ("db",), "a"), ("", "")) is None and tables.kept_bytes == 2 * len(_loaded("m").body)


def test_growlers_own_storage_access_serves_only_the_folders_inside_the_allowed_locations():
    own = OwnStorageAccess(Settings(database_url=""), None, None)  # type: ignore[arg-type]
    row = SimpleNamespace(allowed_locations=("s3://lake/remote",), storage={"credentials-mode": "remote-signing"})

    def load(location: str, metadata_location: str | None = None, **properties: str) -> dict[str, Any]:
        found = {"metadata": {"location": location, "properties": properties}}
        return {**found, "metadata-location": metadata_location} if metadata_location else found

    assert own.roots(row, load("s3://lake/remote/db/t", "s3://lake/remote/db/t/metadata/v1.json")) == [
        "s3://lake/remote/db/t",
        "s3://lake/remote/db/t/metadata",
    ]
    # a data path or metadata folder elsewhere (another warehouse's) is not Growler's to serve
    elsewhere = load("s3://lake/remote/db/t", "s3://lake/native/t/metadata/v1.json", **{"write.data.path": "s3://x/d"})
    assert own.roots(row, elsewhere) == ["s3://lake/remote/db/t"]
    # a table outside: the remote's answer stands; the allowed folder itself is no table's place
    for location in ("s3://lake/native/t", "s3://lake/remote", "s3://lake/remote-2/t", "file:///tmp/t"):
        assert own.roots(row, load(location)) is None, location
    assert own.roots(row, {"metadata": {}}) is None
    assert own.serves(row) and not own.serves(SimpleNamespace(allowed_locations=(), storage=row.storage))


def test_a_view_changed_behind_growlers_back_is_recorded_when_loaded():
    """Views as tables: the first loadView is remembered, a replaceView through Growler moves the
    version with its own event, another version loaded records one update-view by the remote, and
    a drop forgets the view."""
    outbox = Outbox()
    service = _service(events=outbox)
    view = "/v1/{prefix}/namespaces/{namespace}/views/{view}"

    def load(location: str) -> None:
        answer = {"metadata": {"view-uuid": "v-1"}, "metadata-location": location}
        _forward(service, FakeRemote([_answer(200, answer)]), "loadView", "GET", view, namespace="a", view="v")

    load("m1")
    load("m1")
    assert outbox.events == []
    replaced = {"metadata": {"view-uuid": "v-1"}, "metadata-location": "m2"}
    values = {"prefix": "fed", "namespace": "a", "view": "v"}
    body = b'{"requirements": [], "updates": []}'
    service.forward(FakeRemote([_answer(200, replaced)]), "replaceView", "POST", view, values, b"", {}, body)
    load("m2")  # Growler's own replace: not an outside change
    assert [event.operation_type for event in outbox.events] == ["update-view"]
    load("m3")  # replaced on the remote directly
    load("m3")
    (outside,) = outbox.events[1:]
    assert (outside.operation_type, outside.actor, outside.uuid) == ("update-view", {"source": "remote-catalog"}, "v-1")
    assert outside.operation["previous-metadata-location"] == "m2" and outside.operation["metadata-location"] == "m3"
    # a table of the same name is another entry: its versions are its own
    table = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
    answer = {"metadata": {"table-uuid": "t-1"}, "metadata-location": "m3-table"}
    _forward(service, FakeRemote([_answer(200, answer)]), "loadTable", "GET", table, namespace="a", table="v")
    assert len(outbox.events) == 2
