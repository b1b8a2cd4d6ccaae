"""The house rules, checked on the source: which layer may import which, no import circles, and
pure rules that load no web framework and no database driver.

The layers, lowest first (README.md, "Design"):

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


def _module_files() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
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


def _imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module of this code base) for every import statement in the file."""
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
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name:
                yield node.lineno, name


GRAPH = {module: sorted({name for _, name in _imports(module, path)} - {module}) for module, path in MODULES.items()}


def test_every_module_has_a_layer() -> None:
    assert {layer_of(module) for module in MODULES} <= set(MAY_IMPORT)
    assert "app.tables" in MODULES and "storage.repository" in MODULES  # the walk found the code


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
