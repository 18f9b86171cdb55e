"""distribute and distribute_w1: ds.distribute on a local Ray against the same pipeline
in-process.

distribute: range(N).map(f).batch(64) where f is a ~1 ms pure-Python function that
holds the GIL (Numba cannot compile it), so one process runs one call at a time and
workers are the only way to use more cores; rows for 1, 2, 4 and 8 workers (those the
cores allow). distribute_w1: the w1 pipeline (map/filter/batch(256) over a (N, 16)
float32 table, fused) with one worker, to show what moving finished batches through
Ray's object store costs.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from perf.environment import core_count
from perf.measure import Implementation, Workload, nbdata_options

BATCH = 64
FULL_ROWS = 4_000
QUICK_ROWS = 600
# Iterations of the busy loop: about 1 ms per call with the formatting on the 2-core
# benchmark machine (the in-process row's time / N shows the cost per element here).
SPIN = 62_000
WORKERS = (1, 2, 4, 8)


def heavy(x) -> np.int64:
    """A ~1 ms per-element Python function holding the GIL: a busy loop and a
    thousands-separated format (beyond Numba). Returns ``100 * x + digits``."""
    busy = sum(range(SPIN))
    digits = len(format(int(x) * 7919, ","))
    return np.int64(int(x) * 100 + digits + (busy & 0))


def _pipeline(nd, n: int):
    return nd.Dataset.range(n).map(heavy).batch(BATCH)


def _start_ray() -> None:
    import sys

    import ray
    # Workers unpickle this module's functions by value (perf/ is not on their path).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    if not ray.is_initialized():
        ray.init(num_cpus=core_count(), include_dashboard=False, log_to_driver=False)


def build(quick: bool) -> Workload:
    """The scaling table."""
    n_rows = QUICK_ROWS if quick else FULL_ROWS

    def in_process(parallel):
        def prepare(n):
            import nbdata as nd
            ds = (nd.Dataset.range(n)
                  .map(heavy, num_parallel_calls=nd.AUTOTUNE if parallel else None)
                  .batch(BATCH).with_options(nbdata_options(nd)))
            pipe = ds.compile()
            return lambda: pipe
        return prepare

    def distributed(workers):
        def prepare(n):
            import nbdata as nd
            _start_ray()
            ds = _pipeline(nd, n).with_options(nbdata_options(nd))
            pipe = ds.distribute("distributed_epoch", num_workers=workers).compile()
            return lambda: pipe
        return prepare

    impls = [Implementation("in-process map(f).batch(64)", "nbdata", in_process(False), "nbdata",
                            full_batches=True),
             Implementation("in-process map(f, num_parallel_calls=AUTOTUNE)", "nbdata-threads",
                            in_process(True), "nbdata")]
    for w in WORKERS:
        if w <= core_count():
            impls.append(Implementation(f"distribute('distributed_epoch', num_workers={w})",
                                        "distributed", distributed(w), "ray",
                                        full_batches=False))
    return Workload(f"distribute: range({n_rows:,}).map(f).batch({BATCH}), f a ~1 ms Python "
                    "function holding the GIL (not Numba-compilable), on a local Ray",
                    "rows", n_rows, impls, _check_heavy,
                    "workers are Ray actors on this machine (num_cpus = its cores); "
                    "distributed_epoch hands each worker row ranges of range(N) as it asks, "
                    "so batches arrive in no fixed order and a worker's last batch may be "
                    "short; time includes moving the batches through Ray's object store",
                    baseline_group="nbdata", baseline_label="vs in-process")


def _check_heavy(batches: list, n: int, full_batches: bool) -> Optional[str]:
    got = np.sort(np.concatenate([np.asarray(b).reshape(-1) for b in batches]))
    want = np.array([heavy(i) for i in range(n)], np.int64)
    if len(got) != n:
        return f"{len(got):,} rows delivered, {n:,} expected"
    if not np.array_equal(got, np.sort(want)):
        return "values differ from f(i)"
    return None


def build_w1(quick: bool) -> Workload:
    """The overhead table: w1 in-process and with one worker."""
    from perf import w1_map_filter_batch as w1
    n_rows = w1.QUICK_ROWS if quick else w1.FULL_ROWS

    def in_process(n):
        import nbdata as nd
        x, y = w1.make_data(n)
        pipe = w1.nbdata_dataset(nd, x, y).with_options(nbdata_options(nd)).compile()
        return lambda: pipe

    def distributed(n):
        import nbdata as nd
        _start_ray()
        x, y = w1.make_data(n)
        ds = w1.nbdata_dataset(nd, x, y).with_options(nbdata_options(nd))
        pipe = ds.distribute("distributed_epoch", num_workers=1).compile()
        return lambda: pipe

    impls = [Implementation("in-process (fused)", "nbdata", in_process, "nbdata"),
             Implementation("distribute('distributed_epoch', num_workers=1)", "distributed",
                            distributed, "ray", full_batches=False)]
    return Workload(f"distribute_w1: the w1 pipeline over {n_rows:,} rows (map, filter, "
                    f"batch({w1.BATCH}), fused) in-process and on one Ray worker", "rows",
                    n_rows, impls, _check_w1,
                    "the worker runs the same fused kernel; its batches come back through "
                    "Ray's object store (zero-copy reads); one worker handles the row "
                    "ranges in order, but a split's last batch may be short",
                    baseline_group="nbdata", baseline_label="vs in-process")


def _check_w1(batches: list, n: int, full_batches: bool) -> Optional[str]:
    from perf import w1_map_filter_batch as w1
    x, y = w1.make_data(n)
    labels = np.sort(np.concatenate([np.asarray(b[1]) for b in batches]))
    want = y[y % 3 != 0]
    if not np.array_equal(labels, want):
        return f"{len(labels):,} labels delivered, {len(want):,} expected (or values differ)"
    for xb, yb in batches[:8]:
        if not np.allclose(xb, (x[yb] - np.float32(0.5)) * np.float32(2.0)):
            return "features differ from (x - 0.5) * 2"
    return None
