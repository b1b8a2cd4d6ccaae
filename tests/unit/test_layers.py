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


# -- wired once, packages by capability (issue 48) ----------------------------------------------

# The benchmark and the scripts stand outside the layers, but are held to having no import circle
# (bench/random_tables.py and bench/workloads.py imported each other: bench/measuring.py now).
TOOLS = ("bench", "scripts")


def test_no_import_circles_in_the_benchmark_and_the_scripts() -> None:
    everything = {**MODULES, **_module_files(TOOLS)}
    assert any(module.startswith("bench.") for module in everything)
    graph = {
        module: sorted({name for _, name in _imports(module, path, everything)} - {module})
        for module, path in everything.items()
    }
    assert _circles(graph) == []


def attributes_wired(source: str, functions: set[str], where: str = "<source>") -> list[str]:
    """Every place that installs behaviour into another object after it was built:
    ``other.attribute = <lambda | x.method | self.part.method>``, a method being a name in
    ``functions`` (the functions the code base defines). Setting one's own attribute
    (``self.x = ...``) or plain data (``lease.next_due_s = self.interval_s``, a name,
    ``changes.last_id = spec.spec_id``) is not. A service is handed its collaborators and
    callbacks at construction (app/composition)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        value = node.value
        behaviour = isinstance(value, ast.Lambda) or (
            isinstance(value, ast.Attribute)
            and value.attr in functions
            and not (isinstance(value.value, ast.Name) and value.value.id in ("self", "cls"))
        )
        if not behaviour:
            continue
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            own = isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
            if isinstance(target, ast.Attribute) and not own:
                found.append(f"{where}:{node.lineno}: {ast.unparse(target)} = {ast.unparse(value)}")
    return found


def test_the_wiring_scan_finds_wiring() -> None:
    """The three wirings issue 48 removed, and what is no wiring."""
    methods = {"store_for", "run_due", "note", "spawn"}
    assert attributes_wired("objects.router = service.warehouses.store_for\n", methods) != []
    assert attributes_wired("housekeeper.maintenance = maintenance.run_due\n", methods) != []
    late = "class E:\n    def __init__(self, tables):\n        tables.after_commit = self.trigger.note\n"
    assert attributes_wired(late, methods) != []
    assert attributes_wired("bench.targets.spawn_logged = lambda argv: spawn(argv)\n", methods) != []
    assert attributes_wired("class S:\n    def __init__(self, t):\n        self.note = t.note\n", methods) == []
    data = "lease.next_due_s = self.interval_s\ncount.commits = 0\nc.flag = flag\nc.last_id = spec.spec_id\n"
    assert attributes_wired(data, methods) == []


def test_nothing_is_wired_by_attribute_after_construction() -> None:
    """No module of the server, the benchmark or the scripts sets a callable or a service on
    another object: every dependency is a constructor argument, so the layer test sees it."""
    everything = {**MODULES, **_module_files(TOOLS)}
    trees = {path: ast.parse(path.read_text()) for path in everything.values()}
    functions = {
        node.name
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assert {"store_for", "run_due", "note"} <= functions
    found = [
        problem
        for path in everything.values()
        for problem in attributes_wired(path.read_text(), functions, str(path.relative_to(ROOT)))
    ]
    assert found == []


# The capabilities of the services floor, each a package of app/ (docs/design.md).
CAPABILITIES = {
    "catalog",
    "tables",
    "views",
    "namespaces",
    "recycle_bin",
    "events",
    "management",
    "storage_access",
    "maintenance",
}
# Single-module capabilities kept flat.
FLAT = {"authorization", "functions", "housekeeping", "idempotency"}


def test_the_services_floor_is_packages_by_capability() -> None:
    """No prefix acts as a folder in app/: its modules are packages by capability or one of the
    few single-module capabilities; the composition root is the one place that builds them."""
    top = {path.stem for path in (ROOT / "app").glob("*.py") if path.stem != "__init__"}
    packages = {path.parent.name for path in (ROOT / "app").glob("*/__init__.py")}
    assert CAPABILITIES <= packages
    families = {stem.split("_")[0] for stem in top} & {stem.split("_")[0] for stem in top if "_" in stem}
    assert families == set(), families
    assert top <= FLAT
    builders = {
        module
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("TableService", "NamespaceService")
    }
    assert builders == {"app.composition.catalog"}


# What a class of app/ may derive from in another module: kinds of values, not services
# (exceptions, Protocols, enums, pydantic models, named tuples); a dataclass base is a value too.
VALUE_BASES = {
    "Exception",
    "BaseException",
    "Protocol",
    "Enum",
    "StrEnum",
    "IntEnum",
    "Flag",
    "BaseModel",
    "RootModel",
    "IcebergBaseModel",  # PyIceberg's pydantic base
    "NamedTuple",
    "TypedDict",
}


def _imported_names(trees: dict[str, ast.Module]) -> dict[str, dict[str, tuple[str, str]]]:
    """Per module, every name a ``from x import y`` statement of it binds: name -> (x, y)."""
    imported: dict[str, dict[str, tuple[str, str]]] = {}
    for module, tree in trees.items():
        names = imported.setdefault(module, {})
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.update({alias.asname or alias.name: (node.module, alias.name) for alias in node.names})
    return imported


def cross_module_bases(sources: dict[str, str]) -> list[str]:
    """``module.Class <- other.Base`` for every class of ``sources`` (module -> text) deriving from a
    class another of them defines, unless that base is a value (``VALUE_BASES``, followed through
    the modules, or a dataclass). A service is composed of parts given at construction: a base
    class in another file spreads one object over several files and hides who sets what."""
    trees = {module: ast.parse(text) for module, text in sources.items()}
    classes = {
        (m, node.name): node for m, tree in trees.items() for node in tree.body if isinstance(node, ast.ClassDef)
    }
    imported = _imported_names(trees)

    def resolve(module: str, base: ast.expr) -> tuple[str, str] | str:
        if isinstance(base, ast.Name):
            if (module, base.id) in classes:
                return module, base.id
            found = imported.get(module, {}).get(base.id)
            return found if found in classes else base.id
        if isinstance(base, ast.Attribute):
            return base.attr
        if isinstance(base, ast.Subscript):
            return resolve(module, base.value)
        return ""

    def is_value(key: tuple[str, str], seen: frozenset = frozenset()) -> bool:
        node = classes[key]
        decorators = {getattr(d.func if isinstance(d, ast.Call) else d, "id", "") for d in node.decorator_list}
        if "dataclass" in decorators or key[1].endswith(("Error", "Exception")):
            return True
        for base in node.bases:
            found = resolve(key[0], base)
            if found in VALUE_BASES or (
                isinstance(found, tuple) and found not in seen and is_value(found, seen | {key})
            ):
                return True
        return False

    return [
        f"{module}.{name} <- {found[0]}.{found[1]}"
        for (module, name), node in classes.items()
        for base in node.bases
        if isinstance(found := resolve(module, base), tuple) and found[0] != module and not is_value(found)
    ]


def test_the_base_class_scan_finds_services_built_on_other_modules() -> None:
    """A service deriving from another module's class is found; values across modules are not."""
    sources = {
        "app.a": "class EntryService:\n    pass\n\nclass NotFound(Exception):\n    pass\n",
        "app.b": "from app.a import EntryService\n\nclass TableService(EntryService):\n    pass\n",
        "app.c": "from app.a import NotFound\n\nclass NoSuchTable(NotFound):\n    pass\n",
        "app.d": "from pydantic import BaseModel\n\nclass Shape(BaseModel):\n    pass\n",
        "app.e": "from app.d import Shape\n\nclass Table(Shape):\n    pass\n\nclass Local(Table):\n    pass\n",
    }
    assert cross_module_bases(sources) == ["app.b.TableService <- app.a.EntryService"]


