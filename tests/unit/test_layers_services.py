"""The house rules of the services floor (issue 48), checked on the source: wired once (no
behaviour installed by attribute after construction, no import circle in the benchmark and the
scripts either), packages by capability, services composed of parts rather than base classes
across files, and one file per layer per operation.

The layers themselves, the import directions and the dispatcher's rules: tests/unit/test_layers.py,
whose module walk and import reader this uses.
"""

from __future__ import annotations

import ast

from tests.unit.test_layers import MODULES, ROOT, _circles, _imports, _module_files

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
    "planning",
    "previews",
    "views",
    "namespaces",
    "recycle_bin",
    "protection",
    "events",
    "event_sinks",
    "publisher",
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


# -- one public service class per package (issue 48) -------------------------------------------
#
# A public service class is one that handlers, the console and the tools reach: the class a field
# of ``Services`` names. A package holds at most one, so a newcomer who knows the capability
# knows the package, and the package's service.py (or its one service module) is the capability.


def packages_with_several_services(sources: dict[str, str]) -> list[str]:
    """``package: Class, Class`` for every app/ package holding the classes of more than one
    ``Services`` field. ``sources``: module -> text, ``app.composition.services`` among them."""
    trees = {module: ast.parse(text) for module, text in sources.items()}
    classes, imported = _classes_and_imports(trees)
    services_class = classes[(SERVICES_MODULE, "Services")]
    held: dict[str, set[str]] = {}
    for item in services_class.body:
        if isinstance(item, ast.AnnAssign):
            found = _class_named(SERVICES_MODULE, item.annotation, classes, imported)
            if found is not None and found[0].startswith("app."):
                held.setdefault(package_of(found[0]), set()).add(found[1])
    return [f"{package}: {', '.join(sorted(names))}" for package, names in sorted(held.items()) if len(names) > 1]


def test_the_service_scan_finds_a_package_with_two_services() -> None:
    """Scan planning beside the table service in one package (as it was) is found; in a package
    of its own, or a part that is no ``Services`` field, is not."""
    services = (
        "from app.t.service import TableService\nfrom app.t.plans import PlanningService\n\n"
        "class Services:\n    tables: TableService\n    plans: PlanningService\n    separator: str\n"
    )
    sources = {
        SERVICES_MODULE: services,
        "app.t.service": "class TableService:\n    pass\n",
        "app.t.plans": "class PlanningService:\n    pass\n",
        "app.t.loading": "class TableLoader:\n    pass\n",
    }
    assert packages_with_several_services(sources) == ["app.t: PlanningService, TableService"]
    moved = services.replace("app.t.plans", "app.planning.service")
    apart = {**sources, SERVICES_MODULE: moved, "app.planning.service": sources.pop("app.t.plans")}
    assert packages_with_several_services(apart) == []


def test_each_package_holds_one_public_service_class() -> None:
    """No package of app/ holds two of the classes the ``Services`` fields name: the table
    service's neighbours (scan planning, the console's previews), the recycle bin's (protection
    marks) and the change feed's (its sinks, the publisher) are packages of their own."""
    sources = {module: path.read_text() for module, path in MODULES.items() if module.startswith("app.")}
    assert packages_with_several_services(sources) == []
    fields = ast.parse(sources[SERVICES_MODULE])
    assert sum(isinstance(node, ast.AnnAssign) for node in ast.walk(fields)) > 10  # the scan saw the fields


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
# The one operation the spec gives to two capabilities, its parameters choosing which: loadCredentials
# answers a table's credentials (app.tables) or, with ``planId``, those for reading a scan plan's
# files, once planning has checked the plan is still readable (app.planning).
SPANNING = {"loadCredentials": {"app.tables", "app.planning"}}


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


def operations_split(
    sources: dict[str, str], operation_ids: set[str], spanning: dict[str, set[str]] | None = None
) -> list[str]:
    """Every operation of ``operation_ids`` whose handler, authorization row or service is not in
    one place: its handler defined in several handlers/ modules (or none), its row keyed in
    several modules (or none), a service method it calls defined in several modules (or not
    found), or its service methods spread over several app/ packages (other than exactly the ones
    ``spanning`` names for it). ``sources``: module -> text, the handlers, app/ and
    ``app.composition.services`` among them."""
    spanning = spanning or {}
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
        if len(packages) > 1 and packages != spanning.get(operation_id):
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
    assert operations_split(both, {"updateTable"}, {"updateTable": {"app.t", "app.v"}}) == []  # named: allowed
    assert operations_split(both, {"updateTable"}, {"updateTable": {"app.t", "app.u"}}) == [
        "updateTable: service methods in ['app.t', 'app.v']"
    ]
    assert operations_split({**sound, "handlers.tables": ""}, {"updateTable"}) == [
        "updateTable: handler update_table in no module"
    ]


def test_each_operation_has_one_file_per_layer() -> None:
    """For every operation of openapi/catalog.yaml, management.yaml and events.yaml: one handler
    module (the one the dispatcher calls), one authorization row (in RULES), and service methods
    each defined in one module, all of one app/ package (loadCredentials: the two of ``SPANNING``)."""
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
    assert operations_split(sources, operation_ids, SPANNING) == []
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
