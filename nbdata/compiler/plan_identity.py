"""What a saved iterator state is checked against when it is restored: the identity of
a pipeline's ops and the shape of its physical plan, and the error saying where two
pipelines differ.

An op's identity is its name, its element spec and its arguments (every field of its
plan node but its inputs and its run-time resource keys):

- numbers, strings, dtypes, None, and tuples, lists, dicts and dataclasses of them:
  by value;
- functions (map, filter, flat_map, ... functions): their bytecode (so a state
  restores under the Python version that saved it), constants (``x + 1`` differs from
  ``x + 1000``), default arguments, closure values and the globals they read, modules
  by name only, through the kernel cache's fingerprint
  (:func:`nbdata.compiler.kernel_cache.fingerprint`); a function that reads an object
  of another kind counts by its code and constants and by those of its closure values,
  defaults and globals that can be fingerprinted, the others by their type;
- arrays: by content up to ``WHOLE_ARRAY_BYTES``, larger ones by dtype, shape and
  ``ARRAY_SAMPLES`` elements at fixed places;
- placeholders by dtype and shape (their fed values are checked by the ops that hold
  state depending on them, e.g. ``shuffle``'s buffer size);
- any other object by its type only.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from nbdata.compiler.kernel_cache import Unfingerprintable, fingerprint, global_names
from nbdata.compiler.lowering import StageNode
from nbdata.errors import DataLossError, InvalidArgumentError, NotFoundError, OpError
from nbdata.ops.function import ChainedFunction, UserFunction, function_parts
from nbdata.ops.node import Node
from nbdata.trace.placeholder import Placeholder

WHOLE_ARRAY_BYTES = 16 << 20
ARRAY_SAMPLES = 1 << 16
MAX_DEPTH = 8


def plan_ops(root: Node) -> list[Node]:
    """The nodes of a plan, sources first (a node after its inputs): op ``k`` of error
    messages is the ``k``-th of them, counting from 1."""
    out: list[Node] = []

    def visit(node: Node) -> None:
        for child in node.inputs:
            visit(child)
        out.append(node)

    visit(root)
    return out


def _arguments(node: Node):
    for f in dataclasses.fields(node):
        if f.metadata.get("input") or not f.compare or f.metadata.get("identity") is False:
            continue
        value = getattr(node, f.name)
        if isinstance(value, Node) or (isinstance(value, (tuple, list)) and value
                                       and all(isinstance(v, Node) for v in value)):
            continue   # inputs held in a field of their own (zip's): entries of their own
        yield f.name, value


def _digest(feed, value) -> str:
    h = hashlib.sha1()
    feed(value, h)
    return h.hexdigest()[:16]


def _array(a: np.ndarray, h) -> None:
    h.update(f"array:{a.dtype.str}:{a.shape};".encode())
    if a.size == 0:
        return
    if a.dtype.hasobject:
        flat = np.linspace(0, a.size - 1, min(a.size, ARRAY_SAMPLES // 16)).astype(np.int64)
        for v in a[np.unravel_index(flat, a.shape)]:
            _value(v, h, MAX_DEPTH - 1)
        return
    if a.nbytes <= WHOLE_ARRAY_BYTES:
        h.update(a.tobytes())
        return
    flat = np.linspace(0, a.size - 1, ARRAY_SAMPLES).astype(np.int64)
    h.update(a[np.unravel_index(flat, a.shape)].tobytes())


def _fingerprint_or_type(value: Any, h) -> None:
    sub = hashlib.sha1()
    try:
        fingerprint(value, sub, versions=False)
    except (Unfingerprintable, RecursionError):
        h.update(f"object:{type(value).__module__}.{type(value).__qualname__};".encode())
        return
    h.update(sub.digest())


def _function(fn: Any, h) -> None:
    """A function's code, constants and the values it reads (see the module docstring)."""
    sub = hashlib.sha1()
    try:
        fingerprint(fn, sub, versions=False)
    except (Unfingerprintable, RecursionError):
        sub = hashlib.sha1(b"in part;")
        _function_in_part(fn, sub)
    h.update(sub.digest())


_EMPTY = object()


def _cell(cell) -> Any:
    try:
        return cell.cell_contents
    except ValueError:             # a variable of the enclosing function not set yet
        return _EMPTY


def _function_in_part(fn: Any, h) -> None:
    if isinstance(fn, functools.partial):
        _function(fn.func, h)
        _value((fn.args, dict(fn.keywords)), h, 1)
        return
    fn = getattr(fn, "py_func", fn)          # a Numba dispatcher
    code = getattr(fn, "__code__", None)
    if code is None:
        h.update(f"callable:{type(fn).__module__}.{type(fn).__qualname__};".encode())
        return
    h.update(f"fn:{getattr(fn, '__qualname__', '')};".encode())
    fingerprint(code, h)
    cells = getattr(fn, "__closure__", None) or ()
    reads = [v for v in map(_cell, cells) if v is not _EMPTY]
    reads += list(getattr(fn, "__defaults__", None) or ())
    space = getattr(fn, "__globals__", {})
    reads += [space[name] for name in sorted(global_names(code)) if name in space]
    for value in reads:
        _fingerprint_or_type(value, h)


