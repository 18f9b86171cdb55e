"""Timing of one implementation (warm-up, then best of N) and the printed comparison table."""

from __future__ import annotations

import gc
import os
import resource
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

# An epoch factory: called once per timed run, returns the batches of one pass.
Epoch = Callable[[], Iterable]

# Rows faster than this get extra timed epochs, up to MAX_REPEATS, so that a
# millisecond-scale row is not judged on three samples of a noisy machine.
MIN_TIMED_S = 0.5
MAX_REPEATS = 50
# A slow row stops after this much timing, once one epoch is timed, so that it
# still reports (with fewer epochs) inside the parent's per-row timeout.
MAX_TIMED_S = 120.0


@dataclass(frozen=True)
class Implementation:
    """One row of a workload table.

    Attributes:
        name: row label.
        group: "nbdata", "kernel", "numpy", "tf.data" or "torch"; "kernel"
            and the best "tf.data" row are the ratio baselines.
        prepare: `prepare(n)` builds the pipeline over the first n source
            rows (untimed) and returns an epoch factory.
        requires: module that must import for the row to run, else skipped.
        prefix: measure on this many source rows and scale the time to the
            full size (for implementations too slow to run on all of it).
        full_batches: whether every batch but the last must be full (False
            for rows that filter after batching or batch per worker).
    """

    name: str
    group: str
    prepare: Callable[[int], Epoch]
    requires: Optional[str] = None
    prefix: Optional[int] = None
    full_batches: bool = True


@dataclass(frozen=True)
class Workload:
    """A table: its rows and how to check what each row delivers.

    `check(batches, n, full_batches)` looks at every batch of one epoch over
    n source rows and returns what is wrong with them, or None. `notes`
    explains the bracketed marks in row names.
    """

    title: str
    unit: str
    n_rows: int
    impls: list
    check: Callable[[list, int, bool], Optional[str]]
    notes: str = ""
    # The first row of this group is the first ratio column's baseline.
    baseline_group: str = "kernel"
    baseline_label: str = "vs kernel"
    # Print each row's peak RSS growth over its timed epochs (a column).
    report_memory: bool = False
    # Print each row's CPU time (user + system, all its threads) per unit of the best
    # epoch (a column): how much of the machine a row's rate costs.
    report_cpu: bool = False
    # (workload, row index, column label): another table's row whose rate the
    # nbdata rows are also divided by, e.g. ("w1", 0, "vs w1 nbdata fused").
    compare_to: Optional[tuple] = None


@dataclass
class Measurement:
    """What one row measured: its best epoch time and the source rows behind it."""

    name: str
    group: str
    rows: int = 0
    times: list = field(default_factory=list)
    note: str = ""
    skipped: bool = False
    # Peak resident memory over the timed epochs minus the resident memory
    # before them, in MB; None where not measured.
    peak_rss_mb: Optional[float] = None
    # CPU seconds (user + system of the process, every thread) of each timed epoch.
    cpu_times: list = field(default_factory=list)

    @property
    def cpu_ms_per_row(self) -> Optional[float]:
        """CPU milliseconds per source row in the epoch with the best wall time."""
        if not self.cpu_times or not self.times:
            return None
        return self.cpu_times[self.times.index(min(self.times))] * 1e3 / self.rows

    @property
    def best_s(self) -> float:
        return min(self.times) if self.times else float("nan")

    @property
    def rate(self) -> float:
        """Source rows per second in the best epoch."""
        return self.rows / self.best_s if self.times else float("nan")


def batch_rows(batch) -> int:
    """Rows in one delivered batch: the leading dimension of its last component
    (a scalar element counts as one row; a dict's first value stands for it)."""
    if isinstance(batch, dict):
        batch = next(iter(batch.values()))
    if isinstance(batch, (tuple, list)):
        batch = batch[-1]
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else 1
    try:
        return len(batch)
    except TypeError:
        return 1


