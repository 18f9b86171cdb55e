"""Elementwise lifting: recognise functions that act position by position and turn them
into scalar expressions with NumPy's exact dtype rules.

A function is traced once with symbolic stand-ins for its arguments. Arithmetic,
comparisons, a whitelist of exactly-rounded ufuncs, ``astype`` and ``np.where``
build an expression tree; anything else (indexing, ``.shape``, reductions,
Python control flow on values) stops the trace, and the function is then called
per row as compiled Numba code instead. Each node records the dtype NumPy gives
it (Python scalars are weak, NEP 50), so the generated code casts exactly where
NumPy would and a fused ``(x - 0.5) * 2.0`` on float32 computes in float32, as
the reference path does — and needs no per-row array allocation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata.spec import TensorSpec, flatten, pack_as, string


class NotElementwise(Exception):
    """The function does something other than position-wise arithmetic."""


@dataclasses.dataclass(frozen=True)
class Expr:
    kind: str               # "input", "const", "op", "cast", "where", "window", "draw", "channel",
                            # "stack" (a vector of scalar expressions)
    dtype: np.dtype
    is_array: bool
    args: tuple = ()
    name: str = ""          # op name, or input index for "input"
    value: Any = None       # constant value
    in_dtype: Any = None    # computation dtype of an op
    shape: tuple = ()       # the row shape an array expression stands for


# ufunc → (rendering template on operand expressions, result is bool)
_BINARY = {
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
_UNARY = {
    np.negative: "(-{0})", np.positive: "(+{0})", np.absolute: "abs({0})", np.sqrt: "np.sqrt({0})",
    np.logical_not: "({0} == 0)", np.floor: "np.floor({0})", np.ceil: "np.ceil({0})",
    np.trunc: "np.trunc({0})", np.square: "({0} * {0})",
}
_OPERATORS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}


def _sample(x) -> Any:
    """A concrete value with x's dtype/kind, to ask NumPy for result dtypes."""
    if isinstance(x, Sym):
        return np.ones(1, x.expr.dtype) if x.expr.is_array else x.expr.dtype.type(1)
    return x


def _as_expr(x) -> Expr:
    if isinstance(x, Sym):
        return x.expr
    if isinstance(x, Expr):
        return x
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return Expr("const", None, False, value=x)   # weak Python scalar: takes the other side's dtype
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        return Expr("const", x.dtype, False, value=x.item())
    raise NotElementwise(f"operand {type(x).__name__}")


def _apply(ufunc, *operands) -> "Sym":
    if ufunc not in _BINARY and ufunc not in _UNARY:
        raise NotElementwise(f"ufunc {ufunc.__name__}")
    exprs = [_as_expr(o) for o in operands]
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
    return Sym(Expr("op", out_dtype, bool(arrays), tuple(exprs), name=ufunc.__name__,
                    in_dtype=in_dtype, shape=shapes.pop() if shapes else ()))


class Sym:
    """A symbolic value: an expression tree plus the row-level shape it stands for."""

    __array_priority__ = 1000

    def __init__(self, expr: Expr):
        self.expr = expr

    @property
    def shape(self):
        raise NotElementwise("reads .shape")

    @property
    def dtype(self):
        return self.expr.dtype

    def astype(self, dtype, *args, **kwargs):
        if args or kwargs:
            raise NotElementwise("astype options")
        dt = np.dtype(dtype)
        if dt.kind not in "biuf":
            raise NotElementwise(f"astype to {dt}")
        return Sym(Expr("cast", dt, self.expr.is_array, (self.expr,), shape=self.expr.shape))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            raise NotElementwise(f"{ufunc.__name__}.{method}")
        return _apply(ufunc, *inputs)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.where and len(args) == 3 and not kwargs:
            return _where(*args)
        if func is np.stack and len(args) == 1 and kwargs.get("axis", 0) in (0, -1) and not (
                set(kwargs) - {"axis"}):
            return _stack(args[0])   # of scalars: axis 0 and -1 are the same
        raise NotElementwise(f"np.{func.__name__}")

    def __bool__(self):
        raise NotElementwise("control flow on a value")

    def __len__(self):
        raise NotElementwise("len()")

    def __getitem__(self, item):
        raise NotElementwise("indexing")

    def __iter__(self):
        raise NotElementwise("iteration")

    def __index__(self):
        raise NotElementwise("used as an index")

    __int__ = __float__ = __index__

    def __neg__(self):
        return _apply(np.negative, self)

    def __pos__(self):
        return _apply(np.positive, self)

    def __abs__(self):
        return _apply(np.absolute, self)

    def __invert__(self):
        if self.expr.dtype == np.bool_:
            return _apply(np.logical_not, self)
        raise NotElementwise("~ on integers")

    def __pow__(self, other):
        if isinstance(other, int) and not isinstance(other, bool) and other == 2:
            return _apply(np.square, self)
        raise NotElementwise("power")


