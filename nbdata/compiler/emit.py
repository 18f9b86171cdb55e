"""The one code emitter: kernel source for the CPU (fused stages, typing probes), Numba
twins of recorded functions and GPU chains is written through :class:`Source` (scalar
expressions through :class:`ExprRenderer`) and made a function by :func:`materialize`,
the package's one ``exec``, with one cache: the same text over the same objects is the
same function, so its compilations are reused. A text with a disk-cache key is written
to ``<cache dir>/kernels/`` and imported from there, so that Numba's ``cache=True`` can
store its machine code beside it (``nbdata/compiler/kernel_cache.py``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import linecache
import os
import threading
import weakref
from typing import Any

import numpy as np

from nbdata.primitives.expr import BINARY, UNARY, Expr, literal


class Source:
    """Source text being written: statements at indentation depths, fresh names, and
    ``globals``, the objects it names (functions, dtypes, constants)."""

    def __init__(self):
        self.lines: list[str] = []
        self.globals: dict[str, Any] = {}
        self._n = 0

    def fresh(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def dtype_name(self, dtype) -> str:
        name = f"dt_{np.dtype(dtype).name}"
        self.globals[name] = np.dtype(dtype).type
        return name

    def global_name(self, prefix: str, value: Any) -> str:
        for k, v in self.globals.items():
            if v is value and k.startswith(prefix):
                return k
        name = self.fresh(prefix)
        self.globals[name] = value
        return name

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class ExprRenderer:
    """Renders expression DAGs as statements, one temporary per node (a node shared by
    several uses or outputs is computed once), so code size grows linearly with the
    chain. Device-neutral text: scalar Python that Numba compiles for the CPU and
    numba-cuda for the GPU.

    ``emit(line)`` writes a statement, ``fresh(prefix)`` names a temporary,
    ``dtype_name(dt)`` names a dtype's scalar type and ``input_text(k)`` gives the
    source of input ``k`` at the current position. ``helpers`` collects the names of
    helper functions the text calls (``floordiv_int64``).
    """

    def __init__(self, emit, fresh, dtype_name, input_text, position_text=None,
                 element_text=None):
        self.emit = emit
        self.fresh = fresh
        self.dtype_name = dtype_name
        self.input_text = input_text
        self.position_text = position_text   # window / channel node -> text at this position
        # (input k, flat position j) -> input k's value at j (a scalar input: its value)
        self.element_text = element_text
        self.memo: dict[int, str] = {}
        self.helpers: set[str] = set()

    def value(self, expr: Expr, want=None) -> str:
        """An expression for ``expr``'s value, cast to ``want`` when given and different."""
        if expr.kind == "const":
            dt = want if want is not None else (expr.dtype if expr.dtype is not None
                                                else np.asarray(expr.value).dtype)
            return f"{self.dtype_name(dt)}({literal(expr.value)})"
        text = self._node(expr)
        if want is not None and np.dtype(want) != expr.dtype:
            return f"{self.dtype_name(want)}({text})"
        return text

    def _node(self, e: Expr) -> str:
        key = id(e)
        if key in self.memo:
            return self.memo[key]
        if e.kind == "input":
            text = self.input_text(int(e.name))
            self.memo[key] = text
            return text
        if e.kind in ("window", "channel"):
            text = self.position_text(e, self)
            self.memo[key] = text
            return text
        if e.kind == "element":
            # An array's value at one flat position: an input read there, a computed
            # (position-wise) array rendered with its array inputs read there.
            (inner,), j = e.args, e.value
            if inner.kind == "input":
                text = self.element_text(int(inner.name), j)
            else:
                at = ExprRenderer(self.emit, self.fresh, self.dtype_name,
                                  lambda k: self.element_text(k, j), None, self.element_text)
                text = at.value(inner)
                self.helpers |= at.helpers
            self.memo[key] = text
            return text
        if e.kind == "draw":
            self.helpers.update(("nd_key", "nd_randint", "nd_uniform"))
            stream, low, high = e.value
            seed, counter = (self.value(a) for a in e.args)
            k = f"nd_key({seed}, np.int64({stream}), np.int64(0))"
            rhs = (f"nd_randint({k}, {counter}, np.int64({low}), np.int64({high}))"
                   if e.name == "randint" else f"nd_uniform({k}, {counter})")
            var = self.fresh("e")
            self.emit(f"{var} = {rhs}")
            self.memo[key] = var
            return var
        if e.kind == "stack":
            # One value per flat position q of the position loop (the vector's only axis).
            parts = [self.value(a, e.dtype) for a in e.args]
            rhs = parts[-1]
            for j in range(len(parts) - 2, -1, -1):
                rhs = f"({parts[j]} if q == {j} else {rhs})"
        elif e.kind == "cast":
            rhs = f"{self.dtype_name(e.dtype)}({self.value(e.args[0])})"
        elif e.kind == "where":
            c, a, b = e.args
            rhs = f"({self.value(a, e.dtype)} if {self.value(c)} else {self.value(b, e.dtype)})"
        else:
            ufunc = getattr(np, e.name)
            parts = [self.value(a, e.in_dtype) for a in e.args]
            if ufunc is np.floor_divide and np.dtype(e.in_dtype) == np.int64:
                # NumPy wraps int64.min // -1 to int64.min; LLVM's sdiv would trap or give 0.
                self.helpers.add("floordiv_int64")
                inner = f"floordiv_int64({parts[0]}, {parts[1]})"
            else:
                inner = (BINARY.get(ufunc) or UNARY[ufunc]).format(*parts)
            rhs = f"{self.dtype_name(e.dtype)}({inner})"
        var = self.fresh("e")
        self.emit(f"{var} = {rhs}")
        self.memo[key] = var
        return var


