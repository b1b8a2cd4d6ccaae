"""One pipeline: every operation is read, authorized and called once, by the dispatcher.

app/edge/dispatch.py runs every operation of both yamls through route -> read -> authorize ->
call -> render; there is no second way to answer a request to compare it with. What is left to
check is that each stage happens once: a missing table's 404 reads one row and asks the
authorizer once, a request the compiled reader leaves to connexion's validation calls its
handler once, and a management operation goes the same way, its OPERATIONS row included.
"""

from __future__ import annotations

import re

import pytest
import yaml

from app.authorization import Authorizer
from app.edge.dispatch import Dispatcher
from storage.repository import CatalogRepository
from tests.api.tables_support import PREFIX


@pytest.fixture
def counted(monkeypatch) -> dict[str, list]:
    """Every authorization, row read and handler call, as they happen."""
    seen: dict[str, list] = {"authorize": [], "rows": [], "answers": []}
    authorize, load_entry, answer = Authorizer.authorize, CatalogRepository.load_entry, Dispatcher._answer

    def counting_authorize(self, operation_id, params, body=None, gate=None):
        seen["authorize"].append(operation_id)
        return authorize(self, operation_id, params, body, gate)

    def counting_load_entry(self, *args, **kwargs):
        seen["rows"].append(args[1:])
        return load_entry(self, *args, **kwargs)

    def counting_answer(self, operation, *args):
        seen["answers"].append(operation.operation_id)
        return answer(self, operation, *args)

    monkeypatch.setattr(Authorizer, "authorize", counting_authorize)
    monkeypatch.setattr(CatalogRepository, "load_entry", counting_load_entry)
    monkeypatch.setattr(Dispatcher, "_answer", counting_answer)
    return seen


@pytest.fixture
def namespace(client) -> str:
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["d"]}).status_code == 200
    return "d"


def test_a_missing_table_reads_once_and_is_authorized_once(client, namespace, counted):
    answer = client.get(f"{PREFIX}/namespaces/{namespace}/tables/missing")
    assert answer.status_code == 404
    assert answer.json()["error"]["type"] == "NoSuchTableException"
    assert answer.json()["error"]["message"] == "Table does not exist: d.missing"
    assert counted["authorize"] == ["loadTable"]
    assert len(counted["rows"]) == 1
    assert counted["answers"] == ["loadTable"]


