"""Numba twins of recorded functions.

A function that exists only as a recorded graph (the rest of a map function after the
decoder that decode lifting took out) has no Python body Numba could compile, and an
image op that reads a window of a decoded image of its own size
(``nd.image.random_resized_crop``, ``resize``) does not lift into expressions. Its twin
is the same computation as plain Python source: the graph's ops written out one
statement each, in order, over the function's own arguments (same calling convention:
a top-level tuple unpacked, dicts as string-keyed literals). Every op calls what the
graph recorded (a NumPy function, an ``nd.image`` op with its Numba implementation), so
what Numba compiles is what the graph computes. A twin that Numba cannot compile is
reported like any function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from nbdata.compiler.emit import Source, materialize
from nbdata.ops.node import NotFusable
from nbdata.spec import is_namedtuple
from nbdata.trace import graph as recorder
from nbdata.trace.function import FunctionGraph


def _arg(src: Source, names: dict, x: Any, constants: bool = True) -> str:
    """Source text for an op argument: tensors by name, constants as literals or globals
    (``constants=False``: NotFusable, for what a function returns), containers rebuilt."""
    if isinstance(x, recorder.Tensor):
        return names[id(x)]
    if isinstance(x, (tuple, list, Mapping)):
        return _container(src, names, x, constants)
    if not constants:
        raise NotFusable(f"it returns a {type(x).__name__} that is not computed from its input")
    if x is None or isinstance(x, (bool, int, str)) and not isinstance(x, np.generic):
        return repr(x)
    if isinstance(x, float):
        return repr(x) if np.isfinite(x) else src.global_name("c", x)
    if isinstance(x, np.dtype):
        return src.global_name("dt", x.type)
    return src.global_name("c", x)


def _container(src: Source, names: dict, x: Any, constants: bool) -> str:
    if is_namedtuple(x):
        cls = src.global_name("nt", type(x))
        return f"{cls}({', '.join(_arg(src, names, v, constants) for v in x)})"
    if isinstance(x, Mapping):
        if not all(isinstance(k, str) for k in x):
            raise NotFusable("a dict argument with non-string keys")
        return "{" + ", ".join(f"{k!r}: {_arg(src, names, x[k], constants)}" for k in x) + "}"
    items = [_arg(src, names, v, constants) for v in x]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _call(src: Source, names: dict, fn, args: tuple, kwargs: dict) -> str:
    if fn is recorder.getitem:
        return f"{_arg(src, names, args[0])}[{_arg(src, names, args[1])}]"
    if fn is recorder.astype:
        if len(args) != 2 or kwargs:
            raise NotFusable("astype with options")
        return f"{_arg(src, names, args[0])}.astype({_arg(src, names, np.dtype(args[1]))})"
    parts = [_arg(src, names, a) for a in args] + [
        f"{k}={_arg(src, names, v)}" for k, v in kwargs.items()]
    return f"{src.global_name('f', fn)}({', '.join(parts)})"


def _paths(spec: Any, prefix: str = "") -> list[str]:
    """Index suffixes of the leaves of a structure, in ``flatten`` order."""
    if isinstance(spec, Mapping):
        return [p for k in sorted(spec) for p in _paths(spec[k], f"{prefix}[{k!r}]")]
    if isinstance(spec, (tuple, list)):
        return [p for j, v in enumerate(spec) for p in _paths(v, f"{prefix}[{j}]")]
    return [prefix]


def numba_twin(graph: FunctionGraph, name: str) -> tuple[Any, str]:
    """``(python_function, source)``: a function Numba can compile computing what the
    recorded function computes; NotFusable (saying why) for an op the source cannot
    write out."""
    src = Source()
    names: dict[int, str] = {}
    params = []
    inputs = iter(graph.inputs)
    tops = graph.structure if isinstance(graph.structure, tuple) else (graph.structure,)
    for j, s in enumerate(tops):   # the arguments' leaves, in flatten order
        params.append(f"a{j}")
        for path in _paths(s):
            var = src.fresh("x")
            src.emit(1, f"{var} = a{j}{path}")
            names[id(next(inputs))] = var
    for op in graph.operations():
        if op.type == "Const" and op.call is None and not op.inputs:   # tf.constant in it
            names[id(op.outputs[0])] = _arg(src, names, op.fn())
            continue
        if op.call is None or op.kind != "pure":
            raise NotFusable(f"it applies {op.type}, which has no compiled form")
        result = src.fresh("t")
        src.emit(1, f"{result} = {_call(src, names, *op.call)}")
        for t, path in zip(op.outputs, _paths(op.out_spec)):
            names[id(t)] = result + path
    src.emit(1, f"return {_arg(src, names, graph.outputs, constants=False)}")
    name = "".join(c if c.isalnum() else "_" for c in name) + "_twin"
    src.lines.insert(0, f"def {name}({', '.join(params)}):")
    text = src.text()
    return materialize(name, text, src.globals, "twin"), text


__all__ = ["numba_twin"]