# ------------------------------------------------------------- materializing

# Same text over the same objects -> the same function, while anything (a stage, a
# dispatcher) still holds it; its globals keep those objects alive, so their ids stay
# unique meanwhile, and nothing here keeps a user's function alive.
_functions: "weakref.WeakValueDictionary[tuple, Any]" = weakref.WeakValueDictionary()
_lock = threading.Lock()


def materialize(name: str, text: str, glb: dict, label: str, disk_path=None) -> Any:
    """The function ``name`` that ``text`` defines over the globals ``glb`` (the same
    function for the same text over the same objects, while it lives). With
    ``disk_path`` (a ``.py`` path in the cache directory) the text is written there and
    imported as a module of that file; otherwise Numba and tracebacks read it through
    ``linecache`` under ``<nbdata-{label}-...>``, an entry that goes with the function."""
    key = (text, str(disk_path), tuple(sorted((k, id(v)) for k, v in glb.items())))
    with _lock:
        fn = _functions.get(key)
    if fn is not None:
        return fn
    fn = _from_file(name, text, glb, disk_path) if disk_path is not None else None
    if fn is None:
        filename = f"<nbdata-{label}-{hashlib.sha1(text.encode()).hexdigest()[:12]}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        namespace = dict(glb)
        exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - generated here
        # Out of its own globals: Numba keeps a compiled function's globals for good, and
        # the function (with the dispatchers kept on it) must not live on through them.
        fn = namespace.pop(name)
        weakref.finalize(fn, linecache.cache.pop, filename, None)
    with _lock:
        return _functions.setdefault(key, fn)


def _from_file(name: str, text: str, glb: dict, path) -> Any:
    """``name`` from a module made of ``text`` at ``path`` (None when the file cannot be
    written). The module is not left in ``sys.modules``; its name is the function's
    ``__module__``, under which Numba's cache loader imports it while compiling."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
    except OSError:
        return None
    spec = importlib.util.spec_from_file_location(f"nbdata_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(glb)
    spec.loader.exec_module(module)
    fn = module.__dict__.pop(name)   # as for in-memory functions (see materialize)
    fn._nbdata_module = module
    return fn


_dispatchers: "weakref.WeakValueDictionary[tuple, Any]" = weakref.WeakValueDictionary()


def jitted(fn, key: str, make) -> Any:
    """``make(fn)`` (a Numba or numba-cuda dispatcher of ``fn``), made once per ``key``
    while it lives, so every user of a materialized function shares its compilations.
    (Not kept on the function: Numba's finalizers hold compiled functions, which would
    then keep their dispatchers alive for good.)"""
    with _lock:
        found = _dispatchers.get((id(fn), key))
        if found is None:
            found = _dispatchers[(id(fn), key)] = make(fn)
    return found


__all__ = ["ExprRenderer", "Source", "jitted", "materialize"]