def test_what_the_compiled_reader_leaves_to_connexion_is_called_once(client, namespace, counted):
    """``pageSize=+1``: connexion's coercion (``int``) reads it; the handler runs once, authorized once."""
    answer = client.get(f"{PREFIX}/namespaces", params={"pageSize": "+1"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["namespaces"] == [["d"]]
    assert counted["authorize"] == ["listNamespaces"]
    assert counted["answers"] == ["listNamespaces"]


def test_connexion_s_validation_errors_are_the_dispatcher_s_answer(client, namespace, counted):
    """An undeclared query parameter: connexion's strict validation refuses it, nothing runs."""
    answer = client.get(f"{PREFIX}/namespaces", params={"pageSize": "1", "nope": "x"})
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "BadRequestException"
    assert "nope" in answer.json()["error"]["message"]
    assert counted["authorize"] == []
    assert counted["answers"] == []


def test_a_management_operation_goes_through_the_dispatcher(client, counted):
    answer = client.get("/management/v1/roles")
    assert answer.status_code == 200, answer.text
    assert counted["answers"] == ["listRoles"]
    assert counted["authorize"] == ["listRoles"]  # its OPERATIONS row: the management rights' check


def test_a_head_without_an_operation_of_its_own_is_its_get_without_a_body(client, counted):
    get, head = client.get("/v1/config"), client.head("/v1/config")
    assert get.status_code == head.status_code == 200
    assert head.content == b""
    assert head.headers["Content-Length"] == get.headers["Content-Length"]
    assert counted["answers"] == ["getConfig", "getConfig"]


def test_a_body_is_parsed_into_its_model_once_in_a_thread(client, namespace, counted, monkeypatch):
    """updateTable's body becomes a CommitTableRequest once, in the dispatcher's write pool (never
    on the event loop: a large commit's parse would hold every other request up), whichever
    reader read it: the compiled one, or connexion's (an escaped path, ``%74`` for ``t``)."""
    import threading

    from app.edge.operations import Operation
    from app.rules.requests.tables import CommitTableRequest
    from tests.api.tables_support import create_request

    assert client.post(f"{PREFIX}/namespaces/{namespace}/tables", json=create_request("t")).status_code == 200
    typed, original = [], Operation.typed

    def spy(self, value):
        parsed = original(self, value)
        typed.append((type(parsed), threading.current_thread().name))
        return parsed

    monkeypatch.setattr(Operation, "typed", spy)
    for path in ("t", "%74"):
        body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": path}}]}
        answer = client.post(f"{PREFIX}/namespaces/{namespace}/tables/{path}", json=body)
        assert answer.status_code == 200, answer.text
    assert [model for model, _ in typed] == [CommitTableRequest, CommitTableRequest]
    assert all(thread.startswith("growler-write") for _, thread in typed), typed
    assert counted["answers"] == ["createTable", "updateTable", "updateTable"]


def _concrete(template: str) -> str:
    """A path the template matches: each ``{parameter}`` a plain value (a unit id a number)."""
    return re.sub(r"\{[^}]+\}", lambda m: "7" if m.group(0) == "{unit}" else "x", template)


def test_every_operation_of_every_yaml_has_one_row_and_is_routed_by_the_dispatcher():
    """One table of rules, one way in: every operationId of every yaml under openapi/ has exactly
    one row in ``RULES`` (the catalog's privileges or the management API's rights) and its method
    and path reach it in the dispatcher's route table - nothing is left for connexion's Flask
    handlers. getToken alone has neither handler nor row: the authentication middleware answers
    it in front of the dispatcher (which would answer 406)."""
    from app.authorization import MANAGEMENT_OPERATIONS, OPERATIONS, RULES, Managed
    from app.edge.factory import SPEC_FILE, served_apis
    from app.edge.operations import RouteTable, compile_operations
    from app.edge.resolver import HTTP_METHODS, handlers_of

    served, routes, handled = set(), [], {}
    for spec, base_path, modules in served_apis():
        found = handlers_of(spec, modules)
        handled.update(found)
        routes += compile_operations(spec, found.get, base_path=base_path)
        served |= {(base_path, path) for path in spec["paths"]}
    table = RouteTable(routes)
    declared = {}
    for file in sorted(SPEC_FILE.parent.glob("*.yaml")):
        spec = yaml.safe_load(file.read_text())
        base_path = "/management/v1" if file.name == "management.yaml" else ""
        for path, item in spec["paths"].items():
            assert (base_path, path) in served, f"{file.name} {path} is not served by the dispatcher"
            for method, operation in item.items():
                if method not in HTTP_METHODS:
                    continue
                operation_id = operation["operationId"]
                assert operation_id not in declared, f"{operation_id} declared twice"
                declared[operation_id] = file.name
                matched = table.match(method.upper(), base_path + _concrete(path))
                assert matched is not None, f"{method.upper()} {path} ({operation_id}) is not routed"
                assert matched[0].operation_id == operation_id
    assert {"events.yaml", "management.yaml", "catalog.yaml"} <= set(declared.values())
    assert not set(OPERATIONS) & set(MANAGEMENT_OPERATIONS)  # one row each
    assert set(RULES) == set(declared) - {"getToken"}
    assert {op for op, handler in handled.items() if handler is not None} == set(RULES)
    assert set(MANAGEMENT_OPERATIONS) == {op for op, file in declared.items() if file == "management.yaml"}
    assert all(isinstance(rule, Managed) for rule in MANAGEMENT_OPERATIONS.values())