def _binary(name, reflected=False):
    ufunc = _OPERATORS[name]

    def method(self, other):
        return _apply(ufunc, other, self) if reflected else _apply(ufunc, self, other)
    return method


for _name in _OPERATORS:
    setattr(Sym, f"__{_name}__", _binary(_name))
    if _name not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(Sym, f"__r{_name}__", _binary(_name, reflected=True))
Sym.__hash__ = None


def _where(cond, a, b) -> Sym:
    c, x, y = _as_expr(cond), _as_expr(a), _as_expr(b)
    shapes = {e.shape for e in (c, x, y) if e.is_array}
    if len(shapes) > 1:
        raise NotElementwise("np.where operands of different shapes")
    try:
        out = np.where(_sample(cond), _sample(a), _sample(b))
    except Exception as e:  # noqa: BLE001
        raise NotElementwise(str(e)) from None
    dt = np.asarray(out).dtype
    is_array = any(e.is_array for e in (c, x, y))
    return Sym(Expr("where", dt, is_array, (c, x, y), shape=shapes.pop() if shapes else ()))


def _stack(values) -> Sym:
    """``np.stack`` of scalars: a vector whose position q holds ``values[q]``."""
    if not isinstance(values, (list, tuple)) or not values:
        raise NotElementwise("np.stack of a non-sequence")
    exprs = [_as_expr(v) for v in values]
    if any(e.is_array for e in exprs):
        raise NotElementwise("np.stack of arrays")
    try:
        dt = np.stack([_sample(v) for v in values]).dtype
    except Exception as e:  # noqa: BLE001
        raise NotElementwise(str(e)) from None
    if dt.kind not in "biuf":
        raise NotElementwise(f"np.stack to {dt}")
    return Sym(Expr("stack", dt, True, tuple(exprs), shape=(len(exprs),)))


# ------------------------------------------------------------------ tracing

class Opaque:
    """A string input while tracing: any use makes the function not elementwise (a
    function that leaves its strings alone can still be lifted)."""

    def _refuse(self, *args, **kwargs):
        raise NotElementwise("uses a string input")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _refuse
    __add__ = __radd__ = __mul__ = __rmul__ = __getitem__ = __len__ = __bool__ = _refuse
    __iter__ = __array__ = __array_ufunc__ = __array_function__ = __getattr__ = _refuse
    __str__ = __bytes__ = __contains__ = __mod__ = __sub__ = __truediv__ = _refuse


def trace(fn, structure: Any) -> Any:
    """Trace ``fn`` on symbolic inputs for ``structure`` (nested tuple of TensorSpecs).

    Returns the output structure with an :class:`Expr` at each leaf, or raises
    NotElementwise. Input leaf ``k`` is ``Expr("input", name=k)``.
    """
    specs = flatten(structure)
    for s in specs:
        if s.dtype is not string and s.dtype.kind not in "biuf":
            raise NotElementwise("non-numeric input")
        if s.dtype is not string and any(d is None for d in s.shape):
            raise NotElementwise("an input whose shape differs per row")
    syms = [Opaque() if s.dtype is string else
            Sym(Expr("input", s.dtype, len(s.shape) > 0, name=str(k), shape=tuple(s.shape)))
            for k, s in enumerate(specs)]
    args = pack_as(structure, syms)
    try:
        out = fn(*args) if isinstance(structure, tuple) else fn(args)
    except NotElementwise:
        raise
    except Exception as e:  # noqa: BLE001 - a function that fails symbolically is not liftable
        raise NotElementwise(f"{type(e).__name__}: {e}") from None
    if isinstance(out, list):
        raise NotElementwise("returns a list")
    leaves = flatten(out)
    exprs = []
    for leaf in leaves:
        if isinstance(leaf, Sym):
            exprs.append(leaf.expr)
        else:
            raise NotElementwise(f"returns a {type(leaf).__name__}")
    return pack_as(out, exprs)


def output_specs(out: Any) -> list[TensorSpec]:
    """Row specs of a traced function's outputs (an array output has the shape of the
    array inputs it combines)."""
    return [TensorSpec(e.shape, e.dtype) for e in flatten(out)]


