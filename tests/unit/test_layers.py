"""The house rules, checked on the source: which layer may import which, no import circles, and
pure rules that load no web framework and no database driver.

The layers, lowest first (docs/design.md):

- ground (``app.ground``): errors, settings, metrics and event-log definitions, limits, locations,
  small utilities. Everything else stands on it.
- rules (``app.rules``): pure metadata and scan-planning rules, no I/O.
- storage (``storage``): SQL and object I/O.
- services (the rest of ``app``): orchestrate the rules, the repository and the object store.
- edge (``app.edge`` and ``handlers``): everything HTTP.

Every import is read from the source (``ast``), including imports inside functions, so an
import deferred to break a circle still counts as one.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "handlers", "storage")

# Module prefix -> layer; the longest matching prefix wins.
LAYERS = {
    "app": "services",
    "app.ground": "ground",
    "app.rules": "rules",
    "storage": "storage",
    "app.edge": "edge",
    "app.composition": "edge",  # the composition root: builds every service (issue 48)
    "app.console": "edge",  # the web console (issue 38): Flask views over the services
    "handlers": "edge",
}
# The allowed directions, written once: a layer may import itself and what is listed here.
MAY_IMPORT = {
    "ground": set(),
    "rules": {"ground"},
    "storage": {"ground"},
    "services": {"ground", "rules", "storage"},
    "edge": {"ground", "rules", "storage", "services"},
}
# What importing the pure rules (and the ground floor under them) must not load.
HEAVY = ("connexion", "flask", "psycopg", "psycopg_pool", "minio", "starlette", "a2wsgi")


def _module_files(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    modules = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = _module_files()


def layer_of(module: str) -> str:
    matches = [prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")]
    return LAYERS[max(matches, key=len)]


def _imports(module: str, path: Path, known: dict[str, Path] | None = None) -> Iterator[tuple[int, str]]:
    """(line, imported module of this code base) for every import statement in the file."""
    known = MODULES if known is None else known
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from app.ground import metrics`` imports the module app.ground.metrics
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                yield node.lineno, name


GRAPH = {module: sorted({name for _, name in _imports(module, path)} - {module}) for module, path in MODULES.items()}


def test_every_module_has_a_layer() -> None:
    assert {layer_of(module) for module in MODULES} <= set(MAY_IMPORT)
    assert "app.tables.service" in MODULES and "storage.repository" in MODULES  # the walk found the code


def test_imports_go_down_the_layers_only() -> None:
    wrong = []
    for module, path in MODULES.items():
        layer = layer_of(module)
        for line, imported in _imports(module, path):
            target = layer_of(imported)
            if target != layer and target not in MAY_IMPORT[layer]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {module} ({layer}) imports {imported} ({target})")
    assert wrong == []


def test_only_the_asgi_entry_imports_the_app_factory() -> None:
    """Handlers and middleware take what they need from the edge's context, never from the factory."""
    importers = sorted(module for module, imported in GRAPH.items() if "app.edge.factory" in imported)
    assert importers == ["app.edge.asgi"]


def _circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, []):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    assert _circles(GRAPH) == []


def test_the_circle_finder_finds_circles() -> None:
    assert _circles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert _circles({"a": ["b"], "b": []}) == []


def test_importing_the_rules_loads_no_web_framework_and_no_database_driver() -> None:
    pure = sorted(module for module in MODULES if layer_of(module) in ("ground", "rules"))
    assert any(module.startswith("app.ground") for module in pure) and "app.rules.table" in pure
    assert "app.rules.scan.planning" in pure  # the scan-planning rules are held to the same
    script = "\n".join(
        [
            "import importlib, sys",
            *(f"importlib.import_module({module!r})" for module in pure),
            f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))",
        ]
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


# -- closed by default (issue 34) ------------------------------------------------------------
#
# Every service that decides who may do what takes its authorizer as a required constructor
# argument. A permissive default (a class attribute, a parameter default, a module-level
# allow-everything instance to fall back on) would let a service wired without one allow
# everything; ``Authorizer.allow_all()`` is the one, named, way to choose that, and in the
# server only where authentication is off.

ALLOW_ALL_CALLERS = {"app.composition.storage"}  # GROWLER_AUTH=none; scripts and benchmarks are outside app/