def consume(batches: Iterable) -> int:
    """Iterate every batch and add up batch sizes (see `batch_rows`)."""
    total = 0
    for batch in batches:
        total += batch_rows(batch)
    return total


def _status_kb(key: str) -> Optional[int]:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _memory_mark() -> tuple[int, bool]:
    """Resident kB now, after freeing what can be freed, and whether the kernel's
    peak-RSS mark was reset to it (Linux: write 5 to /proc/self/clear_refs).

    Without the reset, ru_maxrss still holds the warm-up's peak (it kept a whole
    epoch's batches for the check), which would hide what a timed epoch needs.
    """
    gc.collect()
    try:  # return freed heap pages to the kernel, so they are not counted as in use
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        reset = True
    except OSError:
        reset = False
    rss = _status_kb("VmRSS")
    if rss is None:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss, reset


def measure(impl: Implementation, workload: Workload, repeats: int) -> Measurement:
    """Warm up and check the output once, then time at least `repeats` epochs.

    An exception in any stage is re-raised with the stage named; the caller
    prints it in the row's note.
    """
    rows = min(workload.n_rows, impl.prefix) if impl.prefix else workload.n_rows
    result = Measurement(impl.name, impl.group, rows=rows)
    with _stage("prepare"):
        epoch = impl.prepare(rows)
    with _stage("warm-up epoch"):
        batches = list(epoch())
    try:
        problem = workload.check(batches, rows, impl.full_batches)
    except Exception as exc:  # a malformed batch is a failed check, not a crash
        problem = f"check raised {type(exc).__name__}: {exc}".splitlines()[0][:100]
    del batches
    if workload.report_memory:
        rss_before, reset = _memory_mark()
    with _stage("timed epoch"):
        while (len(result.times) < repeats
               or (sum(result.times) < MIN_TIMED_S and len(result.times) < MAX_REPEATS)):
            if result.times and sum(result.times) > MAX_TIMED_S:
                break
            cpu = os.times()
            start = time.perf_counter()
            consume(epoch())
            result.times.append(time.perf_counter() - start)
            after = os.times()
            result.cpu_times.append(after.user + after.system - cpu.user - cpu.system)
    notes = []
    if workload.report_memory:
        peak = _status_kb("VmHWM")  # the same counters as VmRSS; ru_maxrss where absent
        if peak is None:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
        result.peak_rss_mb = max(0, peak - rss_before) / 1024
        if not reset:
            notes.append("peak RSS not resettable, growth may be hidden")
    if rows < workload.n_rows:
        notes.append(f"{rows:,}-row prefix, time scaled")
    if len(result.times) < repeats:
        notes.append(f"slow: {len(result.times)} epoch(s) timed")
    if problem:
        notes.append(f"CHECK FAILED: {problem}")
    result.note = "; ".join(notes)
    return result