def test_no_service_derives_from_a_class_of_another_module() -> None:
    """Services are composed of parts passed in at construction (issue 48), never a chain of
    base classes across files: ``TableService`` holds its entries, storage access, loader and
    committer; the management API's rights are a part of every service that checks them."""
    sources = {module: path.read_text() for module, path in MODULES.items() if module.startswith("app")}
    assert cross_module_bases(sources) == []


# -- one file per layer per operation (issue 48) ------------------------------------------------
#
# A newcomer follows an operation by its name: its handler in one handlers/ module, its row in
# the one authorization table (RULES: OPERATIONS and MANAGEMENT_OPERATIONS, a row each), the
# service methods its handler calls each defined in one module, all of one app/ package (the
# operation's capability). Derived from the code: the dispatcher's operation -> handler mapping,
# the rows' dict literals, and the ``Services`` fields the handlers call through, followed to the
# class whose method runs (a service hands out a part's method as its own in its __init__:
# ``self.commit_table = committer.commit_table``).

SERVICES_MODULE = "app.composition.services"
# Answered in front of the dispatcher, by the authentication middleware (app/edge/auth/endpoint.py):
# no handler, no row.
NOT_DISPATCHED = {"getToken"}


def _classes_and_imports(
    trees: dict[str, ast.Module],
) -> tuple[dict[tuple[str, str], ast.ClassDef], dict[str, dict[str, tuple[str, str]]]]:
    classes = {(m, n.name): n for m, tree in trees.items() for n in tree.body if isinstance(n, ast.ClassDef)}
    return classes, _imported_names(trees)


