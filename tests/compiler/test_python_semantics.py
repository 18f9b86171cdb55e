"""A compiled user function behaves as the Python function: the same element, or the
row is handed to the reference path (which gives Python's value or raises Python's
error). Never a made-up value, at any size, thread count or fusion setting.

Two levels:
- pipelines: the issue's examples (integer division by zero, a table read past its end)
  and a set of functions whose Numba result differs from Python's (overflow, casts,
  math domain errors, NumPy's narrow integers, float32 with Python floats), fused at
  several sizes and thread counts against ``fusion=False``;
- a randomized differential test of the compiled form itself: random functions with
  data-dependent indexing, division, casts and overflow, run compiled (nbdata's
  Python-semantics pipeline) and in Python on edge values. A compiled call that returns
  must return Python's value; one that raises hands the row over (always correct).
  ``NBDATA_PYSEM_FUNCTIONS=3000`` runs more than CI's default.
"""

import math
import os
import random
import warnings

import numpy as np
import pytest

import nbdata as nd
from nbdata.compiler.pysemantics import compile_user_function

TABLE = np.arange(1000, dtype=np.int64) * 10


def lookup(x):
    return TABLE[int(x)]


def options(fused: bool, threads: int = 0) -> nd.Options:
    o = nd.Options()
    if fused:
        o.fusion_min_rows = 0
        o.threading.private_threadpool_size = threads
    else:
        o.fusion = False
    return o


def outcome(ds):
    got, error = [], None
    try:
        for b in ds:
            got.append(np.asarray(b))
    except nd.errors.OpError as e:
        error = (type(e), type(e.__cause__))
    values = np.concatenate(got) if got else np.zeros(0)
    return values, error


