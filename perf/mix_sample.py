"""mix: 8 sources mixed with weights -> map -> batch (``sample_from_datasets``), against
tf.data's ``sample_from_datasets`` and a hand loop (NumPy picks, then gathers)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from perf.measure import Implementation, Workload, nbdata_rows

SOURCES = 8
BATCH = 256
SEED = 3
FULL_ROWS = 1_000_000          # rows over all sources
QUICK_ROWS = 100_000
WEIGHTS = np.arange(1, SOURCES + 1, dtype=np.float64) / np.arange(1, SOURCES + 1).sum()


def _sizes(n: int) -> list:
    """Rows of each source: proportional to its weight (so the sources end together)."""
    sizes = np.floor(WEIGHTS * n).astype(int)
    sizes[-1] += n - sizes.sum()
    return sizes.tolist()


def _arrays(n: int) -> list:
    """Source k holds float32 rows (value, k): value k * 10**6 + row (exact in float32, doubled too)."""
    out = []
    for k, size in enumerate(_sizes(n)):
        out.append(np.stack([np.arange(size, dtype=np.float32) + k * 1e6,
                             np.full(size, k, np.float32)], axis=1))
    return out


def nbdata_dataset(nd, arrays):
    sources = [nd.Dataset.from_tensor_slices(a) for a in arrays]
    return nd.Dataset.sample_from_datasets(sources, WEIGHTS.tolist(), seed=SEED).map(
        lambda x: x * 2.0).batch(BATCH)


def _hand(arrays):
    """Draws picks with NumPy, skips ended sources, gathers rows and scales them."""
    def run():
        rng = np.random.default_rng(SEED)
        pos = [0] * len(arrays)
        live = np.array([len(a) > 0 for a in arrays])
        cdf = np.cumsum(WEIGHTS)
        out, filled = np.empty((BATCH, 2), np.float32), 0
        while live.any():
            picks = np.searchsorted(cdf, rng.random(4096) * cdf[-1], side="right")
            for k in np.minimum(picks, len(arrays) - 1).tolist():
                if not live[k]:
                    continue
                out[filled] = arrays[k][pos[k]]
                pos[k] += 1
                live[k] = pos[k] < len(arrays[k])
                filled += 1
                if filled == BATCH:
                    yield out * 2.0
                    out, filled = np.empty((BATCH, 2), np.float32), 0
                if not live.any():
                    break
        if filled:
            yield out[:filled] * 2.0
    return run


def build(quick: bool) -> Workload:
    n_rows = QUICK_ROWS if quick else FULL_ROWS

    def head(n):
        return (_arrays(n),)

    nbdata_fused, nbdata_reference = nbdata_rows(nbdata_dataset, head)

    def hand(n):
        return _hand(_arrays(n))

    def tf_mix(n):
        import tensorflow as tf
        sources = [tf.data.Dataset.from_tensor_slices(a) for a in _arrays(n)]
        ds = tf.data.Dataset.sample_from_datasets(sources, WEIGHTS.tolist(), seed=SEED)
        ds = ds.map(lambda x: x * 2.0, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH)
        return ds.as_numpy_iterator

    slow = 20_000 if quick else 100_000
    impls = [
        Implementation("nbdata (ds.compile())", "nbdata", nbdata_fused, "nbdata"),
        Implementation("nbdata reference (fusion=False)", "nbdata", nbdata_reference,
                       "nbdata", prefix=slow),
        Implementation("hand loop (NumPy picks, row gathers)", "numpy", hand, prefix=slow),
        Implementation("tf.data sample_from_datasets/map/batch", "tf.data", tf_mix,
                       "tensorflow"),
    ]
    notes = ("Each engine draws its own picks: the rows of every source come once, in the "
             "source's order; the mixture's order differs between engines.")
    return Workload(f"mix: {SOURCES} sources ({n_rows:,} rows) sample_from_datasets(weights 1..8)"
                    f" -> map(x*2) -> batch({BATCH})", "rows", n_rows, impls, check, notes)


def check(batches: list, n: int, full_batches: bool) -> Optional[str]:
    """Every row of every source once (values doubled), each source in its order."""
    if not batches:
        return "no batches" if n else None
    got = np.concatenate([np.asarray(b).reshape(-1, 2) for b in batches])
    if got.dtype != np.float32:
        return f"dtype {got.dtype}, want float32"
    want = _sizes(n)
    for k in range(SOURCES):
        rows = got[got[:, 1] == 2.0 * k, 0] / 2.0 - k * 1e6
        if not np.array_equal(rows, np.arange(len(rows), dtype=np.float32)):
            return f"source {k}: rows out of order or repeated"
        if len(rows) != want[k]:
            return f"source {k}: {len(rows):,} rows, want {want[k]:,}"
    return None
