"""Row-width sweep (issue 32): nbdata against a hand prange kernel over rows of every width.

`python -m perf --workload sweep` measures each cell of
row widths {1, 16, 256, 3072, 150528} x {u8->f32 normalize, f32->f32 affine, i64 filter}
x {map->batch, batch->map, shuffle->map->batch}: nbdata's compiled pipeline and a hand
Numba kernel doing the same work, in one process, epochs of the two alternating (so a
busy neighbour slows both alike), best epoch of each kept. Printed as a matrix of
nbdata/hand ratios (target >= 0.8x in every cell) and one of both rates.

The hand kernels keep nbdata's batch contract: a yielded batch is never overwritten, so
every kernel call writes a freshly allocated output (one per chunk of batches; the
batches are slices of it). Width 1 is a source of scalars (`from_tensor_slices` of a
1-D array). The ops, per row `x`:

- normalize: `x.astype(np.float32) * np.float32(1/255)` over uint8;
- affine: `x * np.float32(2) - np.float32(1)` over float32;
- filter: keep rows whose first value is not a multiple of 3 (int64).

map->batch is `map(f).batch(128)` (`filter(p).batch(128)`); batch->map is tf.data's
vectorized idiom `batch(128).map(f)` (for the filter: `batch(128).map(lambda b:
b[p(b)])`, batches of the kept rows of each 128 source rows, and the hand kernel gives
the same); shuffle->map->batch puts `shuffle(10_000, seed=1)` first (the hand kernel
draws a buffer shuffle of row numbers, perf/w5_shuffle_batch.py, and gathers).
Sizes scale with width (about 24 MB of source per epoch, at least 384 rows).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

WIDTHS = (1, 16, 256, 3072, 150528)
OPS = ("normalize u8->f32", "affine f32->f32", "filter i64")
ORDERS = ("map->batch", "batch->map", "shuffle->map->batch")
BATCH = 128
BUFFER = 10_000
SEED = 1
EPOCH_BYTES = 24 << 20
QUICK_EPOCH_BYTES = 4 << 20
MIN_ROWS = 3 * BATCH
MAX_ROWS = 4_000_000
CHUNK_BYTES = 4 << 20       # hand kernels: source bytes per kernel call
TIMED_S = 0.4                # per cell and side: epochs until this much timing, at least 3
TARGET = 0.8


# ------------------------------------------------------------------ hand kernels

_KERNELS: dict = {}


def _kernels() -> dict:
    """The hand kernels (compiled on first call; Numba's disk cache keeps them)."""
    if _KERNELS:
        return _KERNELS
    import numba
    from numba import prange

    jit = numba.njit(parallel=True, cache=True)

    @jit
    def normalize_range(x, lo, out):
        for i in prange(out.shape[0]):
            for j in range(x.shape[1]):
                out[i, j] = np.float32(x[lo + i, j]) * np.float32(1 / 255)

    @jit
    def normalize_gather(x, index, out):
        for i in prange(index.shape[0]):
            r = index[i]
            for j in range(x.shape[1]):
                out[i, j] = np.float32(x[r, j]) * np.float32(1 / 255)

    @jit
    def affine_range(x, lo, out):
        for i in prange(out.shape[0]):
            for j in range(x.shape[1]):
                out[i, j] = x[lo + i, j] * np.float32(2) - np.float32(1)

    @jit
    def affine_gather(x, index, out):
        for i in prange(index.shape[0]):
            r = index[i]
            for j in range(x.shape[1]):
                out[i, j] = x[r, j] * np.float32(2) - np.float32(1)

    @jit
    def keep_range(x, lo, keep):
        for i in prange(keep.shape[0]):
            keep[i] = x[lo + i, 0] % 3 != 0

    @jit
    def keep_gather(x, index, keep):
        for i in prange(index.shape[0]):
            keep[i] = x[index[i], 0] % 3 != 0

    @jit
    def copy_rows(x, index, out):
        for i in prange(index.shape[0]):
            r = index[i]
            for j in range(x.shape[1]):
                out[i, j] = x[r, j]

    _KERNELS.update(normalize_range=normalize_range, normalize_gather=normalize_gather,
                    affine_range=affine_range, affine_gather=affine_gather,
                    keep_range=keep_range, keep_gather=keep_gather, copy_rows=copy_rows)
    return _KERNELS


def _chunk_rows(width: int, itemsize: int) -> int:
    rows = max(BATCH, CHUNK_BYTES // (width * itemsize))
    return -(-rows // BATCH) * BATCH


def _hand_epoch(k, op: str, order: str, x2: np.ndarray, shuffle):
    """One epoch of the hand kernel's batches (a generator)."""
    n, width = x2.shape
    chunk = _chunk_rows(width, x2.itemsize)
    if order.startswith("shuffle"):
        sources = (("gather", index) for index in shuffle.chunks())
    else:
        sources = (("range", (lo, min(n, lo + chunk))) for lo in range(0, n, chunk))
    if op.startswith("filter"):
        carry = np.empty(0, np.int64)
        for kind, where in sources:
            if kind == "range":
                lo, hi = where
                keep = np.empty(hi - lo, np.bool_)
                k["keep_range"](x2, lo, keep)
                kept = np.flatnonzero(keep) + lo
            else:
                keep = np.empty(len(where), np.bool_)
                k["keep_gather"](x2, where, keep)
                kept = where[keep]
            if order == "batch->map":
                # Kept rows of each run of 128 source rows, one batch per run.
                out = np.empty((len(kept), width), x2.dtype)
                k["copy_rows"](x2, kept, out)
                ends = np.searchsorted(kept, np.arange(where[0], where[1], BATCH)[1:])
                yield from np.split(out, ends)
                continue
            if len(carry):
                kept = np.concatenate([carry, kept])
            full = len(kept) // BATCH * BATCH
            carry = kept[full:]
            if full:
                out = np.empty((full, width), x2.dtype)
                k["copy_rows"](x2, kept[:full], out)
                for s in range(0, full, BATCH):
                    yield out[s:s + BATCH]
        if len(carry):
            out = np.empty((len(carry), width), x2.dtype)
            k["copy_rows"](x2, carry, out)
            yield out
        return
    name = "normalize" if op.startswith("normalize") else "affine"
    for kind, where in sources:
        if kind == "range":
            lo, hi = where
            out = np.empty((hi - lo, width), np.float32)
            k[f"{name}_range"](x2, lo, out)
        else:
            out = np.empty((len(where), width), np.float32)
            k[f"{name}_gather"](x2, where, out)
        for s in range(0, len(out), BATCH):
            yield out[s:s + BATCH]


# ------------------------------------------------------------------ nbdata pipelines

def _functions(op: str, width: int):
    if op.startswith("normalize"):
        f = lambda x: x.astype(np.float32) * np.float32(1 / 255)   # noqa: E731
        return f, f
    if op.startswith("affine"):
        f = lambda x: x * np.float32(2) - np.float32(1)   # noqa: E731
        return f, f
    if width == 1:
        return (lambda x: x % 3 != 0), (lambda b: b[b % 3 != 0])
    return (lambda x: x[0] % 3 != 0), (lambda b: b[b[:, 0] % 3 != 0])


def _nbdata_pipeline(nd, op: str, order: str, x: np.ndarray, width: int):
    row_fn, batch_fn = _functions(op, width)
    ds = nd.Dataset.from_tensor_slices(x)
    if order.startswith("shuffle"):
        ds = ds.shuffle(BUFFER, seed=SEED)
    if order == "batch->map":
        ds = ds.batch(BATCH).map(batch_fn)
    elif op.startswith("filter"):
        ds = ds.filter(row_fn).batch(BATCH)
    else:
        ds = ds.map(row_fn).batch(BATCH)
    from perf.measure import nbdata_options
    options = nbdata_options(nd)
    options.fusion_min_rows = 0   # the widest rows' epochs hold fewer than the default 4096
    return ds.with_options(options).compile()


def _data(op: str, width: int, quick: bool) -> np.ndarray:
    dtype = {"normalize": np.uint8, "affine": np.float32, "filter": np.int64}[op.split()[0]]
    total = QUICK_EPOCH_BYTES if quick else EPOCH_BYTES
    n = int(min(MAX_ROWS, max(MIN_ROWS, total // (width * np.dtype(dtype).itemsize))))
    rng = np.random.default_rng(width)
    shape = (n,) if width == 1 else (n, width)
    if dtype == np.uint8:
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if dtype == np.float32:
        return rng.random(shape, dtype=np.float32)
    return rng.integers(0, 1_000_000, shape, dtype=np.int64)


def _rows_of(batches) -> tuple[int, float]:
    rows, total = 0, 0.0
    for b in batches:
        rows += len(b)
        total += float(np.sum(b, dtype=np.float64))
    return rows, total


def _timed(epoch) -> float:
    start = time.perf_counter()
    for _ in epoch():
        pass
    return time.perf_counter() - start


def measure_cell(k, nd, op: str, order: str, width: int, quick: bool) -> dict:
    """Both sides of one cell: source rows/s of each (best epoch), and what nbdata ran."""
    from perf.w5_shuffle_batch import BufferShuffle
    x = _data(op, width, quick)
    n = len(x)
    x2 = x.reshape(n, -1)
    shuffle = BufferShuffle(n, BUFFER, SEED, _chunk_rows(width, x.itemsize)) \
        if order.startswith("shuffle") else None
    started = time.perf_counter()
    pipe = _nbdata_pipeline(nd, op, order, x, width)
    sides = {"nbdata": lambda: iter(pipe), "hand": lambda: _hand_epoch(k, op, order, x2, shuffle)}
    # Warm-up epochs (compiles), and a check that both give the same rows.
    got = {side: _rows_of(epoch()) for side, epoch in sides.items()}
    setup_s = time.perf_counter() - started
    (rows_a, sum_a), (rows_b, sum_b) = got["nbdata"], got["hand"]
    problem = None
    if rows_a != rows_b or not np.isclose(sum_a, sum_b, rtol=1e-6):
        problem = f"outputs differ: {rows_a} rows (sum {sum_a:.6g}) vs {rows_b} ({sum_b:.6g})"
    times = {"nbdata": [], "hand": []}
    while min(len(t) for t in times.values()) < 3 or min(sum(t) for t in times.values()) < TIMED_S:
        for side, epoch in sides.items():
            times[side].append(_timed(epoch))
        if sum(times["nbdata"]) + sum(times["hand"]) > 20 * TIMED_S:
            break
    text = pipe.explain()
    return {"n": n, "nbdata": n / min(times["nbdata"]), "hand": n / min(times["hand"]),
            "setup_s": setup_s, "problem": problem,
            "python": "per element" in text}


def _fmt_rate(r: float) -> str:
    if r >= 1e6:
        return f"{r / 1e6:.1f}M"
    return f"{r / 1e3:.0f}K" if r >= 1e4 else f"{r / 1e3:.1f}K"


def report(line: str, quick: bool, load, widths=WIDTHS) -> str:
    """The sweep's tables (every cell in this process)."""
    import nbdata as nd   # first: its threading layer is the one every kernel here runs on
    k = _kernels()
    cells = {}
    for op in OPS:
        for order in ORDERS:
            for width in widths:
                print(f"  sweep: {op} {order} width {width} ...", file=sys.stderr, flush=True)
                try:
                    cells[op, order, width] = measure_cell(k, nd, op, order, width, quick)
                except Exception as e:  # noqa: BLE001 - the cell says so, the sweep goes on
                    cells[op, order, width] = {"error": f"{type(e).__name__}: {e}"[:100]}
    out = [f"== sweep: nbdata / hand prange kernel (source rows/s), batch {BATCH}, "
           f"shuffle buffer {BUFFER:,} ==", f"{line}; {load.describe()}",
           f"cells: nbdata rate / hand kernel rate in the same process (best epoch each, "
           f"epochs alternating); target >= {TARGET}x; '!' below target, "
           "'p' batch->map ran in Python/NumPy (not fused)"]
    head = f"{'op':<18} {'order':<20}" + "".join(f"{f'w={w}':>10}" for w in widths)
    wide = f"{'op':<18} {'order':<20}" + "".join(f"{f'w={w}':>14}" for w in widths)
    out.append(head)
    below = []
    for op in OPS:
        for order in ORDERS:
            row = f"{op:<18} {order:<20}"
            for width in widths:
                c = cells[op, order, width]
                if "error" in c:
                    row += f"{'error':>10}"
                    continue
                ratio = c["nbdata"] / c["hand"]
                mark = ("!" if ratio < TARGET else " ") + ("p" if c["python"] else " ")
                if c["problem"]:
                    mark = "X "
                row += f"{ratio:>7.2f}x{mark}"
                if ratio < TARGET:
                    below.append((op, order, width))
            out.append(row)
    out.append("")
    out.append("rates (source rows/s): nbdata / hand")
    out.append(wide)
    for op in OPS:
        for order in ORDERS:
            row = f"{op:<18} {order:<20}"
            for width in widths:
                c = cells[op, order, width]
                row += f"{'-':>14}" if "error" in c else \
                    f"{_fmt_rate(c['nbdata']) + '/' + _fmt_rate(c['hand']):>14}"
            out.append(row)
    rows = {w: cells[OPS[0], ORDERS[0], w].get("n") for w in widths}
    out.append("source rows per epoch: " + ", ".join(f"w={w}: {n:,}" for w, n in rows.items() if n))
    problems = [f"{op} {order} w={w}: {c.get('problem') or c.get('error')}"
                for (op, order, w), c in cells.items() if c.get("problem") or c.get("error")]
    if problems:
        out.append("CHECK FAILED: " + "; ".join(problems))
    setup = sum(c.get("setup_s", 0.0) for c in cells.values())
    out.append(f"{len(below)} of {len(cells)} cells below {TARGET}x; compiling and warm-up "
               f"epochs took {setup:.0f} s of the sweep (kernels load from nbdata's cache in a "
               "later run of the same nbdata sources)")
    return "\n".join(out)


def main(argv=None) -> int:
    """`python -m perf.sweep [--quick] [--widths 1,16,...]`: the sweep alone."""
    import argparse
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from perf.environment import OtherLoad, core_count, header, set_thread_env
    parser = argparse.ArgumentParser(prog="python -m perf.sweep")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    parser.add_argument("--threads", type=int, default=core_count())
    args = parser.parse_args(argv)
    set_thread_env(args.threads)
    widths = tuple(int(w) for w in args.widths.split(","))
    print(report(header(args.threads), args.quick, OtherLoad(), widths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
