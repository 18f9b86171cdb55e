"""Numba twins of traced functions.

Decode lifting leaves the part of a map function after its decoders as a Python
closure (``rest(element) = fn(Decoded(element))``), which Numba cannot compile: the
user's function still calls ``nd.io.parse_single_example`` and ``decode_jpeg`` on
stand-ins that hand back the decoded values. Elementwise lifting compiles such a
rest when it is position-wise arithmetic; an image op that reads a window of a
decoded image of its own size (``nd.image.random_resized_crop``, ``resize``) is not.

The twin is the same computation as plain Python source Numba compiles: the rest is
called once on graph tensors (``nbdata.train.graph``), so every NumPy operation,
ufunc, method and ``nd.image`` / ``nd.io`` op it applies is recorded with its
arguments; the recorded ops are then written out one statement each, in order, over
the function's own arguments (same calling convention: a top-level tuple unpacked,
dicts as string-keyed literals). Decoder calls disappear in the recording (they
return their decoded values), so what is left calls functions that have Numba
implementations. A twin that Numba cannot compile is reported like any function.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from nbdata.ops.node import NotFusable
from nbdata.spec import flatten, is_namedtuple, pack_as


class _Writer:
    def __init__(self):
        self.glb: dict[str, Any] = {"np": np}
        self.lines: list[str] = []
        self.names: dict[int, str] = {}   # id(tensor) -> variable

    def global_name(self, prefix: str, value: Any) -> str:
        for k, v in self.glb.items():
            if v is value and k.startswith(prefix):
                return k
        name = f"{prefix}{len(self.glb)}"
        self.glb[name] = value
        return name

    def arg(self, x: Any, constants: bool = True) -> str:
        """Source text for an op argument: tensors by name, constants as literals or
        globals (``constants=False``: NotFusable, for what a function returns),
        containers rebuilt."""
        from nbdata.train.graph import Tensor
        if isinstance(x, Tensor):
            try:
                return self.names[id(x)]
            except KeyError:
                raise NotFusable("the function uses a value it did not compute from its "
                                 "input") from None
        if isinstance(x, (tuple, list, Mapping)):
            return self._container(x, constants)
        if not constants:
            raise NotFusable(f"it returns a {type(x).__name__} that is not computed from "
                             "its input")
        if x is None or isinstance(x, (bool, int, str)) and not isinstance(x, np.generic):
            return repr(x)
        if isinstance(x, float):
            return repr(x) if np.isfinite(x) else self.global_name("c", x)
        if isinstance(x, np.dtype):
            return self.global_name("dt", x.type)
        return self.global_name("c", x)

    def _container(self, x: Any, constants: bool) -> str:
        if is_namedtuple(x):
            cls = self.global_name("nt", type(x))
            return f"{cls}({', '.join(self.arg(v, constants) for v in x)})"
        if isinstance(x, Mapping):
            if not all(isinstance(k, str) for k in x):
                raise NotFusable("a dict argument with non-string keys")
            return "{" + ", ".join(f"{k!r}: {self.arg(x[k], constants)}" for k in x) + "}"
        items = [self.arg(v, constants) for v in x]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _call_text(w: _Writer, fn, args: tuple, kwargs: dict) -> str:
    from nbdata.train import graph
    if fn is graph._getitem:
        return f"{w.arg(args[0])}[{w.arg(args[1])}]"
    if fn is graph._astype:
        if len(args) != 2 or kwargs:
            raise NotFusable("astype with options")
        return f"{w.arg(args[0])}.astype({w.arg(np.dtype(args[1]))})"
    parts = [w.arg(a) for a in args] + [f"{k}={w.arg(v)}" for k, v in kwargs.items()]
    return f"{w.global_name('f', fn)}({', '.join(parts)})"


def _paths(spec: Any, prefix: str = "") -> list[str]:
    """Index suffixes of the leaves of a structure, in ``flatten`` order."""
    if isinstance(spec, Mapping):
        return [p for k in sorted(spec) for p in _paths(spec[k], f"{prefix}[{k!r}]")]
    if isinstance(spec, (tuple, list)):
        return [p for j, v in enumerate(spec) for p in _paths(v, f"{prefix}[{j}]")]
    return [prefix]


def numba_twin(fn, structure: Any, call) -> tuple[Any, str]:
    """``(python_function, source)``: a function Numba can compile computing what
    ``call(fn, element)`` computes for elements of ``structure``; NotFusable (saying
    why) when ``fn`` does something the recording cannot write out."""
    from nbdata.train.graph import Graph, Operation
    graph = Graph()
    leaves = flatten(structure)
    inputs = [Operation(graph, "Input", f"input{k}", [], None, [spec]).outputs[0]
              for k, spec in enumerate(leaves)]
    try:
        with graph.as_default():
            out = call(fn, pack_as(structure, inputs))
    except Exception as e:  # noqa: BLE001 - any failure means "no twin"
        raise NotFusable(f"its recording failed: {type(e).__name__}: {e}") from None
    w = _Writer()
    params = []
    it = iter(inputs)
    tops = structure if isinstance(structure, tuple) else (structure,)
    for j, s in enumerate(tops):   # the arguments' leaves, in flatten order
        params.append(f"a{j}")
        for path in _paths(s):
            var = f"x{len(w.names)}"
            w.lines.append(f"    {var} = a{j}{path}")
            w.names[id(next(it))] = var
    for op in graph.get_operations():
        if op.type == "Input":
            continue
        source = getattr(op, "source", None)
        if source is None or op.kind != "pure":
            raise NotFusable(f"it applies {op.type}, which has no compiled form")
        text = _call_text(w, *source)
        result = f"t{len(w.lines)}"
        w.lines.append(f"    {result} = {text}")
        for t, path in zip(op.outputs, _paths(op.out_spec)):
            w.names[id(t)] = result + path
    w.lines.append(f"    return {w.arg(out, constants=False)}")
    name = f"{getattr(fn, '__name__', 'fn')}_twin".replace(".", "_").replace("<", "").replace(">", "")
    text = f"def {name}({', '.join(params)}):\n" + "\n".join(w.lines) + "\n"
    # The same source over the same objects is the same function: reuse it (and so its
    # Numba compilations) when a pipeline is compiled again.
    key = (text, tuple((k, id(v)) for k, v in sorted(w.glb.items())))
    with _lock:
        cached = _twins.get(key)
        if cached is None:
            exec(compile(text, f"<nbdata-twin {name}>", "exec"), w.glb)
            cached = _twins[key] = (w.glb[name], w.glb)   # the globals keep the ids valid
            while len(_twins) > _MAX_TWINS:
                _twins.pop(next(iter(_twins)))
    return cached[0], text


_twins: dict = {}
_MAX_TWINS = 256
_lock = threading.Lock()


__all__ = ["numba_twin"]
