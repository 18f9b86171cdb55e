"""tf1_map: a CIFAR-style uint8 -> float32 normalize map written with TF1's names
(``import nbdata.compat.v1 as tf``: ``tf.reshape(tf.cast(x, tf.float32) / 255.0,
[32, 32, 3])``) against the same map in NumPy's spelling and in tf.data.

Both nbdata rows compile to the same fused kernel (tests/compat/test_v1_fusion.py), so
the TF1 spelling should run within noise of the NumPy one.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from perf.measure import Implementation, Workload, nbdata_options

FULL_ROWS = 50_000
QUICK_ROWS = 5_000
BATCH = 256


def _data(n: int) -> np.ndarray:
    return (np.arange(n * 3072, dtype=np.uint64) * 2654435761 % 251).astype(np.uint8).reshape(n, 3072)


def build(quick: bool) -> Workload:
    n_rows = QUICK_ROWS if quick else FULL_ROWS

    def nbdata_map(tf1_names: bool):
        def prepare(n):
            import nbdata as nd
            if tf1_names:
                import nbdata.compat.v1 as tf

                def f(x):
                    return tf.reshape(tf.cast(x, tf.float32) / 255.0, [32, 32, 3])
            else:
                def f(x):
                    return (x.astype(np.float32) / 255.0).reshape(32, 32, 3)
            ds = (nd.Dataset.from_tensor_slices(_data(n)).map(f).batch(BATCH)
                  .with_options(nbdata_options(nd)))
            pipe = ds.compile()
            return lambda: pipe
        return prepare

    def tf_data(n):
        import tensorflow as tf
        ds = (tf.data.Dataset.from_tensor_slices(_data(n))
              .map(lambda x: tf.reshape(tf.cast(x, tf.float32) / 255.0, [32, 32, 3]),
                   num_parallel_calls=tf.data.AUTOTUNE)
              .batch(BATCH).prefetch(tf.data.AUTOTUNE))
        return ds.as_numpy_iterator

    impls = [
        Implementation("nbdata map(NumPy: x.astype(np.float32) / 255.0 .reshape)", "nbdata",
                       nbdata_map(False), "nbdata"),
        Implementation("nbdata map(TF1 names: tf.reshape(tf.cast(x, tf.float32) / 255.0))",
                       "nbdata", nbdata_map(True), "nbdata"),
        Implementation("tf.data map(the same TF ops, AUTOTUNE)", "tf.data", tf_data,
                       "tensorflow"),
    ]
    return Workload(f"tf1_map: {n_rows:,} CIFAR-style uint8 rows (3,072 B) -> float32 "
                    f"(32, 32, 3) / 255, batch {BATCH}", "rows", n_rows, impls, _check,
                    "The two nbdata rows compile to the same fused kernel.",
                    baseline_group="nbdata", baseline_label="vs nbdata NumPy spelling")


def _check(batches: list, n: int, full_batches: bool) -> Optional[str]:
    got = sum(len(b) for b in batches)
    if got != n:
        return f"{got:,} rows delivered, {n:,} expected"
    first = np.asarray(batches[0])
    want = (_data(min(n, BATCH)).astype(np.float32) / np.float32(255.0)).reshape(-1, 32, 32, 3)
    if first.dtype != np.float32 or not np.array_equal(first[:len(want)], want[:len(first)]):
        return "values differ from x / 255"
    return None
