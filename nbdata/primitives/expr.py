"""The scalar expression IR that lifting produces: what a position-wise function
computes at one position of its output, with NumPy's exact dtype rules.

Primitives' lift rules (``nbdata/primitives/table.py``) build these expressions from the
expressions of their inputs: arithmetic, comparisons, a whitelist of exactly-rounded
ufuncs, ``astype``, ``np.where``, ``np.stack`` of scalars, and image windows, flips,
per-channel constants and counter-based draws for the image ops. Each node records the
dtype NumPy gives it (Python scalars are weak, NEP 50), so generated code casts exactly
where NumPy would and a fused ``(x - 0.5) * 2.0`` on float32 computes in float32, as the
reference path does, with no per-row array allocation. A rule raises
:class:`NotElementwise` for anything else; the compiler then compiles the function
as a call instead (``nbdata/compiler/lifting.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata.spec import TensorSpec, flatten


class NotElementwise(Exception):
    """The function does something other than position-wise arithmetic."""

    refusal = True   # a refusal, not an internal error (nbdata.trace.function)


@dataclasses.dataclass(frozen=True)
class Expr:
    kind: str               # "input", "const", "op", "cast", "where", "window", "draw", "channel",
                            # "stack" (a vector of scalar expressions), "element" (an
                            # array's value at flat position ``value``)
    dtype: np.dtype
    is_array: bool
    args: tuple = ()
    name: str = ""          # op name, or input index for "input"
    value: Any = None       # constant value
    in_dtype: Any = None    # computation dtype of an op
    shape: tuple = ()       # the row shape an array expression stands for


# ufunc → (rendering template on operand expressions, result is bool)
BINARY = {
    np.add: "({0} + {1})", np.subtract: "({0} - {1})", np.multiply: "({0} * {1})",
    np.true_divide: "({0} / {1})", np.floor_divide: "({0} // {1})", np.remainder: "({0} % {1})",
    np.less: "({0} < {1})", np.less_equal: "({0} <= {1})", np.greater: "({0} > {1})",
    np.greater_equal: "({0} >= {1})", np.equal: "({0} == {1})", np.not_equal: "({0} != {1})",
    np.logical_and: "(({0} != 0) and ({1} != 0))", np.logical_or: "(({0} != 0) or ({1} != 0))",
    np.logical_xor: "(({0} != 0) != ({1} != 0))",
    np.bitwise_and: "({0} & {1})", np.bitwise_or: "({0} | {1})", np.bitwise_xor: "({0} ^ {1})",
    np.maximum: "({0} if ({0} >= {1} or {0} != {0}) else {1})",
    np.minimum: "({0} if ({0} <= {1} or {0} != {0}) else {1})",
}
UNARY = {
    np.negative: "(-{0})", np.positive: "(+{0})", np.absolute: "abs({0})", np.sqrt: "np.sqrt({0})",
    np.logical_not: "({0} == 0)", np.floor: "np.floor({0})", np.ceil: "np.ceil({0})",
    np.trunc: "np.trunc({0})", np.square: "({0} * {0})",
}


def _sample(x) -> Any:
    """A concrete value with x's dtype/kind, to ask NumPy for result dtypes."""
    if isinstance(x, Expr):
        if x.dtype is None:   # a weak Python scalar
            return x.value
        return np.ones(1, x.dtype) if x.is_array else x.dtype.type(1)
    return x


def as_expr(x) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return Expr("const", None, False, value=x)   # weak Python scalar: takes the other side's dtype
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        return Expr("const", x.dtype, False, value=x.item())
    raise NotElementwise(f"operand {type(x).__name__}")


def apply_ufunc(ufunc, *operands) -> Expr:
    if ufunc not in BINARY and ufunc not in UNARY:
        raise NotElementwise(f"ufunc {ufunc.__name__}")
    exprs = [as_expr(o) for o in operands]
    arrays = [e for e in exprs if e.is_array]
    shapes = {e.shape for e in arrays}
    if len(shapes) > 1:
        raise NotElementwise("operands of different shapes")
    try:
        with np.errstate(all="ignore"):
            out = ufunc(*[_sample(o) for o in operands])
        loop = ufunc.resolve_dtypes(tuple(
            e.dtype if e.dtype is not None else type(e.value) for e in exprs) + (None,))
    except Exception as e:  # noqa: BLE001 - NumPy refuses the combination
        raise NotElementwise(str(e)) from None
    out_dtype = np.asarray(out).dtype
    if out_dtype.kind not in "biuf":
        raise NotElementwise(f"result dtype {out_dtype}")
    in_dtype = loop[0]
    return Expr("op", out_dtype, bool(arrays), tuple(exprs), name=ufunc.__name__,
                in_dtype=in_dtype, shape=shapes.pop() if shapes else ())