# -------------------------------------------------------------- image views

def window(image: "Sym", shape: tuple, top, left, flip) -> "Sym":
    """A (h, w, C) window of an (H, W, C) input image: position (y, x, c) reads
    ``image[top + y, left + (w - 1 - x if flip else x), c]``. ``top``/``left`` are
    int64 scalars and ``flip`` a bool scalar (Syms or Python values). Windows of
    windows compose while the outer one is not flipped."""
    if not isinstance(image, Sym) or not image.expr.is_array or len(image.expr.shape) != 3:
        raise NotElementwise("an image window needs an (H, W, C) array input")
    e = image.expr
    top, left, flip = _as_expr(top), _as_expr(left), _bool(_as_expr(flip))
    if e.kind == "window":
        base, t0, l0, f0 = e.args
        if not (f0.kind == "const" and not f0.value):
            raise NotElementwise("a window of a flipped window")
        top = _apply(np.add, Sym(t0), Sym(top)).expr
        left = _apply(np.add, Sym(l0), Sym(left)).expr
        e = base
    if e.kind != "input":
        raise NotElementwise("a window of a computed image")
    return Sym(Expr("window", e.dtype, True, (e, _int64(top), _int64(left), flip),
                    shape=tuple(shape), value=tuple(e.shape)))


def flipped(image: "Sym", flip) -> "Sym":
    """``image`` mirrored along its width when the bool scalar ``flip`` holds."""
    e = image.expr if isinstance(image, Sym) else None
    if e is None or not e.is_array or len(e.shape) != 3:
        raise NotElementwise("a flip needs an (H, W, C) array")
    if e.kind == "input":
        return window(image, e.shape, 0, 0, flip)
    if e.kind != "window":
        raise NotElementwise("a flip of a computed image")
    base, top, left, f0 = e.args
    flip = _bool(_as_expr(flip))
    if f0.kind == "const" and not f0.value:
        both = flip
    else:
        both = _apply(np.logical_xor, Sym(f0), Sym(flip)).expr
    return Sym(dataclasses.replace(e, args=(base, top, left, both)))


def draw(kind: str, seed, counter, stream: int, low: int = 0, high: int = 0) -> "Sym":
    """A counter-based random draw as a scalar expression: ``kind`` "randint" (int64 in
    [low, high)) or "uniform" (float64 in [0, 1)), as ``nbdata.random`` draws it from
    ``key(seed, stream, 0)`` and ``counter``."""
    args = (_int64(_as_expr(seed)), _int64(_as_expr(counter)))
    dtype = np.dtype(np.int64) if kind == "randint" else np.dtype(np.float64)
    return Sym(Expr("draw", dtype, False, args, name=kind, value=(int(stream), int(low), int(high))))


def channel_constant(values, shape: tuple) -> "Sym":
    """A float32 array of ``shape`` whose value at (..., c) is ``values[c]``."""
    values = tuple(float(np.float32(v)) for v in values)
    if len(values) != shape[-1]:
        raise NotElementwise("one constant per channel")
    return Sym(Expr("channel", np.dtype(np.float32), True, value=values, shape=tuple(shape)))


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


def positional(exprs: list) -> bool:
    """True when a DAG holds image windows or channel constants (its positions are
    (y, x, c), not flat)."""
    seen: set = set()
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if e.kind in ("window", "channel"):
            return True
        stack.extend(e.args)
    return False


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
    """Distinct nodes of a DAG (what rendering emits: one temporary each)."""
    seen: set = set()
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        stack.extend(e.args)
    return len(seen)


# ---------------------------------------------------------------- rendering

def literal(value: Any) -> str:
    """Python source for a scalar constant (inf and nan have no literal)."""
    if isinstance(value, float) and not np.isfinite(value):
        return "np.nan" if np.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    return repr(value)


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

    def __init__(self, emit, fresh, dtype_name, input_text, position_text=None):
        self.emit = emit
        self.fresh = fresh
        self.dtype_name = dtype_name
        self.input_text = input_text
        self.position_text = position_text   # window / channel node -> text at this position
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
                inner = (_BINARY.get(ufunc) or _UNARY[ufunc]).format(*parts)
            rhs = f"{self.dtype_name(e.dtype)}({inner})"
        var = self.fresh("e")
        self.emit(f"{var} = {rhs}")
        self.memo[key] = var
        return var


__all__ = ["Expr", "ExprRenderer", "NotElementwise", "Sym", "channel_constant", "draw", "flipped",
           "literal", "node_count", "output_specs", "positional", "substitute", "trace", "window"]
