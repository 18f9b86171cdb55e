"""pymap and pymap_nogil: range(N).map(f) with a Python function Numba cannot compile.

pymap's f holds the GIL (a busy loop and string formatting, ~20 us); pymap_nogil's f
spends its time in hashlib on a 256 KB buffer, which releases the GIL, as NumPy,
file reads and most C extensions do: there parallel calls can overlap.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from perf.measure import Implementation, Workload, nbdata_options

FULL_ROWS = 20_000
QUICK_ROWS = 5_000  # at least nd.Options().fusion_min_rows, as the full size
# Iterations of the busy loop; with the formatting, about 20 us per call on the
# 2-core benchmark machine (the plain Python row shows the cost per call here).
SPIN = 1_800


def slow_digits(x) -> np.int64:
    """A per-element Python function: a busy loop and a thousands-separated format
    (format specs are beyond Numba, so no engine can compile this). Returns
    ``100 * x + digits`` so that the check also sees the order."""
    busy = sum(range(SPIN))
    digits = len(format(int(x) * 7919, ","))
    return np.int64(int(x) * 100 + digits + (busy & 0))


# pymap_nogil: bytes hashed per call (hashlib releases the GIL above 2 KB).
HASH_BYTES = 256 * 1024
_BLOCK = np.arange(HASH_BYTES, dtype=np.uint64).astype(np.uint8).tobytes()


def hashed(x) -> np.int64:
    """A per-element Python function that spends its time with the GIL released:
    SHA-256 of a 256 KB buffer salted with x. Returns ``100 * x`` plus a digest
    byte so that the check also sees the order."""
    import hashlib
    h = hashlib.sha256(int(x).to_bytes(8, "little"))
    h.update(_BLOCK)
    digest = h.digest()
    return np.int64(int(x) * 100 + digest[0] % 100)


def expected(n: int, f=slow_digits) -> np.ndarray:
    """What every row delivers over range(n), in order."""
    return np.array([f(i) for i in range(n)], np.int64)


def build(quick: bool) -> Workload:
    """The pymap table (f holds the GIL)."""
    return _build(quick, slow_digits, "pymap", "a ~20 us Python function holding the GIL",
                  "f holds the GIL throughout, so parallel calls can overlap only the "
                  "engines' own work around it; time s / N is the cost per element.")


def build_nogil(quick: bool) -> Workload:
    """The pymap_nogil table (f releases the GIL in hashlib)."""
    return _build(quick, hashed, "pymap_nogil",
                  "a ~150 us Python function that releases the GIL (hashlib)",
                  "f spends most of its time in hashlib with the GIL released, so calls on "
                  "different threads overlap; time s / N is the cost per element.")


def _build(quick: bool, f, name: str, what: str, notes: str) -> Workload:
    n_rows = QUICK_ROWS if quick else FULL_ROWS
    slow_digits = f

    def nbdata_map(parallel):
        def prepare(n):
            import nbdata as nd
            calls = nd.AUTOTUNE if parallel else None
            ds = (nd.Dataset.range(n)
                  .map(slow_digits, num_parallel_calls=calls)
                  .with_options(nbdata_options(nd)))
            pipe = ds.compile()
            return lambda: pipe
        return prepare

    def tf_py_function(parallel):
        def prepare(n):
            import tensorflow as tf

            def call(x):
                value = tf.py_function(lambda t: slow_digits(t.numpy()), [x], tf.int64)
                value.set_shape(())
                return value

            calls = tf.data.AUTOTUNE if parallel else None
            ds = tf.data.Dataset.range(n).map(call, num_parallel_calls=calls)
            return ds.as_numpy_iterator
        return prepare

    def python_loop(n):
        def epoch():
            for i in range(n):
                yield slow_digits(i)
        return epoch

    slow = 2_000 if quick else 5_000  # tf.py_function costs ~300 us per element
    impls = [
        Implementation("nbdata map(f)", "nbdata", nbdata_map(False), "nbdata"),
        Implementation("nbdata map(f, num_parallel_calls=AUTOTUNE)", "nbdata",
                       nbdata_map(True), "nbdata"),
        Implementation("tf.data map(tf.py_function(f))", "tf.data", tf_py_function(False),
                       "tensorflow", prefix=slow),
        Implementation("tf.data map(tf.py_function(f), num_parallel_calls=AUTOTUNE)",
                       "tf.data", tf_py_function(True), "tensorflow", prefix=slow),
        Implementation("plain Python loop: f(i) for i in range(N)", "python", python_loop),
    ]
    return Workload(f"{name}: range({n_rows:,}).map(f), f {what} "
                    "(not Numba-compilable), no batching", "rows", n_rows, impls,
                    _checker(f), notes, baseline_group="nbdata",
                    baseline_label="vs nbdata sequential")


def _checker(f):
    cache = {}

    def check(elements: list, n: int, full_batches: bool) -> Optional[str]:
        if n not in cache:
            cache[n] = expected(n, f)
        want = cache[n]
        got = np.array([np.asarray(e).reshape(()) for e in elements], np.int64)
        if len(got) != n:
            return f"{len(got):,} elements delivered, {n:,} expected"
        if not np.array_equal(got, want):
            if np.array_equal(np.sort(got), np.sort(want)):
                return "the right values, out of order"
            return "values differ from f(i)"
        return None
    return check