def _is_authorizer_type(annotation: ast.expr | None) -> bool:
    return annotation is not None and "Authorizer" in ast.unparse(annotation)


def _is_allow_everything(node: ast.expr | None) -> bool:
    """``Authorizer(None)`` (or with no grants repository at all), ``X.allow_all()``, or a name
    such as ``OPEN`` / ``ALLOW_ALL`` that conventionally holds one."""
    if isinstance(node, ast.Name):
        return node.id in ("OPEN", "ALLOW_ALL")
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "allow_all":
        return True
    if isinstance(func, ast.Name) and func.id == "Authorizer":
        first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "repository"), None)
        return first is None or (isinstance(first, ast.Constant) and first.value is None)
    return False


def permissive_authorizers(source: str, where: str = "<source>") -> list[str]:
    """Every place in ``source`` where an allow-everything authorizer would be a default."""
    found = []
    tree = ast.parse(source)
    for node in tree.body:  # a module-level allow-everything instance: a default waiting to be used
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and _is_allow_everything(node.value):
            found.append(f"{where}:{node.lineno}: module-level allow-everything authorizer")
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and item.value is not None and _is_authorizer_type(item.annotation):
                    found.append(f"{where}:{item.lineno}: class {node.name} gives its authorizer a default")
                elif isinstance(item, (ast.Assign, ast.AnnAssign)) and _is_allow_everything(item.value):
                    found.append(f"{where}:{item.lineno}: class {node.name} defaults to an allow-everything authorizer")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = node.args
            positional = [*arguments.posonlyargs, *arguments.args]
            defaulted = list(
                zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults, strict=True)
            )
            defaulted += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d]
            for argument, default in defaulted:
                if argument.arg == "authorizer" or _is_authorizer_type(argument.annotation):
                    found.append(f"{where}:{default.lineno}: parameter {argument.arg} has a default")
                elif _is_allow_everything(default):
                    found.append(f"{where}:{default.lineno}: parameter {argument.arg} defaults to allow everything")
    return found


def authorizers_set_outside_constructors(source: str, where: str = "<source>") -> list[str]:
    """Assignments to ``something.authorizer`` other than, in an ``__init__``, a required
    parameter or the ``.authorizer`` of a required parameter (a service handed in)."""
    found = []

    def visit(node: ast.AST, function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(element, ast.Attribute) and element.attr == "authorizer":
                    if not _from_required_parameter(node.value, function):  # type: ignore[attr-defined]
                        found.append(f"{where}:{node.lineno}: {ast.unparse(element)} set outside a constructor")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), None)
    return found


