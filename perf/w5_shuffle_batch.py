"""w5: range(N).shuffle(10_000, seed=1).batch(1024): a buffer shuffle, batched."""

from __future__ import annotations

from typing import Optional

import numba
import numpy as np

from perf.measure import Implementation, Workload, nbdata_rows

BATCH = 1024
BUFFER = 10_000
SEED = 1
FULL_ROWS = 2_000_000
QUICK_ROWS = 200_000
# The hand kernels shuffle this many rows per call, then slice them into batches.
CHUNK_ROWS = 64 * BATCH


def nbdata_dataset(nd, n: int):
    """The w5 pipeline in nbdata."""
    return nd.Dataset.range(n).shuffle(BUFFER, seed=SEED).batch(BATCH)


@numba.njit(inline="always")
def _next_bits(rng):
    """splitmix64: advance the state in rng[0] and return 64 random bits."""
    rng[0] += np.uint64(0x9E3779B97F4A7C15)
    x = rng[0]
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@numba.njit
def buffer_shuffle(state, rng, buffer, out):
    """tf.data's buffer shuffle over the indices 0..n-1, writing up to len(out) of them.

    state = [next input index, n, elements in the buffer]; `buffer` holds
    buffered indices and was filled with the first min(n, len(buffer)). Each
    output draws a slot uniformly from the buffer, hands out its element and
    puts the next input in its place; once the input is exhausted, the last
    buffered element moves into the drawn slot and the buffer shrinks.
    Returns how many indices were written (0 when the epoch is over).
    """
    next_in, n, held = state[0], state[1], state[2]
    k = 0
    while k < out.shape[0] and held > 0:
        # A slot in [0, held): the high 32 random bits scaled by held (< 2**32).
        slot = np.int64(((_next_bits(rng) >> np.uint64(32)) * np.uint64(held)) >> np.uint64(32))
        out[k] = buffer[slot]
        k += 1
        if next_in < n:
            buffer[slot] = next_in
            next_in += 1
        else:
            held -= 1
            buffer[slot] = buffer[held]
    state[0], state[2] = next_in, held
    return k


class BufferShuffle:
    """Epochs of shuffled indices 0..n-1 from `buffer_shuffle`, a chunk per kernel call;
    memory is the buffer and one chunk. Each epoch draws a new seed from `seed`."""

    def __init__(self, n: int, buffer_size: int, seed: int, chunk: int):
        self.n, self.buffer_size, self.chunk = n, buffer_size, chunk
        self.seeds = np.random.default_rng(seed)

    def chunks(self):
        """Yield int64 arrays of shuffled indices, `chunk` long except the last."""
        held = min(self.n, self.buffer_size)
        buffer = np.arange(held, dtype=np.int64)
        state = np.array([held, self.n, held], np.int64)
        rng = np.array([self.seeds.integers(0, 2**63)], np.uint64)
        while True:
            out = np.empty(self.chunk, np.int64)
            count = buffer_shuffle(state, rng, buffer, out)
            if count == 0:
                return
            yield out[:count]


def _kernel_batches(shuffle: BufferShuffle):
    for indices in shuffle.chunks():  # the source is range(n): an index is its value
        for s in range(0, len(indices), BATCH):
            yield indices[s:s + BATCH]


def _numpy_batches(rng: np.random.Generator, n: int):
    values = rng.permutation(n)
    for s in range(0, n, BATCH):
        yield values[s:s + BATCH]


def build(quick: bool) -> Workload:
    """The w5 table: every implementation's row and the output check."""
    n_rows = QUICK_ROWS if quick else FULL_ROWS

    def n_only(n):
        return (n,)

    nbdata_fused, nbdata_reference = nbdata_rows(nbdata_dataset, n_only)

    def kernel(n):
        shuffle = BufferShuffle(n, BUFFER, SEED, CHUNK_ROWS)
        return lambda: _kernel_batches(shuffle)

    def numpy_permutation(n):
        rng = np.random.default_rng(SEED)
        return lambda: _numpy_batches(rng, n)

    def tf_shuffle(prefetch):
        def prepare(n):
            import tensorflow as tf
            ds = tf.data.Dataset.range(n).shuffle(BUFFER, seed=SEED).batch(BATCH)
            if prefetch:
                ds = ds.prefetch(tf.data.AUTOTUNE)
            return ds.as_numpy_iterator
        return prepare

    def torch_loader(n):
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(range(n), batch_size=BATCH, shuffle=True,
                            generator=torch.Generator().manual_seed(SEED))
        return lambda: loader

    slow = 20_000 if quick else 200_000
    impls = [
        Implementation("nbdata (ds.compile())", "nbdata", nbdata_fused, "nbdata"),
        Implementation("nbdata reference (fusion=False)", "nbdata", nbdata_reference,
                       "nbdata", prefix=slow),
        Implementation("hand Numba kernel (tf.data buffer-shuffle algorithm)", "kernel",
                       kernel),
        Implementation("NumPy rng.permutation + slicing [p]", "numpy", numpy_permutation),
        Implementation("tf.data shuffle/batch", "tf.data", tf_shuffle(False), "tensorflow"),
        Implementation("tf.data shuffle/batch/prefetch(AUTOTUNE)", "tf.data",
                       tf_shuffle(True), "tensorflow"),
        Implementation("torch DataLoader(range, shuffle=True) [p]", "torch", torch_loader,
                       "torch"),
    ]
    notes = (f"[p] full-permutation shuffle (every order equally likely, O(N) memory): a "
             f"different, related algorithm to the {BUFFER:,}-element buffer shuffle of the "
             f"other rows.")
    return Workload(f"w5: range({n_rows:,}).shuffle({BUFFER:,}, seed={SEED}).batch({BATCH})",
                    "rows", n_rows, impls, check, notes, report_memory=True)


def check(batches: list, n: int, full_batches: bool) -> Optional[str]:
    """Full batches but the last, each of 0..n-1 exactly once, not in the input order."""
    if not batches:
        return "no batches" if n else None
    sizes = [len(np.asarray(b)) for b in batches]
    if any(size != BATCH for size in sizes[:-1]) or not 0 < sizes[-1] <= BATCH:
        return f"batch sizes other than {BATCH} (last: 1..{BATCH})"
    got = np.concatenate([np.asarray(b).reshape(-1) for b in batches])
    if got.dtype != np.int64:
        return f"dtype {got.dtype}, want int64"
    if not np.array_equal(np.sort(got), np.arange(n)):
        return f"{len(got):,} values delivered, each of 0..{n - 1:,} expected once"
    if n > 1 and np.array_equal(got, np.arange(n)):
        return "not shuffled: the values come in input order"
    return None
