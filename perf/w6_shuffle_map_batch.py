"""w6: from_tensor_slices((X, y)).shuffle(10_000, seed=1).map((x - 0.5) * 2).batch(256).prefetch(2)."""

from __future__ import annotations

import functools
from typing import Optional

import numba
import numpy as np

from perf.measure import Implementation, Workload, nbdata_rows
from perf.w5_shuffle_batch import BufferShuffle  # the hand kernels' shared index shuffle

BATCH = 256
BUFFER = 10_000
SEED = 1
PREFETCH = 2
FULL_ROWS = 1_000_000
QUICK_ROWS = 100_000
# The hand kernel shuffles, gathers and maps this many rows per call.
CHUNK_ROWS = 64 * BATCH


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The w6 source: uniform float32 features and int64 labels 0..n-1."""
    rng = np.random.default_rng(seed)
    return rng.random((n, 16), dtype=np.float32), np.arange(n, dtype=np.int64)


def nbdata_dataset(nd, x: np.ndarray, y: np.ndarray):
    """The w6 pipeline in nbdata."""
    return (nd.Dataset.from_tensor_slices((x, y))
            .shuffle(BUFFER, seed=SEED)
            .map(lambda x, l: ((x - 0.5) * 2.0, l))
            .batch(BATCH)
            .prefetch(PREFETCH))


@numba.njit(parallel=True)
def _gather_scale(x, y, index, out_x, out_y):
    for i in numba.prange(index.shape[0]):
        row = index[i]
        for j in range(x.shape[1]):
            out_x[i, j] = (x[row, j] - np.float32(0.5)) * np.float32(2.0)
        out_y[i] = y[row]


def _kernel_batches(x, y, shuffle: BufferShuffle):
    for index in shuffle.chunks():
        out_x = np.empty((len(index), x.shape[1]), np.float32)
        out_y = np.empty(len(index), y.dtype)
        _gather_scale(x, y, index, out_x, out_y)
        for s in range(0, len(index), BATCH):
            yield out_x[s:s + BATCH], out_y[s:s + BATCH]


def build(quick: bool) -> Workload:
    """The w6 table: data, every implementation's row, and the output check."""
    n_rows = QUICK_ROWS if quick else FULL_ROWS

    @functools.cache
    def data():
        return make_data(n_rows)

    def head(n):
        x, y = data()
        return x[:n], y[:n]

    nbdata_fused, nbdata_reference = nbdata_rows(nbdata_dataset, head)

    def kernel(n):
        x, y = head(n)
        shuffle = BufferShuffle(n, BUFFER, SEED, CHUNK_ROWS)
        return lambda: _kernel_batches(x, y, shuffle)

    def tf_pipeline(parallel):
        def prepare(n):
            import tensorflow as tf
            calls = tf.data.AUTOTUNE if parallel else None
            ds = (tf.data.Dataset.from_tensor_slices(head(n))
                  .shuffle(BUFFER, seed=SEED)
                  .map(lambda x, l: ((x - 0.5) * 2.0, l), num_parallel_calls=calls)
                  .batch(BATCH)
                  .prefetch(PREFETCH))
            return ds.as_numpy_iterator
        return prepare

    def torch_loader(workers):
        def prepare(n):
            import torch
            from torch.utils.data import DataLoader
            from perf.torch_datasets import ArrayRows, scaled_tensors
            loader = DataLoader(ArrayRows(*head(n)), batch_size=BATCH, shuffle=True,
                                collate_fn=scaled_tensors, num_workers=workers,
                                persistent_workers=workers > 0,
                                generator=torch.Generator().manual_seed(SEED))
            return lambda: loader
        return prepare

    slow = 20_000 if quick else 50_000
    per_element = 50_000 if quick else 200_000
    impls = [
        Implementation("nbdata (ds.compile())", "nbdata", nbdata_fused, "nbdata"),
        Implementation("nbdata reference (fusion=False)", "nbdata", nbdata_reference,
                       "nbdata", prefix=slow),
        Implementation("hand Numba kernel (index buffer-shuffle + prange gather/map)",
                       "kernel", kernel),
        Implementation("tf.data shuffle/map(AUTOTUNE)/batch/prefetch", "tf.data",
                       tf_pipeline(True), "tensorflow", prefix=per_element),
        Implementation("tf.data shuffle/map/batch/prefetch", "tf.data", tf_pipeline(False),
                       "tensorflow", prefix=per_element),
        Implementation("torch DataLoader shuffle + batch fetch/collate map, 0 workers [p]",
                       "torch", torch_loader(0), "torch"),
        Implementation("torch DataLoader shuffle + batch fetch/collate map, 2 workers [p]",
                       "torch", torch_loader(2), "torch"),
    ]
    notes = ("[p] full-permutation shuffle (RandomSampler): a different, related algorithm "
             f"to the {BUFFER:,}-element buffer shuffle of the other rows.")
    return Workload(f"w6: shuffle({BUFFER:,})/map/batch({BATCH})/prefetch({PREFETCH}) over "
                    f"{n_rows:,} x 16 float32 rows", "rows", n_rows, impls, _checker(data),
                    notes, compare_to=("w1", 0, "vs w1 nbdata fused"))


def _checker(data, spot_checks: int = 64):
    def check(batches: list, n: int, full_batches: bool) -> Optional[str]:
        x, y = data()
        if not batches:
            return "no batches" if n else None
        if any(len(b[-1]) != BATCH for b in batches[:-1]):
            return "a batch before the last is not full"
        got_x = np.concatenate([np.asarray(b[0]) for b in batches])
        got_y = np.concatenate([np.asarray(b[1]) for b in batches])
        if got_x.dtype != np.float32 or got_y.dtype != np.int64:
            return f"dtypes {got_x.dtype}, {got_y.dtype}"
        if got_x.shape != (len(got_y), x.shape[1]):
            return f"features of shape {got_x.shape}"
        if not np.array_equal(np.sort(got_y), y[:n]):
            return f"{len(got_y):,} labels delivered, each of {n:,} expected once"
        if n > 1 and np.array_equal(got_y, y[:n]):
            return "not shuffled: the labels come in input order"
        picks = np.linspace(0, len(got_y) - 1, min(spot_checks, len(got_y))).astype(np.int64)
        want = (x[got_y[picks]] - np.float32(0.5)) * np.float32(2.0)
        if not np.array_equal(got_x[picks], want):
            return "a row's features differ from (X[label] - 0.5) * 2 in float32"
        return None
    return check