def _from_required_parameter(value: ast.expr | None, function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> bool:
    if function is None or function.name != "__init__" or value is None:
        return False
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    required = {a.arg for a in positional[: len(positional) - len(arguments.defaults)]}
    required |= {a.arg for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d is None}
    if isinstance(value, ast.Name):
        return value.id in required and value.id == "authorizer"
    if not (isinstance(value, ast.Attribute) and value.attr == "authorizer"):
        return False
    root = value.value  # ``tables.authorizer``, ``signer.tables.authorizer``: a required service's
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id in required


def test_the_authorizer_checks_catch_what_they_are_for() -> None:
    """The two scans below, on sources that do (and do not) fall back to allowing everything."""
    assert permissive_authorizers("class S:\n    authorizer: Authorizer = OPEN\n") != []
    assert permissive_authorizers("class S:\n    authorizer: Authorizer = real\n") != []  # any default
    assert permissive_authorizers("class S:\n    gate = Authorizer(None)\n") != []
    assert permissive_authorizers("OPEN = Authorizer(None)\n") != []
    assert permissive_authorizers("ANYONE = Authorizer.allow_all()\n") != []
    assert permissive_authorizers("def f(a, authorizer=None):\n    pass\n") != []
    assert permissive_authorizers("def f(*, gate: Authorizer = x):\n    pass\n") != []
    assert permissive_authorizers("def f(gate=Authorizer(repository=None)):\n    pass\n") != []
    assert permissive_authorizers("class S:\n    authorizer: Authorizer\n") == []  # declared, no default
    assert permissive_authorizers("def f(a, *, authorizer: Authorizer, b=1):\n    pass\n") == []
    assert permissive_authorizers("x = Authorizer(GrantRepository(db))\n") == []
    set_late = "s = Service()\ns.authorizer = authorizer\n"
    assert authorizers_set_outside_constructors(set_late) != []
    optional = "class S:\n    def __init__(self, authorizer=None):\n        self.authorizer = authorizer\n"
    assert authorizers_set_outside_constructors(optional) != []
    later = "class S:\n    def use(self, authorizer):\n        self.authorizer = authorizer\n"
    assert authorizers_set_outside_constructors(later) != []
    required = "class S:\n    def __init__(self, *, authorizer):\n        self.authorizer = authorizer\n"
    derived = "class S:\n    def __init__(self, tables):\n        self.authorizer: A = tables.authorizer\n"
    assert authorizers_set_outside_constructors(required) == []
    assert authorizers_set_outside_constructors(derived) == []
    deeper = "class S:\n    def __init__(self, signer):\n        self.authorizer = signer.tables.authorizer\n"
    assert authorizers_set_outside_constructors(deeper) == []
    elsewhere = "class S:\n    def __init__(self, signer):\n        self.authorizer = GLOBAL.authorizer\n"
    assert authorizers_set_outside_constructors(elsewhere) != []


def test_no_module_declares_a_permissive_default_authorizer() -> None:
    found = [
        problem
        for path in MODULES.values()
        for problem in permissive_authorizers(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []


def test_authorizers_are_handed_to_constructors_never_assigned_later() -> None:
    """No ``service.authorizer = ...`` after construction: a service is built with its authorizer."""
    found = [
        problem
        for path in MODULES.values()
        for problem in authorizers_set_outside_constructors(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []
    assert "self.authorizer = authorizer" in MODULES["app.namespaces.service"].read_text()  # the scan saw one


def test_allowing_everything_is_chosen_only_where_authentication_is_off() -> None:
    """In the server, ``Authorizer.allow_all()`` is called only by the factory (GROWLER_AUTH=none)."""
    callers = {
        module
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "allow_all"
    }
    assert callers == ALLOW_ALL_CALLERS


def privilege_lists(source: str, names: set[str], where: str = "<source>") -> list[str]:
    """Literal collections (tuple, list, set, dict keys) naming more than one privilege."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            elements = node.keys if isinstance(node, ast.Dict) else node.elts
            listed = {e.value for e in elements if isinstance(e, ast.Constant) and e.value in names}
            if len(listed) > 1:
                found.append(f"{where}:{node.lineno}: {sorted(listed)}")
    return found


def test_the_privilege_list_exists_once() -> None:
    """``Privilege`` (app/rules/privileges.py) is the list; the management API derives its own
    from it (the yaml's enum: tests/unit/test_privileges.py). No module spells the names out again."""
    from app.management.service import PRIVILEGES
    from app.rules.privileges import Privilege

    names = {privilege.value for privilege in Privilege}
    assert PRIVILEGES == tuple(privilege.value for privilege in Privilege)
    assert privilege_lists('PRIVILEGES = ("read", "write")\n', names) != []
    assert privilege_lists('KNOWN = {"read": 1, "manage-grants": 2}\n', names) != []
    assert privilege_lists('NEEDS = ("read", "table")\n', names) == []  # one name is a use, not a list
    spelled_out = [
        problem
        for path in MODULES.values()
        for problem in privilege_lists(path.read_text(), names, str(path.relative_to(ROOT)))
    ]
    assert spelled_out == []


# -- one dispatcher ----------------------------------------------------------------------------

# The only modules that import handler modules: the resolver (by operationId, for the dispatcher)
# and the factory (the Flask app's own routes, outside the APIs: the probes and /metrics).
HANDLER_IMPORTERS = {"app.edge.resolver": None, "app.edge.factory": {"handlers.health", "handlers.metrics"}}


def handler_imports(source: str) -> set[str]:
    """The handler modules a source imports (``import handlers.x``, ``from handlers import x``,
    ``from handlers.x import y``) or names as a string (``importlib.import_module(f"handlers.{m}")``)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("handlers")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("handlers"):
            if node.module == "handlers":
                found |= {f"handlers.{alias.name}" for alias in node.names}
            else:
                found.add(node.module or "")
        elif isinstance(node, ast.JoinedStr) and any(
            isinstance(part, ast.Constant) and str(part.value).startswith("handlers.") for part in node.values
        ):
            found.add("handlers.*")
    return found


def test_only_the_dispatcher_reaches_the_handlers() -> None:
    """Handlers are found by the resolver and called by the dispatcher (app/edge/dispatch.py)
    only: no other module imports them (the factory imports the probes' and /metrics' Flask
    views, which are no API operation), and connexion is given no handler at all."""
    assert handler_imports("from handlers import tables\n") == {"handlers.tables"}
    assert handler_imports("import importlib\nimportlib.import_module(f'handlers.{name}')\n") == {"handlers.*"}
    importers = {
        module: handler_imports(path.read_text())
        for module, path in MODULES.items()
        if not module.startswith("handlers") and handler_imports(path.read_text())
    }
    assert importers.keys() == HANDLER_IMPORTERS.keys()
    assert importers["app.edge.factory"] == HANDLER_IMPORTERS["app.edge.factory"]
    callers = {
        module
        for module, path in MODULES.items()
        if "self.handlers.get(" in path.read_text() or "self.handlers[" in path.read_text()
    }
    assert callers == {"app.edge.dispatch"}


def test_connexion_routes_no_operation_to_a_handler() -> None:
    """Every ``add_api`` gives connexion the resolver whose every operation is ``dispatched``
    (which raises): there is no connexion route to fall back to for an API operation."""
    from app.edge.resolver import DispatchedResolver, dispatched

    calls = [
        (module, node)
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_api"
    ]
    assert calls, "the factory adds the APIs"
    for module, call in calls:
        resolver = next(k.value for k in call.keywords if k.arg == "resolver")
        assert isinstance(resolver, ast.Call) and getattr(resolver.func, "id", None) == "DispatchedResolver", module

    class Named:
        operation_id = "loadTable"

    assert DispatchedResolver().resolve(Named()).function is dispatched


def test_the_dispatcher_routes_every_operation_of_every_yaml_to_itself() -> None:
    """The route table holds every operation of openapi/*.yaml (catalog and management), each
    reached by its own path and method."""
    from app.edge.factory import MANAGEMENT_BASE_PATH, load_management_spec, load_spec
    from app.edge.operations import RouteTable, compile_operations

    for spec, base in ((load_spec(), ""), (load_management_spec(), MANAGEMENT_BASE_PATH)):
        table = RouteTable(compile_operations(spec, lambda _: None, base_path=base))
        for path, item in spec["paths"].items():
            for method, declared in item.items():
                if method in ("get", "put", "post", "delete", "head", "patch"):
                    concrete = base + "/".join("x" if p.startswith("{") else p for p in path.split("/"))
                    found = table.match(method.upper(), concrete)
                    assert found is not None and found[0].operation_id == declared["operationId"], (method, path)


def test_every_body_reaches_its_handler_as_a_model() -> None:
    """Typed at the edge: every operation of every yaml with a JSON body has a handler whose
    ``body`` is annotated with a model, so the dispatcher parses the body into it once and no
    service is handed a raw dict (app/rules/requests)."""
    from app.edge.factory import handlers_of, served_apis
    from app.edge.operations import compile_operations

    untyped = []
    for api_spec, base_path, modules in served_apis():
        found = handlers_of(api_spec, modules)
        for operation in compile_operations(api_spec, found.get, base_path=base_path):
            if operation.has_body and found.get(operation.operation_id) is not None and operation.body_model is None:
                untyped.append(operation.operation_id)
    assert untyped == []


def test_handlers_return_values_and_take_the_request_as_an_argument() -> None:
    """A handler returns a value the dispatcher renders (issue 48) and gets what it needs of the
    request as an argument: no handler module (nor the idempotency replay around them) imports
    Flask's ``request``, ``Response`` or ``make_response``, so no request context is built per call.
    (handlers/metrics.py is /metrics' Flask view, no API operation.)"""
    forbidden = re.compile(r"^from flask import .*\b(request|Response|make_response)\b", re.MULTILINE)
    assert forbidden.search("from flask import Response, request\n")  # the check sees one
    offenders = [
        module
        for module, path in MODULES.items()
        if (module.startswith("handlers.") and module != "handlers.metrics") or module == "app.edge.idempotency"
        if forbidden.search(path.read_text())
    ]
    assert offenders == []