def where(cond, a, b) -> Expr:
    c, x, y = as_expr(cond), as_expr(a), as_expr(b)
    shapes = {e.shape for e in (c, x, y) if e.is_array}
    if len(shapes) > 1:
        raise NotElementwise("np.where operands of different shapes")
    try:
        out = np.where(_sample(cond), _sample(a), _sample(b))
    except Exception as e:  # noqa: BLE001
        raise NotElementwise(str(e)) from None
    dt = np.asarray(out).dtype
    is_array = any(e.is_array for e in (c, x, y))
    return Expr("where", dt, is_array, (c, x, y), shape=shapes.pop() if shapes else ())


def stack(values) -> Expr:
    """``np.stack`` of scalars: a vector whose position q holds ``values[q]``."""
    if not isinstance(values, (list, tuple)) or not values:
        raise NotElementwise("np.stack of a non-sequence")
    exprs = [as_expr(v) for v in values]
    if any(e.is_array for e in exprs):
        raise NotElementwise("np.stack of arrays")
    try:
        dt = np.stack([_sample(v) for v in values]).dtype
    except Exception as e:  # noqa: BLE001
        raise NotElementwise(str(e)) from None
    if dt.kind not in "biuf":
        raise NotElementwise(f"np.stack to {dt}")
    return Expr("stack", dt, True, tuple(exprs), shape=(len(exprs),))


# -------------------------------------------------------------- image views

def window(image: Expr, shape: tuple, top, left, flip) -> Expr:
    """A (h, w, C) window of an (H, W, C) input image: position (y, x, c) reads
    ``image[top + y, left + (w - 1 - x if flip else x), c]``. ``top``/``left`` are
    int64 scalars and ``flip`` a bool scalar (expressions or Python values). Windows of
    windows compose while the outer one is not flipped."""
    if not isinstance(image, Expr) or not image.is_array or len(image.shape) != 3:
        raise NotElementwise("an image window needs an (H, W, C) array input")
    e = image
    top, left, flip = as_expr(top), as_expr(left), _bool(as_expr(flip))
    if e.kind == "window":
        base, t0, l0, f0 = e.args
        if not (f0.kind == "const" and not f0.value):
            raise NotElementwise("a window of a flipped window")
        top = apply_ufunc(np.add, t0, top)
        left = apply_ufunc(np.add, l0, left)
        e = base
    if e.kind != "input":
        raise NotElementwise("a window of a computed image")
    return Expr("window", e.dtype, True, (e, _int64(top), _int64(left), flip),
                shape=tuple(shape), value=tuple(e.shape))


def flipped(image: Expr, flip) -> Expr:
    """``image`` mirrored along its width when the bool scalar ``flip`` holds."""
    e = image if isinstance(image, Expr) else None
    if e is None or not e.is_array or len(e.shape) != 3:
        raise NotElementwise("a flip needs an (H, W, C) array")
    if e.kind == "input":
        return window(image, e.shape, 0, 0, flip)
    if e.kind != "window":
        raise NotElementwise("a flip of a computed image")
    base, top, left, f0 = e.args
    flip = _bool(as_expr(flip))
    if f0.kind == "const" and not f0.value:
        both = flip
    else:
        both = apply_ufunc(np.logical_xor, f0, flip)
    return dataclasses.replace(e, args=(base, top, left, both))


def draw(kind: str, seed, counter, stream: int, low: int = 0, high: int = 0) -> Expr:
    """A counter-based random draw as a scalar expression: ``kind`` "randint" (int64 in
    [low, high)) or "uniform" (float64 in [0, 1)), as ``nbdata.random`` draws it from
    ``key(seed, stream, 0)`` and ``counter``."""
    args = (_int64(as_expr(seed)), _int64(as_expr(counter)))
    dtype = np.dtype(np.int64) if kind == "randint" else np.dtype(np.float64)
    return Expr("draw", dtype, False, args, name=kind, value=(int(stream), int(low), int(high)))