@pytest.mark.parametrize("fn, cause", [
    (lambda x: 10 // (int(x) - 1000), ZeroDivisionError),
    (lookup, IndexError),
])
def test_issue_examples_raise_at_any_size(fn, cause):
    for rows, threads in ((1100, 2), (5000, 1), (5000, 2)):
        ds = nd.Dataset.range(rows).map(fn).batch(256).with_options(options(True, threads))
        with pytest.raises(nd.errors.InvalidArgumentError) as e:
            list(ds.compile())
        assert isinstance(e.value.__cause__, cause)
    with pytest.raises(nd.errors.InvalidArgumentError):
        list(nd.Dataset.range(rows).map(fn).batch(256).with_options(options(False)))


def test_explain_still_compiles_the_function():
    text = nd.Dataset.range(5000).map(lookup).batch(256).compile().explain()
    assert "[Numba-compiled call]" in text


# A value column with edge values, and functions whose plain Numba result differs from
# Python's on some of them.
# Mostly ordinary rows (which run compiled) with the edge values in a few places.
def _column(edges, dtype, rows=2000):
    col = np.arange(rows).astype(dtype)
    col[np.arange(len(edges)) * (rows // len(edges))] = np.array(edges, dtype=dtype)
    return col


INT64 = _column([0, 1, -1, 7, 999, 2**31 - 1, 2**31, 2**62, -2**63, 2**63 - 1], np.int64)
INT32 = _column([0, 1, -1, 100000, 2**31 - 1, -2**31], np.int32)
FLOAT64 = _column([0.0, -0.0, 1.5, -2.5, np.nan, np.inf, -np.inf, 1e300, 2.0**63, 3.0], np.float64)
FLOAT32 = _column([0.0, 1.5, -2.5, 3.0, 0.1, 1e30], np.float32)

CASES = [
    ("int overflow", INT64, lambda x: (int(x) * 4) % 1000),
    ("int pow", INT64, lambda x: (int(x) % 7 - 3) ** 2 + int(x) % 3),
    ("int negative pow", INT64, lambda x: float((int(x) % 5 - 2) ** -1)),
    ("shift", INT64, lambda x: (int(x) << 3) % 1001),
    ("neg", INT64, lambda x: -x // 3),
    ("int(nan)", FLOAT64, lambda x: int(x) % 100),
    ("np.uint8 of int", INT64, lambda x: np.int64(np.uint8(int(x) % 300))),
    ("sqrt domain", FLOAT64, lambda x: math.sqrt(x - 1.0)),
    ("log domain", FLOAT64, lambda x: math.log(abs(x))),
    ("int32 wraps in NumPy", INT32, lambda x: np.int64((x * np.int32(3)) // 7)),
    ("float32 with a Python float", FLOAT32, lambda x: x * 0.1 + 0.3),
    ("float division", FLOAT64, lambda x: x / (x - 3.0)),
    ("table", INT64, lambda x: TABLE[int(x) % 1001]),
]


@pytest.mark.parametrize("name, column, fn", CASES, ids=[c[0] for c in CASES])
def test_fused_equals_python(name, column, fn):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want_values, want_error = outcome(
            nd.Dataset.from_tensor_slices(column).map(fn).batch(256).with_options(options(False)))
        for threads in (2,):
            got_values, got_error = outcome(
                nd.Dataset.from_tensor_slices(column).map(fn).batch(256)
                .with_options(options(True, threads)).compile())
            assert got_error == want_error
            assert got_values.dtype == want_values.dtype
            np.testing.assert_array_equal(got_values, want_values)


# ------------------------------------------------------- randomized differential

N_FUNCTIONS = int(os.environ.get("NBDATA_PYSEM_FUNCTIONS", "30"))
SMALL = np.arange(50, dtype=np.int64) * 7
EDGE = {
    "int64": [0, 1, -1, 2, 7, -7, 1000, 2**31 - 1, 2**31, 2**32 + 5, 2**62, -2**62,
              2**63 - 1, -2**63],
    "int32": [0, 1, -1, 2, 7, -7, 1000, 46341, 2**31 - 1, -2**31],
    "uint8": [0, 1, 2, 7, 127, 128, 255],
    "float64": [0.0, -0.0, 0.5, 1.0, -1.0, 2.5, -7.25, 1e300, -1e300, 2.0**63, 1e-300,
                float("nan"), float("inf"), -float("inf")],
    "float32": [0.0, 0.5, 1.0, -1.0, 2.5, -7.25, 0.1, 3e38, 1e-30, float("nan"),
                float("inf")],
}
INT_LITERALS = ["0", "1", "2", "3", "-1", "7", "1000", "2**31", "2**62", "50"]
FLOAT_LITERALS = ["0.5", "0.1", "1e300", "2.0", "-3.5"]


def _expr(rng: random.Random, depth: int) -> str:
    if depth <= 0 or rng.random() < 0.25:
        r = rng.random()
        if r < 0.5:
            return "x"
        if r < 0.7:
            return rng.choice(["int(x)", "float(x)"])
        return rng.choice(INT_LITERALS + FLOAT_LITERALS)
    a = _expr(rng, depth - 1)
    kind = rng.random()
    if kind < 0.55:
        b = _expr(rng, depth - 1)
        op = rng.choice(["+", "-", "*", "//", "%", "/", "**", "<<", ">>", "&"])
        if op == "**":
            b = rng.choice(["2", "3", "-1", "0.5", b])
        return f"({a} {op} {b})"
    return rng.choice([
        f"(-{a})", f"abs({a})", f"int({a})", f"float({a})", f"np.int32({a})",
        f"np.uint8({a})", f"np.int64({a})", f"np.float32({a})", f"math.sqrt({a})",
        f"math.log({a})", f"math.exp({a})", f"math.floor({a})", f"round({a})",
        f"SMALL[int({a})]", f"SMALL[int({a}) % 50]", f"SMALL[{a}]",
    ])


def _same(p, v) -> bool:
    if isinstance(p, complex) or isinstance(v, complex):
        return False
    if isinstance(p, (bool, np.bool_)) or isinstance(v, (bool, np.bool_)):
        return bool(p) == bool(v) and isinstance(v, (bool, np.bool_)) == isinstance(p, (bool, np.bool_))
    pf = isinstance(p, (float, np.floating))
    vf = isinstance(v, (float, np.floating))
    if pf or vf:
        if not (pf and vf):
            return False
        p64, v64 = float(p), float(v)
        if math.isnan(p64) or math.isnan(v64):
            return math.isnan(p64) and math.isnan(v64)
        # float32 results must agree in float32 (the column's dtype), others exactly.
        if isinstance(p, np.float32) or isinstance(v, np.float32):
            return np.float32(p) == np.float32(v)
        return p64 == v64 and math.copysign(1, p64) == math.copysign(1, v64)
    return int(p) == int(v)


def _functions(count: int, seed: int = 20261128):
    rng = random.Random(seed)
    made = 0
    while made < count:
        dtype = rng.choice(list(EDGE))
        text = _expr(rng, rng.randint(1, 3))
        yield dtype, text
        made += 1


def test_randomized_compiled_functions_never_make_up_values():
    checked = handed_over = compiled = 0
    failures = []
    for dtype, text in _functions(N_FUNCTIONS):
        fn = eval(f"lambda x: {text}", {"np": np, "math": math, "SMALL": SMALL})
        nb = compile_user_function(fn)
        for raw in EDGE[dtype]:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                try:
                    x = np.dtype(dtype).type(raw)
                except OverflowError:
                    continue
                try:
                    p, perr = fn(x), None
                except Exception as e:  # noqa: BLE001 - Python's own error is the reference
                    p, perr = None, e
                try:
                    v = nb(x)
                except Exception as e:  # noqa: BLE001
                    if type(e).__name__ in ("TypingError", "UnsupportedError", "LoweringError",
                                            "NumbaError") or "Failed in nopython" in str(e):
                        break   # Numba does not compile it: nbdata runs it in Python
                    handed_over += 1
                    continue
                compiled += 1
                checked += 1
                if perr is not None or not _same(p, v):
                    failures.append((dtype, text, raw, p if perr is None else repr(perr), v))
    assert not failures, f"{len(failures)} made-up values, e.g. {failures[:5]}"
    assert compiled > N_FUNCTIONS   # most rows run compiled: the guards are not all-refusing