class _stage:
    """Prefixes an exception's message with the measurement stage it came from."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None and isinstance(exc, Exception):
            raise StageError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        return False


class StageError(RuntimeError):
    """An implementation failed; the message names the stage and the original error."""


def skipped(impl: Implementation, why: str) -> Measurement:
    """A row that did not run, with the reason in its note."""
    return Measurement(impl.name, impl.group, note=f"skipped: {why}", skipped=True)


def _ratio(rate: float, baseline: Optional[float]) -> str:
    if baseline is None or not baseline == baseline or not rate == rate:
        return "-"
    ratio = rate / baseline
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def _seconds(t: float) -> str:
    return f"{t:.3f}" if t >= 0.01 else f"{t:.2g}"


def format_table(workload: Workload, header: str, results: list[Measurement],
                 compare: Optional[Measurement] = None) -> str:
    """Render one workload's rows; ratios are throughput over the baseline's (>1 is faster).

    `compare` is the row named by `workload.compare_to`, measured elsewhere;
    when given, the nbdata rows get one more ratio column against it.
    """
    ran = [r for r in results if not r.skipped]
    baseline = next((r.rate for r in ran if r.group == workload.baseline_group), None)
    tf_rates = [r.rate for r in ran if r.group == "tf.data"]
    tf_best = max(tf_rates) if tf_rates else None
    other = compare.rate if compare is not None and not compare.skipped else None
    n_rows = workload.n_rows
    lines = [f"== {workload.title} ==", header,
             f"time = best epoch, scaled to all {n_rows:,} source {workload.unit}; "
             f"ratios = throughput / baseline's (>1 is faster)"]
    cols = ["implementation", f"{workload.unit}/s", "time s", workload.baseline_label,
            "vs tf.data best"]
    align = ["<", ">", ">", ">", ">"]
    if workload.compare_to and compare is not None:
        cols.append(workload.compare_to[2])
        align.append(">")
    if workload.report_memory:
        cols.append("peak RSS +MB")
        align.append(">")
    if workload.report_cpu:
        cols.append(f"CPU ms/{workload.unit[:-1] if workload.unit.endswith('s') else workload.unit}")
        align.append(">")
    cols.append("note")
    align.append("<")
    body = []
    for r in results:
        if r.skipped:
            row = [r.name, "-", "-", "-", "-"]
        else:
            row = [r.name, f"{r.rate:,.0f}", _seconds(n_rows / r.rate),
                   _ratio(r.rate, baseline), _ratio(r.rate, tf_best)]
        if workload.compare_to and compare is not None:
            row.append(_ratio(r.rate, other) if r.group == "nbdata" and not r.skipped else "-")
        if workload.report_memory:
            row.append("-" if r.peak_rss_mb is None else f"{r.peak_rss_mb:.1f}")
        if workload.report_cpu:
            cpu = None if r.skipped else r.cpu_ms_per_row
            row.append("-" if cpu is None else f"{cpu:.2f}")
        row.append(r.note)
        body.append(tuple(row))
    widths = [max(len(c), *(len(row[i]) for row in body)) for i, c in enumerate(cols)]

    def render(row):
        return "  ".join(f"{v:{a}{w}}" for v, a, w in zip(row, align, widths)).rstrip()

    lines.append(render(cols))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(render(row) for row in body)
    if workload.compare_to and compare is not None:
        source, _, label = workload.compare_to
        if other is None:
            lines.append(f"{label}: that row did not run ({compare.note})")
        else:
            lines.append(f"{label}: nbdata rows/s over {compare.name!r} of {source} "
                         f"({other:,.0f} source rows/s over {compare.rows:,} rows)")
    if workload.report_memory:
        lines.append("peak RSS +MB: the process's peak resident memory over the timed epochs "
                     "minus its resident memory before them (kernel peak mark reset first)")
    if workload.notes:
        lines.append(workload.notes)
    return "\n".join(lines)


def nbdata_rows(make_dataset, head):
    """Row factories for nbdata's two paths: ``make_dataset(nd, *head(n))`` compiled
    (fused), and the same dataset with ``Options.fusion = False`` (reference).

    Both get ``threading.private_threadpool_size`` = the harness's thread count."""

    def fused(n):
        import nbdata as nd
        options = nbdata_options(nd)
        # --quick sizes (w4's 2,000 images) are below fusion_min_rows: the row is the
        # fused path at every size, as its name says
        options.fusion_min_rows = 0
        ds = make_dataset(nd, *head(n)).with_options(options)
        pipe = ds.compile()
        return lambda: pipe

    def reference(n):
        import nbdata as nd
        options = nbdata_options(nd)
        options.fusion = False
        ds = make_dataset(nd, *head(n)).with_options(options)
        return lambda: ds

    return fused, reference


def nbdata_options(nd):
    """nd.Options with the thread budget that every engine of the row gets (nbdata's
    defaults where the run sets none: the busy-neighbour table's default column)."""
    import os
    from perf.environment import thread_budget
    options = nd.Options()
    if "NUMBA_NUM_THREADS" in os.environ:
        options.threading.private_threadpool_size = thread_budget()
    return options
