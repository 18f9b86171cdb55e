"""Imports run one way: the package's modules (their import statements anywhere, function
bodies included, read with ``ast``) import only modules of their own layer or below, in
the order of DESIGN.md's layer picture, with no cycles; the TF1 layer (``nbdata.train``)
is imported by nothing but the re-exports: the package's file and the TF1 namespace
``nbdata.compat.v1`` (``import nbdata.compat.v1 as tf``), which is a re-export of it."""

import ast
from pathlib import Path

import nbdata

ROOT = Path(nbdata.__file__).parent

# Lowest first. A module belongs to the first layer one of whose prefixes it matches
# (a prefix matches the module and its submodules).
LAYERS = [
    ("vocabulary", ["nbdata.errors", "nbdata.options", "nbdata.spec", "nbdata.random",
                    "nbdata.chunks", "nbdata.profiler", "nbdata.memory", "nbdata.progress",
                    "nbdata.ragged", "nbdata.optional", "nbdata.state_check"]),
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


def _imports(path: Path, modules: set) -> set:
    """The package modules ``path`` imports (a ``from package import name`` of a module
    counts as that module)."""
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "nbdata")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "nbdata":
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in modules else node.module)
    return found


def _graph() -> dict:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
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