def _class_named(module: str, annotation: ast.expr | None, classes: dict, imported: dict) -> tuple[str, str] | None:
    """The class an annotation names (``TableService``, ``"TableService"``), as (module, name)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if not isinstance(annotation, ast.Name):
        return None
    if (module, annotation.id) in classes:
        return module, annotation.id
    found = imported.get(module, {}).get(annotation.id)
    return found if found in classes else None


def method_homes(
    trees: dict[str, ast.Module], owner: tuple[str, str], method: str, classes: dict, imported: dict
) -> list[str]:
    """The modules whose class defines the method that runs for ``owner.method``: the class's own
    ``def``, or the part's whose method the class hands out in ``__init__`` (``self.m = part.m``,
    ``part`` an annotated parameter). More than one: the method is split across files."""
    node = classes[owner]
    homes = [owner[0]] if any(isinstance(i, ast.FunctionDef) and i.name == method for i in node.body) else []
    init = next((i for i in node.body if isinstance(i, ast.FunctionDef) and i.name == "__init__"), None)
    if init is not None:
        parameters = {a.arg: a.annotation for a in [*init.args.args, *init.args.kwonlyargs]}
        for statement in ast.walk(init):
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
                continue
            target, value = statement.targets[0], statement.value
            if not (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and target.attr == method
                and isinstance(value, ast.Attribute)
                and isinstance(value.value, ast.Name)
            ):
                continue
            part = _class_named(owner[0], parameters.get(value.value.id), classes, imported)
            homes += method_homes(trees, part, value.attr, classes, imported) if part else [f"? {ast.unparse(value)}"]
    return homes


def service_calls(function: ast.FunctionDef) -> list[tuple[str, str]]:
    """(Services field, method) of every ``services.<field>.<method>(...)`` a handler makes."""
    return [
        (node.func.value.attr, node.func.attr)
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Attribute)
        and isinstance(node.func.value.value, ast.Name)
        and node.func.value.value.id == "services"
    ]


def package_of(module: str) -> str:
    """The app/ package a module belongs to (``app.tables``), or the module itself if flat."""
    parts = module.split(".")
    return ".".join(parts[:2])


def operations_split(sources: dict[str, str], operation_ids: set[str]) -> list[str]:
    """Every operation of ``operation_ids`` whose handler, authorization row or service is not in
    one place: its handler defined in several handlers/ modules (or none), its row keyed in
    several modules (or none), a service method it calls defined in several modules (or not
    found), or its service methods spread over several app/ packages. ``sources``: module ->
    text, the handlers, app/ and ``app.composition.services`` among them."""
    trees = {module: ast.parse(text) for module, text in sources.items()}
    classes, imported = _classes_and_imports(trees)
    services_class = classes[(SERVICES_MODULE, "Services")]
    fields = {
        item.target.id: _class_named(SERVICES_MODULE, item.annotation, classes, imported)
        for item in services_class.body
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
    }
    handlers = {
        (module, node.name): node
        for module, tree in trees.items()
        if module.startswith("handlers.")
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }
    rows: dict[str, set[str]] = {}
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for key in node.keys:
                    if isinstance(key, ast.Constant) and key.value in operation_ids:
                        rows.setdefault(key.value, set()).add(module)
    from app.edge.resolver import handler_name

    problems = []
    for operation_id in sorted(operation_ids - NOT_DISPATCHED):
        name = handler_name(operation_id)
        homes = sorted(module for module, function in handlers if function == name)
        if len(homes) != 1:
            problems.append(f"{operation_id}: handler {name} in {homes or 'no module'}")
        if len(rows.get(operation_id, ())) != 1:
            problems.append(f"{operation_id}: authorization row in {sorted(rows.get(operation_id, ())) or 'no module'}")
        packages = set()
        for home in homes:
            for field, method in service_calls(handlers[(home, name)]):
                owner = fields.get(field)
                found = method_homes(trees, owner, method, classes, imported) if owner else []
                if len(found) != 1:
                    problems.append(f"{operation_id}: services.{field}.{method} in {found or 'no module'}")
                packages |= {package_of(module) for module in found}
        if len(packages) > 1:
            problems.append(f"{operation_id}: service methods in {sorted(packages)}")
    return problems


def test_the_operation_scan_finds_an_operation_split_across_files() -> None:
    """A handler in two modules, a row in two tables, a service method defined twice (a part's
    method handed out, and a delegation left in the service), and services of two packages."""
    services = "from app.t.service import TableService\n\nclass Services:\n    tables: TableService\n"
    service = (
        "from app.t.committing import Committer\n\nclass TableService:\n"
        "    def __init__(self, committer: Committer):\n        self.commit_table = committer.commit_table\n"
    )
    committer = "class Committer:\n    def commit_table(self, body):\n        return body\n"
    handler = "def update_table(services, body):\n    return services.tables.commit_table(body)\n"
    rows = "OPERATIONS = {'updateTable': 1}\n"
    sound = {
        SERVICES_MODULE: services,
        "app.t.service": service,
        "app.t.committing": committer,
        "handlers.tables": handler,
        "app.authorization": rows,
    }
    assert operations_split(sound, {"updateTable"}) == []
    assert operations_split({**sound, "handlers.views": handler}, {"updateTable"}) == [
        "updateTable: handler update_table in ['handlers.tables', 'handlers.views']"
    ]
    assert operations_split({**sound, "app.management.operations": rows}, {"updateTable"}) == [
        "updateTable: authorization row in ['app.authorization', 'app.management.operations']"
    ]
    delegating = service + "\n    def commit_table(self, body):\n        return self.committer.commit_table(body)\n"
    assert operations_split({**sound, "app.t.service": delegating}, {"updateTable"}) == [
        "updateTable: services.tables.commit_table in ['app.t.service', 'app.t.committing']"
    ]
    elsewhere = service.replace("app.t.committing", "app.u.committing")
    assert (
        operations_split(
            {**sound, "app.t.service": elsewhere, "app.u.committing": committer, "app.t.committing": ""},
            {"updateTable"},
        )
        == []
    )  # one package: app.u
    two = handler + "\ndef _also(services):\n    pass\n"
    assert operations_split({**sound, "handlers.tables": two}, {"updateTable"}) == []
    mixed = (
        "def update_table(services, body):\n    services.tables.commit_table(body)\n"
        "    return services.views.commit_table(body)\n"
    )
    both = {
        **sound,
        SERVICES_MODULE: "from app.v.service import ViewService\n" + services + "    views: ViewService\n",
        "app.v.service": "class ViewService:\n    def commit_table(self, body):\n        pass\n",
        "handlers.tables": mixed,
    }
    assert operations_split(both, {"updateTable"}) == ["updateTable: service methods in ['app.t', 'app.v']"]
    assert operations_split({**sound, "handlers.tables": ""}, {"updateTable"}) == [
        "updateTable: handler update_table in no module"
    ]


def test_each_operation_has_one_file_per_layer() -> None:
    """For every operation of openapi/catalog.yaml, management.yaml and events.yaml: one handler
    module (the one the dispatcher calls), one authorization row (in RULES), and service methods
    each defined in one module, all of one app/ package."""
    from app.authorization import RULES
    from app.edge.factory import handlers_of, served_apis

    served = {path.name for path in (ROOT / "openapi").glob("*.yaml")}
    assert {"catalog.yaml", "management.yaml", "events.yaml"} <= served
    operation_ids: set[str] = set()
    dispatched: dict[str, str] = {}
    for api_spec, _, modules in served_apis():
        for operation_id, handler in handlers_of(api_spec, modules).items():
            operation_ids.add(operation_id)
            while handler is not None and hasattr(handler, "__wrapped__"):  # the idempotency replay
                handler = handler.__wrapped__
            if handler is not None:
                dispatched[operation_id] = handler.__module__
    assert "updateTable" in operation_ids and "queryEvents" in operation_ids and "createPrincipal" in operation_ids
    assert set(dispatched) == operation_ids - NOT_DISPATCHED  # every operation has its handler
    assert set(RULES) == operation_ids - NOT_DISPATCHED  # ... and its row
    sources = {
        module: path.read_text()
        for module, path in MODULES.items()
        if module.startswith(("handlers.", "app.")) and not module.startswith(("app.rules.", "app.ground."))
    }
    assert operations_split(sources, operation_ids) == []
    trees = {module: ast.parse(text) for module, text in sources.items()}
    classes, imported = _classes_and_imports(trees)
    table_service = ("app.tables.service", "TableService")  # the scan follows a part's method handed out
    assert method_homes(trees, table_service, "commit_table", classes, imported) == ["app.tables.committing"]
    assert method_homes(trees, table_service, "create_table", classes, imported) == ["app.tables.service"]
    for operation_id, module in dispatched.items():  # the handler found by name is the one dispatched
        assert f"def {handler_name_of(operation_id)}(" in MODULES[module].read_text(), operation_id


def handler_name_of(operation_id: str) -> str:
    from app.edge.resolver import handler_name

    return handler_name(operation_id)
