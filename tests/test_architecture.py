"""The architecture as a test: data flows one way (docs/architecture.md).

Every ``import`` and ``from … import`` in every module under ``bake/`` is read with :mod:`ast`
(nested ones inside functions and ``if TYPE_CHECKING:`` included; relative imports resolved;
``from pkg import name`` resolved to the submodule when ``name`` is one). The checks:

- no import cycle between bake modules;
- the pure core (``bake/plan/``) reaches neither Docker, nor processes, nor any layer above it;
- an import goes to the same layer or a lower one (``LAYERS``); ``bake.pip`` and ``bake.run``
  share a layer and neither imports the other;
- only ``bake.run`` imports python-on-whales; only ``bake.pip``, ``bake.run`` and ``bake.processes`` import subprocess;
- ``bake/__init__.py`` is the plugin authors' facade: nothing inside ``bake/`` imports it.

The checker is plain functions over a directory, so ``test_checker_reports_…`` can run it on a
synthetic tree and see it fail.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "bake"

LAYERS: Tuple[Tuple[int, str], ...] = (
    # (layer, module); "pkg.*" is the package and everything in it; the most specific entry wins
    (0, "bake.errors"),
    (0, "bake.resources"),
    (0, "bake.output"),
    (0, "bake.documents"),
    (0, "bake.owned"),
    (0, "bake.version"),
    (0, "bake.processes"),
    (0, "bake.patterns"),
    (1, "bake"),  # the package itself only: a facade over bake.plan (and bake.version) for plugins
    (1, "bake.plan.*"),
    (2, "bake.pip.*"),
    (2, "bake.run.*"),
    (3, "bake.settings.*"),
    (4, "bake.api"),
    (5, "bake.testing"),
    (5, "bake.pytest_plugin"),
    (5, "bake.commands"),
    (5, "bake.cli"),
    (5, "bake.completion"),
)
"""An import may only go to the same layer or a lower one. A module in no layer is an error: a
new module is placed here (and in docs/architecture.md) when it is added."""

SIBLINGS_APART = (("bake.pip", "bake.run"),)
"""Packages on one layer that must not import each other."""

PLAN_FORBIDDEN = ("python_on_whales", "subprocess", "bake.run", "bake.pip", "bake.settings",
                  "bake.api", "bake.cli", "bake.testing")
"""What the pure core (``bake.plan``) never imports."""

ONLY_IN = {
    "python_on_whales": ("bake.run",),
    "subprocess": ("bake.pip", "bake.run", "bake.processes"),
}
"""External modules only some packages may import."""


# --- reading the tree ---------------------------------------------------------------------------

def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def modules_of(root: Path, package: str = PACKAGE) -> Tuple[Dict[str, Path], Set[str]]:
    """The modules under ``root / package`` (name → file) and every package name (a directory,
    with or without ``__init__.py``)."""
    base = root / package
    modules: Dict[str, Path] = {}
    packages: Set[str] = {package}
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_dir():
            if all(part.isidentifier() for part in rel.parts):
                packages.add(".".join(rel.parts))
        elif path.suffix == ".py":
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules, packages


def _is_module(name: str, modules: Dict[str, Path], packages: Set[str]) -> bool:
    return name in modules or name in packages


def imports_of(module: str, path: Path, modules: Dict[str, Path], packages: Set[str]
               ) -> Iterator[Tuple[str, int, str]]:
    """``(imported module, line, statement)`` for every import in ``path``, at any depth."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                if node.level - 1 > len(here) - 1:
                    raise AssertionError(f"{path}:{node.lineno}: relative import beyond the top package")
                anchor = here[: len(here) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base == "__future__":
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                if alias.name != "*" and _is_module(candidate, modules, packages):
                    yield candidate, node.lineno, ast.unparse(node)
                else:
                    yield base, node.lineno, ast.unparse(node)


def import_graph(root: Path, package: str = PACKAGE
                 ) -> Tuple[Dict[str, Path], Set[str], List[Tuple[str, str, int, str]]]:
    """Modules, packages, and every import edge ``(importer, imported, line, statement)``."""
    modules, packages = modules_of(root, package)
    edges = sorted({(name, target, line, stmt)
                    for name, path in modules.items()
                    for target, line, stmt in imports_of(name, path, modules, packages)})
    return modules, packages, edges


# --- the rules ----------------------------------------------------------------------------------

def layer_of(module: str) -> Optional[Tuple[int, str]]:
    """``(layer, entry)`` of the most specific ``LAYERS`` entry holding ``module``."""
    best = None
    for layer, entry in LAYERS:
        if entry.endswith(".*"):
            holds = _within(module, entry[:-2])
        else:
            holds = module == entry
        if holds and (best is None or len(entry) > len(best[1])):
            best = (layer, entry)
    return best


def find_cycles(nodes: Set[str], edges: Dict[str, Set[str]]) -> List[List[str]]:
    """One cycle (``a → b → … → a``) per strongly connected component with more than one module,
    or a module that imports itself (Tarjan, iteratively)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on_stack: Set[str] = set()
    stack: List[str] = []
    components: List[List[str]] = []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    cycles = []
    for component in components:
        first = component[0]
        if len(component) == 1 and first not in edges.get(first, ()):
            continue
        # the shortest way back to `first` inside the component (breadth first)
        members = set(component)
        previous: Dict[str, str] = {}
        frontier = [first]
        found = first in edges.get(first, ())
        while frontier and not found:
            following = []
            for node in frontier:
                for child in sorted(edges.get(node, ())):
                    if child not in members:
                        continue
                    if child == first:
                        previous[first] = node
                        found = True
                        break
                    if child not in previous:
                        previous[child] = node
                        following.append(child)
                if found:
                    break
            frontier = following
        path = [first]
        node = previous.get(first, first)
        while node != first:
            path.append(node)
            node = previous[node]
        cycles.append([first] + list(reversed(path[1:])) + [first])
    return cycles


def violations(root: Path, package: str = PACKAGE) -> List[str]:
    """Every broken rule in the tree at ``root / package``, one line each."""
    modules, packages, edges = import_graph(root, package)
    found: List[str] = []

    def where(importer: str, line: int, stmt: str) -> str:
        return f"{modules[importer].relative_to(root)}:{line}: {importer}: `{stmt}`"

    for name in sorted(modules):
        if layer_of(name) is None:
            found.append(f"{name}: in no layer (add it to LAYERS in tests/test_architecture.py "
                         "and to docs/architecture.md)")

    graph: Dict[str, Set[str]] = {}
    for importer, target, line, stmt in edges:
        internal = _within(target, package)
        top = target.split(".")[0]
        if internal and target != importer and target in modules:
            graph.setdefault(importer, set()).add(target)

        if _within(importer, f"{package}.plan"):
            for forbidden in PLAN_FORBIDDEN:
                if _within(target, forbidden):
                    found.append(f"{where(importer, line, stmt)}: the pure core imports {forbidden}")

        for external, allowed in ONLY_IN.items():
            if top == external and not any(_within(importer, a) for a in allowed):
                found.append(f"{where(importer, line, stmt)}: only {', '.join(allowed)} may import {external}")

        if not internal:
            continue
        if target == package:
            found.append(f"{where(importer, line, stmt)}: imports the package `{package}` itself "
                         "(its facade is for plugins; import the submodule)")
            continue
        if not _is_module(target, modules, packages):
            found.append(f"{where(importer, line, stmt)}: {target} is not a module of the tree")
            continue
        mine, theirs = layer_of(importer), layer_of(target)
        if mine is None or theirs is None:
            continue  # reported above
        if theirs[0] > mine[0]:
            found.append(f"{where(importer, line, stmt)}: layer {mine[0]} ({mine[1]}) imports "
                         f"layer {theirs[0]} ({theirs[1]})")
        for a, b in SIBLINGS_APART:
            for x, y in ((a, b), (b, a)):
                if _within(importer, x) and _within(target, y):
                    found.append(f"{where(importer, line, stmt)}: {x} imports {y} (siblings stay apart)")

    for cycle in find_cycles(set(modules), graph):
        found.append("import cycle: " + " -> ".join(cycle))
    return found


# --- the tests ----------------------------------------------------------------------------------

def test_bake_imports_flow_one_way():
    found = violations(ROOT)
    assert not found, "architecture rules broken (docs/architecture.md):\n" + "\n".join(found)


def test_the_checker_reads_every_module_and_nested_import():
    modules, _, edges = import_graph(ROOT)
    assert {"bake", "bake.cli", "bake.plan.compose", "bake.run.engine", "bake.pip.lock"} <= set(modules)
    assert ("bake.run.engine", "python_on_whales") in {(a, b) for a, b, _, _ in edges}  # nested
    assert ("bake.pip.lock", "bake.pip.requirements") in {(a, b) for a, b, _, _ in edges}  # from pkg import mod


def _write(root: Path, files: Dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_checker_reports_cycles_and_forbidden_imports(tmp_path):
    _write(tmp_path, {
        "bake/__init__.py": "from bake.plan.stage import Stage\n",
        "bake/errors.py": "",
        "bake/api.py": "from bake.plan import compose\n",
        "bake/plan/__init__.py": '"""The core."""\n',
        "bake/plan/stage.py": "from . import compose\n",  # relative: a cycle with compose
        "bake/plan/compose.py": (
            "from bake.plan.stage import Stage\n"
            "def run():\n"
            "    import subprocess\n"            # nested, and forbidden in the core
            "    from bake.run import engine\n"  # nested, and a layer above
        ),
        "bake/pip/lock.py": "from bake.run.engine import bake\nfrom bake import Stage\n",
        "bake/run/engine.py": "from python_on_whales import docker\n",
        "bake/newthing.py": "",
    })
    found = violations(tmp_path)
    text = "\n".join(found)
    assert "import cycle: bake.plan.compose -> bake.plan.stage -> bake.plan.compose" in found
    assert "bake.plan.compose: `import subprocess`: the pure core imports subprocess" in text
    assert "bake.plan.compose: `from bake.run import engine`: the pure core imports bake.run" in text
    assert "layer 1 (bake.plan.*) imports layer 2 (bake.run.*)" in text
    assert "bake.pip imports bake.run (siblings stay apart)" in text
    assert "bake.pip.lock: `from bake import Stage`: imports the package `bake` itself" in text
    assert "bake.newthing: in no layer" in text
    assert not any("python_on_whales" in line for line in found)  # bake.run may
    assert not any(line.startswith("bake/api.py") for line in found)  # downwards is fine