def _value(value: Any, h, depth: int = 0) -> None:
    """Feed an op argument's identity into ``h``."""
    if depth > MAX_DEPTH:
        h.update(b"deep;")
    elif isinstance(value, (UserFunction, ChainedFunction)):
        for part in function_parts(value):
            _function(part.fn, h)
    elif isinstance(value, Placeholder):
        h.update(f"placeholder:{value.spec!r};".encode())
    elif isinstance(value, np.ndarray):
        _array(value, h)
    elif isinstance(value, Mapping):
        h.update(f"mapping[{len(value)}];".encode())
        for key in sorted(value, key=repr):
            _value(key, h, depth + 1)
            _value(value[key], h, depth + 1)
    elif isinstance(value, (tuple, list)):
        h.update(f"{type(value).__qualname__}[{len(value)}];".encode())
        for v in value:
            _value(v, h, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        h.update(f"{type(value).__qualname__}:".encode())
        for f in dataclasses.fields(value):
            h.update(f"{f.name}=".encode())
            _value(getattr(value, f.name), h, depth + 1)
    elif callable(value) and not isinstance(value, type):
        _function(value, h)
    else:
        _fingerprint_or_type(value, h)


def _shown(value: Any) -> Any:
    """How an argument is named in an error message."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, str):
        return value if len(value) <= 60 else value[:57] + "..."
    if isinstance(value, (UserFunction, ChainedFunction)):
        return f"function {value.name}"
    if isinstance(value, Placeholder):
        return f"placeholder {value.name}"
    if isinstance(value, np.ndarray):
        return f"array of {value.dtype} {value.shape}"
    return type(value).__name__


def op_entries(root: Node) -> list:
    """Per op of the plan (sources first): ``[op, [[argument, shown, digest], ...],
    spec digest]``, plain data that goes into saved states."""
    entries = []
    for node in plan_ops(root):
        args = [[name, _shown(value), _digest(_value, value)] for name, value in _arguments(node)]
        spec = hashlib.sha1(repr(node.spec).encode()).hexdigest()[:16]
        entries.append([node.op, args, spec])
    return entries


def entries_fingerprint(entries: list) -> str:
    return hashlib.sha1(json.dumps(entries, sort_keys=True).encode()).hexdigest()[:16]


def plan_fingerprint(node: Node) -> str:
    """Identifies a plan across processes and package upgrades: its ops, their element
    specs and their arguments, functions by their code, constants and the values they
    read (see the module docstring for exactly what counts).

    >>> import nbdata as nd
    >>> a = nd.Dataset.range(9).map(lambda x: x + 1)._node
    >>> b = nd.Dataset.range(9).map(lambda x: x + 1000)._node
    >>> plan_fingerprint(a) == plan_fingerprint(b)
    False
    """
    return entries_fingerprint(op_entries(node))


def stage_shapes(physical: Node) -> list[str]:
    """The kinds of the physical plan's stages (sources first): pipelines built alike but
    planned differently (other Options) save states of other shapes."""
    out = []
    for node in plan_ops(physical):
        if isinstance(node, StageNode):
            p = node.plan
            parts = ([f"{type(p.source).__name__}:{type(p.source.node).__name__}"]
                     + [type(s).__name__ for s in p.steps]
                     + ([type(p.terminal).__name__] if p.terminal is not None else []))
            out.append(f"fused_stage({', '.join(parts)})")
        else:
            out.append(type(node).__name__)
    return out


def mismatch(saved: Any, here: list) -> OpError:
    """The error for a state whose pipeline (op entries ``saved``) is not this one
    (``here``): NotFoundError when the ops differ (this pipeline has an op the state has
    no state for, as tf.data says), else InvalidArgumentError naming the first op whose
    arguments, functions or element spec differ."""
    try:
        saved_ops = [str(e[0]) for e in saved]
        saved_args = [{str(a[0]): (a[1], str(a[2])) for a in e[1]} for e in saved]
        saved_specs = [str(e[2]) for e in saved]
    except (TypeError, IndexError, KeyError) as e:
        raise DataLossError(f"restore: the iterator state's op list is malformed ({e})") from None
    here_ops = [e[0] for e in here]
    if saved_ops != here_ops:
        k = next((i for i, (a, b) in enumerate(zip(saved_ops, here_ops)) if a != b),
                 min(len(saved_ops), len(here_ops)))
        there = saved_ops[k] if k < len(saved_ops) else "nothing"
        mine = here_ops[k] if k < len(here_ops) else "nothing"
        return NotFoundError(
            f"restore: the state was saved by a different pipeline: op {k + 1} is {there} "
            f"there and {mine} here (its ops: {' -> '.join(saved_ops)}; this pipeline's: "
            f"{' -> '.join(here_ops)}); restore it into an iterator of the same dataset")
    for k, (op, args, spec) in enumerate(here):
        before = saved_args[k]
        for name, shown, digest in args:
            old = before.get(name)
            if old is not None and old[1] == digest:
                continue
            if old is None:
                what = f"it has no saved {name}"
            elif isinstance(shown, str) and shown.startswith("function "):
                what = (f"its {name} {shown[9:]} differs from the one the state was saved "
                        f"with (in its code, constants or the values it reads)")
            elif old[0] != shown:
                what = f"{name} {old[0]} saved, {shown} here"
            else:
                what = f"its {name} ({shown}) differs from the saved one"
            return InvalidArgumentError(
                f"restore: the state of {op} (op {k + 1}) does not fit this pipeline: {what}; "
                "the state was saved by a different pipeline", op)
        if saved_specs[k] != spec:
            return InvalidArgumentError(
                f"restore: the state of {op} (op {k + 1}) does not fit this pipeline: its "
                "element spec differs; the state was saved by a different pipeline", op)
    return InvalidArgumentError("restore: the state was saved by an iterator of a different "
                                "pipeline; restore it into an iterator of the same dataset")