def channel_constant(values, shape: tuple) -> Expr:
    """A float32 array of ``shape`` whose value at (..., c) is ``values[c]``."""
    values = tuple(float(np.float32(v)) for v in values)
    if len(values) != shape[-1]:
        raise NotElementwise("one constant per channel")
    return Expr("channel", np.dtype(np.float32), True, value=values, shape=tuple(shape))


def _bool(e: Expr) -> Expr:
    if e.kind == "const":
        return Expr("const", np.dtype(np.bool_), False, value=bool(e.value))
    if e.dtype != np.bool_ or e.is_array:
        raise NotElementwise("a flip condition must be a bool scalar")
    return e


def _int64(e: Expr) -> Expr:
    if e.kind == "const":
        return Expr("const", np.dtype(np.int64), False, value=int(e.value))
    if e.dtype is None or e.dtype.kind not in "iu" or e.is_array:
        raise NotElementwise("a seed, offset or counter must be an integer scalar")
    return e if e.dtype == np.int64 else Expr("cast", np.dtype(np.int64), False, (e,))


def nodes(exprs: list) -> list[Expr]:
    """The distinct nodes of a DAG, each once (what rendering emits: one temporary each)."""
    seen: dict = {}
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if id(e) not in seen:
            seen[id(e)] = e
            stack.extend(e.args)
    return list(seen.values())


def positional(exprs: list) -> bool:
    """True when a DAG holds image windows or channel constants (its positions are
    (y, x, c), not flat)."""
    return any(e.kind in ("window", "channel") for e in nodes(exprs))


# ------------------------------------------------------------- composition

def substitute(expr: Expr, inputs: list[Expr], memo: dict | None = None) -> Expr:
    """``expr`` with input ``k`` replaced by ``inputs[k]``: composing one lifted function
    after another. Shared nodes stay shared (a DAG, never a tree copy per use)."""
    memo = {} if memo is None else memo
    key = id(expr)
    if key in memo:
        return memo[key]
    if expr.kind == "input":
        out = inputs[int(expr.name)]
    elif not expr.args:
        out = expr
    else:
        args = tuple(substitute(a, inputs, memo) for a in expr.args)
        out = expr if all(a is b for a, b in zip(args, expr.args)) else dataclasses.replace(expr, args=args)
    memo[key] = out
    return out


def node_count(exprs: list[Expr]) -> int:
    return len(nodes(exprs))


def output_specs(out: Any) -> list[TensorSpec]:
    """Row specs of a traced function's outputs (an array output has the shape of the
    array inputs it combines)."""
    return [TensorSpec(e.shape, e.dtype) for e in flatten(out)]


def literal(value: Any) -> str:
    """Python source for a scalar constant (inf and nan have no literal)."""
    if isinstance(value, float) and not np.isfinite(value):
        return "np.nan" if np.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    return repr(value)




def element(x, index) -> Expr:
    """``x[index]`` of an array expression at a constant full index (``row[0]``,
    ``img[1, 2, 0]``): a scalar read at one flat position. Indices wrap from the end as
    NumPy's do; one out of range (NumPy raises IndexError on every row), a partial
    index (a sub-array) or an image window does not lift."""
    if not isinstance(x, Expr) or not x.is_array or x.dtype is None:
        raise NotElementwise("indexing of other than an array")
    if positional([x]):
        raise NotElementwise("indexing of an image window")
    key = index if isinstance(index, tuple) else (index,)
    if len(key) != len(x.shape) or not all(
            isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)) for k in key):
        raise NotElementwise("indexing other than one element by constant integers")
    flat = 0
    for k, dim in zip(key, x.shape):
        k = int(k)
        if not -dim <= k < dim:
            raise NotElementwise("an index out of range")
        flat = flat * dim + (k % dim)
    return Expr("element", x.dtype, False, (x,), value=flat)


def cast(x, dtype) -> Expr:
    """``x.astype(dtype)`` of an expression (numeric targets only)."""
    dt = np.dtype(dtype)
    if dt.kind not in "biuf":
        raise NotElementwise(f"astype to {dt}")
    e = as_expr(x)
    return Expr("cast", dt, e.is_array, (e,), shape=e.shape)


__all__ = ["BINARY", "Expr", "NotElementwise", "UNARY", "apply_ufunc", "as_expr", "cast",
           "channel_constant", "draw", "element", "flipped", "literal", "node_count", "output_specs",
           "positional", "stack", "substitute", "where", "window"]
