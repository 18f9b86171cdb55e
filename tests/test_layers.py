"""Imports run one way: the package's modules (their import statements anywhere, function
bodies included, read with ``ast``) import only modules of their own layer or below, in
the order of DESIGN.md's layer picture, with no cycles; the TF1 layer (``nbdata.train``)
is imported by nothing but the re-exports: the package's file and the TF1 namespace
``nbdata.compat.v1`` (``import nbdata.compat.v1 as tf``), which is a re-export of it."""

import ast
import functools
import subprocess
import sys
from pathlib import Path

import nbdata
from nbdata import plugins

ROOT = Path(nbdata.__file__).parent

# Lowest first. A module belongs to the first layer one of whose prefixes it matches
# (a prefix matches the module and its submodules).
LAYERS = [
    ("vocabulary", ["nbdata.errors", "nbdata.options", "nbdata.spec", "nbdata.random",
                    "nbdata.chunks", "nbdata.profiler", "nbdata.memory", "nbdata.progress",
                    "nbdata.ragged", "nbdata.optional", "nbdata.state_check", "nbdata.plugins"]),
    ("kernels", ["nbdata.kernels"]),
    ("gpu runtime", ["nbdata.gpu.runtime", "nbdata.gpu.array", "nbdata.gpu.jpeg", "nbdata.gpu"]),
    ("trace", ["nbdata.trace"]),
    ("primitives", ["nbdata.primitives", "nbdata.image"]),
    ("ops", ["nbdata.ops", "nbdata.iterator", "nbdata.checkpoint"]),
    ("compiler", ["nbdata.compiler"]),
    ("api", ["nbdata.dataset", "nbdata.io", "nbdata.transformations"]),
    ("on top", ["nbdata.distribute", "nbdata.train"]),
    # The re-exports (the public API in one place, nd.experimental) and the command line
    # tools, which use all of it.
    ("entry points", ["nbdata.__main__", "nbdata", "nbdata.experimental",
                      "nbdata.experimental_more", "nbdata.compat"]),
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


@functools.cache
def _trees() -> dict:
    """``{path: syntax tree}`` of every package file, parsed once (each test walks them)."""
    return {path: ast.parse(path.read_text()) for path in sorted(ROOT.rglob("*.py"))}


def _imports(path: Path, modules: set) -> set:
    """The package modules ``path`` imports (a ``from package import name`` of a module
    counts as that module)."""
    found = set()
    for node in ast.walk(_trees()[path]):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "nbdata")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "nbdata":
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in modules else node.module)
    return found


@functools.cache
def _graph() -> dict:
    paths = {_module_name(p): p for p in _trees()}
    return {m: _imports(p, set(paths)) & set(paths) for m, p in paths.items()}


def test_every_import_runs_down_the_layers():
    upward = []
    for module, imported in _graph().items():
        for other in imported:
            if _layer(other) > _layer(module):
                upward.append(f"{module} ({LAYERS[_layer(module)][0]}) imports {other} "
                              f"({LAYERS[_layer(other)][0]})")
    assert upward == []


def test_no_import_cycles():
    graph = _graph()
    cycles, state = [], {}

    def visit(module, stack):
        state[module] = "open"
        stack.append(module)
        for other in sorted(graph[module]):
            if other == module:
                continue
            if state.get(other) == "open":
                cycles.append(stack[stack.index(other):] + [other])
            elif other not in state:
                visit(other, stack)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert cycles == []


def test_only_the_reexports_import_the_tf1_layer():
    outside = [f"{m} imports {o}" for m, imported in _graph().items() for o in imported
               if o.startswith("nbdata.train") and not m.startswith("nbdata.train")
               and m != "nbdata" and not m.startswith("nbdata.compat")]
    assert outside == []


def test_the_checker_sees_what_it_checks():
    """The walk finds function-level imports and classifies every module."""
    graph = _graph()
    assert "nbdata.compiler.backend_gpu" in graph["nbdata.compiler.executor"]   # in a method
    assert {_layer(m) for m in graph} == set(range(len(LAYERS)))


def _registry_users() -> dict:
    """``{slot: modules asking for it}``: the calls ``provided("slot")`` in the package."""
    users = {}
    for path, tree in _trees().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "provided" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                users.setdefault(node.args[0].value, set()).add(_module_name(path))
    return users


def test_upper_layers_plug_in_through_the_registry():
    """Every slot of ``nbdata/plugins.py`` is asked for, and its provider sits above
    (or beside) every module asking for it (the registry is the one way down)."""
    users = _registry_users()
    assert set(users) == set(plugins.PROVIDERS)
    below = [f"{slot}: {user} is not below {plugins.PROVIDERS[slot]}"
             for slot, modules in users.items() for user in modules
             if _layer(plugins.PROVIDERS[slot].split(":")[0]) < _layer(user)
             or plugins.PROVIDERS[slot].startswith(user + ":")]
    assert below == []


def test_no_module_registers_by_mutating_another_at_import():
    """No module-level statement assigns into or calls a method on a name bound to
    another package module (the old import-time registration into a lower module's
    list, which depended on import order)."""
    found = []
    for path, tree in _trees().items():
        modules = {a.asname or a.name for node in tree.body if isinstance(node, ast.Import)
                   for a in node.names if a.name.startswith("nbdata")}
        modules |= {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("nbdata") for a in node.names
                    if (ROOT.parent / (node.module.replace(".", "/") + "/" + a.name)).exists()
                    or (ROOT.parent / (node.module.replace(".", "/") + f"/{a.name}.py")).exists()}
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.value.func] if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else []
            for target in targets:
                while isinstance(target, (ast.Subscript, ast.Attribute)):
                    target = target.value
                if isinstance(target, ast.Name) and target.id in modules:
                    found.append(f"{_module_name(path)}:{node.lineno}")
    assert found == []


def test_every_registry_slot_resolves_in_a_fresh_process():
    """Importing only one low module (which imports nothing above it itself) finds every
    provider: no slot depends on which modules were imported before."""
    code = ("import nbdata.primitives.codecs, nbdata.plugins as p; "
            "print(' '.join(s for s in sorted(p.PROVIDERS) if callable(p.provided(s))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == sorted(plugins.PROVIDERS)
