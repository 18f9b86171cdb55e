"""The executor: run state that outlives one iteration, the context iterators run in
(placeholder values, resources, statistics, the thread budget), and the top-level
iterator that turns a chunk stream into elements and can save and restore itself."""

from __future__ import annotations

import contextlib
import math
import operator
import os
import secrets
import threading

import numpy as np
import time
from collections.abc import Mapping
from typing import Any, Callable

from nbdata import profiler
from nbdata.memory import MemoryBudget
from nbdata.chunks import RowList, StringColumn, col_row, max_chunk_rows
from nbdata.kernels.threads import KernelThreadTuner, ThreadBudget, kernel_section
from nbdata.ops.runtime import skip_rows
from nbdata.state_check import StateFieldError
from nbdata import state_check
from nbdata.errors import FailedPreconditionError, InvalidArgumentError, OpError
from nbdata.options import Options
from nbdata.trace.placeholder import Placeholder
from nbdata.random import derive_seed
from nbdata.random import key as random_key

REPEAT_STREAM = 0x52455045  # "REPE": epochs of repeat() derive from the iteration's
from nbdata.spec import is_custom_nest, packer


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _raised_in_nbdata(error: BaseException) -> bool:
    """True when ``error`` was raised by nbdata's own code (not by a user function)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith(_PACKAGE)


class RunState:
    """The mutable side of a dataset, kept out of its immutable plan.

    Holds the resources of stateful nodes, keyed by the node's ``resource_key``:
    a shuffle's epoch counter (each iteration reshuffles), a memory cache's store
    (filled by one complete iteration, read by later ones). A dataset and the
    datasets derived from it share one RunState, as tf.data's resources are shared
    by every dataset built on the op that made them; ``merged`` gives datasets that
    combine others (zip, concatenate) a view of each input's resources.

    It also holds the pipeline seed: the seed of every random op whose seed was left
    None while no global seed (``nd.random.set_seed``) was set, drawn once, shown by
    ``explain()`` and kept in saved iterator state.
    """

    def __init__(self, parents: tuple["RunState", ...] = ()):
        self._resources: dict[int, Any] = {}
        self._parents = parents
        self._lock = threading.RLock()
        self._seed: int | None = None

    @classmethod
    def merged(cls, *states: "RunState") -> "RunState":
        distinct = []
        for s in states:
            if all(s is not d for d in distinct):
                distinct.append(s)
        return distinct[0] if len(distinct) == 1 else cls(tuple(distinct))

    def register(self, key: int, resource: Any) -> None:
        with self._lock:
            self._resources[key] = resource

    def _find(self, key: int) -> Any:
        if key in self._resources:
            return self._resources[key]
        for parent in self._parents:
            found = parent._find(key)
            if found is not None:
                return found
        return None

    def resource(self, key: int, factory: Callable[[], Any]) -> Any:
        """The resource registered under ``key`` (made by ``factory`` if none was)."""
        with self._lock:
            found = self._find(key)
            if found is None:
                found = self._resources[key] = factory()
            return found

    @property
    def seed(self) -> int:
        """The pipeline seed (drawn at first use)."""
        with self._lock:
            if self._seed is None:
                self._seed = secrets.randbits(63)
            return self._seed

    @seed.setter
    def seed(self, value: int) -> None:
        with self._lock:
            self._seed = int(value)


_BATCHING = frozenset({"batch", "padded_batch", "ragged_batch", "sparse_batch", "rebatch",
                       "group_by_window", "bucket_by_sequence_length", "map_and_batch"})
_ELEMENTWISE_OUT = frozenset({"unbatch", "flat_map", "interleave", "directed_interleave"})


def element_unit(node) -> str:
    """"batches" when a node's elements are the batches of a batching op below it (no
    unbatch or flat_map between), else "elements" (what ``stats()`` counts)."""
    while node is not None:
        op = getattr(node, "op", None)
        if op in _BATCHING:
            return "batches"
        if op in _ELEMENTWISE_OUT:
            return "elements"
        plan = getattr(node, "plan", None)
        if op == "fused_stage" and plan is not None:
            if plan.terminal is not None:
                return "batches"
            node = plan.source.node
            continue
        inputs = getattr(node, "inputs", ())
        node = inputs[0] if inputs else None
    return "elements"


class Timeline:
    """A stage's work over time for ``stats().plot()``: seconds busy producing, seconds
    its consumer waited on it, and rows produced, in buckets of ``width`` seconds from
    ``origin`` (its first event); at most :attr:`MAX` buckets: past them two neighbours
    merge and the width doubles."""

    MAX = 512

    def __init__(self):
        self.origin: float | None = None
        self.width = 0.005
        self.busy: list[float] = []
        self.wait: list[float] = []
        self.rows: list[int] = []
        self._last: tuple | None = None   # (start, end, index) of the bucket added to last

    def _merge(self) -> None:
        self._last = None
        self.width *= 2
        for name in ("busy", "wait", "rows"):
            old = getattr(self, name)
            setattr(self, name, [sum(old[i:i + 2]) for i in range(0, len(old), 2)])

    def _span(self, begin: float, end: float) -> tuple[int, int]:
        if self.origin is None:
            self.origin = begin
        if begin < self.origin:   # work that began before the first event recorded
            self._last = None
            early = int(math.ceil((self.origin - begin) / self.width))
            self.origin -= early * self.width
            self.busy[:0] = [0.0] * early
            self.wait[:0] = [0.0] * early
            self.rows[:0] = [0] * early
        while (end - self.origin) / self.width >= self.MAX or len(self.busy) > self.MAX:
            self._merge()
        i, j = int((begin - self.origin) / self.width), int((end - self.origin) / self.width)
        grow = j + 1 - len(self.busy)
        if grow > 0:
            self.busy += [0.0] * grow
            self.wait += [0.0] * grow
            self.rows += [0] * grow
        return i, j

    def add(self, begin: float, end: float, rows: int = 0, waited: bool = False) -> None:
        """``[begin, end]`` busy (or, ``waited``, its consumer waiting), ``rows`` made
        at ``end``."""
        last = self._last
        if last is not None and last[0] <= begin <= end < last[1]:   # (most: that bucket)
            k = last[2]
        else:
            i, j = self._span(begin, end)
            if i != j:
                series = self.wait if waited else self.busy
                for k in range(i, j + 1):
                    lo = self.origin + k * self.width
                    series[k] += max(0.0, min(end, lo + self.width) - max(begin, lo))
                self.rows[j] += rows
                return
            k = i
            lo = self.origin + k * self.width
            self._last = (lo, lo + self.width, k)
        (self.wait if waited else self.busy)[k] += max(0.0, end - begin)
        self.rows[k] += rows


class StageStats:
    """What one stage of a pipeline did, summed over every iteration: rows and chunks it
    produced and the time spent producing them (its inputs' time included), the time
    its consumer waited on it (a prefetch), what ``AUTOTUNE`` chose (parallelism,
    buffer), and for fused stages the rows run in the kernel and the rows re-run on
    the reference path (a row whose function raised inside the kernel or whose value
    did not fit its column), with the first reasons."""

    MAX_REASONS = 5

    def __init__(self, title: str, node=None):
        self.title = title
        self.node = node
        self.rows = 0
        self.chunks = 0
        self.seconds = 0.0
        self.wait_seconds = 0.0
        self.kernel_chunks = 0
        self.kernel_rows = 0
        self.fallback_chunks = 0
        self.fallback_rows = 0
        self.fallback_reasons: list[str] = []
        self.chosen: dict[str, Any] = {}
        self.why: dict[str, str] = {}     # why AUTOTUNE chose each value of ``chosen``
        self.bytes_held = 0               # bytes its buffers hold now (nbdata/memory.py)
        self.peak_bytes = 0
        self.category: str | None = None  # the profiler's: "stage", or "python" per element
        self.path = "chunks"
        self._timeline = Timeline()
        # Events not yet in the timeline, (begin, end, rows, waited): added when it is
        # read or when EVENTS of them wait (a pull records its chunk in a list append,
        # not in the timeline's buckets)
        self._events: list = []
        self._lock = threading.Lock()

    EVENTS = 256

    @property
    def timeline(self) -> Timeline:
        """The stage's busy and waited seconds and rows over time."""
        with self._lock:
            self._fold()
        return self._timeline

    def _fold(self) -> None:
        events, self._events = self._events, []
        add = self._timeline.add
        for begin, end, rows, waited in events:
            add(begin, end, rows, waited)

    def produced(self, rows: int, seconds: float, ended: float | None = None) -> None:
        """A chunk of ``rows`` made in ``seconds`` up to ``ended`` (``perf_counter``;
        default now)."""
        ended = time.perf_counter() if ended is None else ended
        with self._lock:
            self.chunks += 1
            self.rows += rows
            self.seconds += seconds
            events = self._events
            events.append((ended - seconds, ended, rows, False))
            if len(events) >= self.EVENTS:
                self._fold()

    def waited(self, seconds: float, ended: float | None = None) -> None:
        ended = time.perf_counter() if ended is None else ended
        with self._lock:
            self.wait_seconds += seconds
            self._events.append((ended - seconds, ended, 0, True))
            if len(self._events) >= self.EVENTS:
                self._fold()

    def kernel(self, rows: int) -> None:
        with self._lock:
            self.kernel_chunks += 1
            self.kernel_rows += rows

    def fallback(self, rows: int, reason: str) -> None:
        with self._lock:
            self.fallback_chunks += 1
            self.fallback_rows += rows
            if len(self.fallback_reasons) < self.MAX_REASONS:
                self.fallback_reasons.append(reason)

    @property
    def compile_seconds(self) -> float:
        """Seconds spent compiling the stage's kernel (0 for stages without one)."""
        return getattr(self.node, "compile_seconds", 0.0)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def unit(self) -> str:
        """What the stage's elements are: "batches" below a batching op (its ``rows``
        count batches then), else "elements"."""
        return element_unit(self.node)

    def line(self) -> str:
        unit = self.unit
        text = f"{self.title}: {self.rows:,} {unit} in {self.chunks:,} chunks"
        if self.seconds:
            text += (f", {self.seconds:.3f} s ({self.rows_per_second:,.0f} {unit}/s, inputs "
                     f"included)")
        if self.wait_seconds:
            text += f"; consumer waited {self.wait_seconds:.3f} s"
        if self.chosen:
            text += "; " + ", ".join(f"{k}={v}" + (f" ({self.why[k]})" if k in self.why else "")
                                     for k, v in self.chosen.items())
        if self.kernel_chunks or self.fallback_chunks:
            text += (f"; kernel: {self.kernel_rows:,} input rows in {self.kernel_chunks:,} chunks, "
                     f"{self.fallback_rows:,} rows in {self.fallback_chunks:,} chunks re-run on "
                     f"the reference path")
        if self.fallback_reasons:
            text += " (" + "; ".join(self.fallback_reasons) + ")"
        if self.peak_bytes:
            text += (f"; holds {self.bytes_held / 2**20:,.1f} MiB (peak "
                     f"{self.peak_bytes / 2**20:,.1f} MiB)")
        if self.compile_seconds:
            text += f"; compile {self.compile_seconds:.3f} s"
        return text


class ConsumerStats:
    """The consumer's side of a pipeline's iterations: the seconds it spent waiting for
    input (inside the iterator's pulls of chunks) and the seconds it iterated, from its
    first pull to its last (its own work between elements included)."""

    def __init__(self):
        self.input_seconds = 0.0
        self.wall_seconds = 0.0
        self.pulls = 0
        self._lock = threading.Lock()

    def pulled(self, began: float, ended: float, wall: float) -> None:
        """A pull that waited ``ended - began`` s; ``wall``: the iteration's wall time
        added since its last pull."""
        with self._lock:
            self.pulls += 1
            self.input_seconds += ended - began
            self.wall_seconds += wall


class TimedChunks:
    """Counts what an input produces and the time it takes (for ``pipe.stats()``)."""

    __slots__ = ("it", "stats")

    def __init__(self, it, stats: StageStats):
        self.it = it
        self.stats = stats

    def next(self, want: int):
        started = time.perf_counter()
        chunk = self.it.next(want)
        self.record(chunk, want, started, time.perf_counter())
        return chunk

    def record(self, chunk, want: int, started: float, ended: float) -> None:
        """Count ``chunk`` (None at the end), asked for with ``want`` rows and made from
        ``started`` to ``ended``, in the stats (and the profile, while one records)."""
        rows = chunk.n if chunk is not None else 0
        self.stats.produced(rows, ended - started, ended)
        if profiler._current is not None:
            stats = self.stats
            if stats.category is None:
                node = stats.node
                per_element = getattr(node, "per_element", None)
                stats.category = "python" if per_element is not None and per_element() else "stage"
            profiler.slice_(stats.title, stats.category, started, ended, {"rows": rows, "want": want})

    def save(self) -> dict:
        return self.it.save()

    def close(self) -> None:
        self.it.close()


_EVENT_LOCK = threading.Lock()


class ExecContext:
    """What iterators need while they run.

    ``value(x)`` resolves placeholders from the feed; ``resource(key, factory)`` gives
    a stateful node its run-state resource; ``stats(node)`` the node's counters;
    ``open_chunks(node, state)`` opens a node's chunk iterator;
    ``open_dataset_chunks(ds, state)`` compiles and opens a dataset made while running (by ``flat_map``, ``interleave``)
    with its own options and passes and this context's feed; ``make_dataset(node)``
    wraps a plan made while running (a window) as a user-facing dataset; ``budget``
    is the thread budget shared by kernels and executor threads.
    """

    def __init__(self, options: Options, feed: dict | None = None, state: RunState | None = None,
                 stats: dict | None = None, make_dataset: Callable | None = None,
                 budget: ThreadBudget | None = None, op_index: dict | None = None,
                 epochs: dict | None = None, path: tuple = (), host_empty: Callable | None = None,
                 cancelled: threading.Event | None = None, memory: MemoryBudget | None = None):
        self.options = options
        # The bytes the run's buffers hold, against Options().memory_budget (one budget
        # for every iteration of a pipeline: nbdata/memory.py).
        self.memory = memory if memory is not None else MemoryBudget(options.memory_budget)
        # Set when the run is interrupted (Ctrl-C): background producers and per-element
        # Python calls of this run stop at the next element instead of finishing a chunk.
        # (Made at its first use: most runs never look.)
        self._cancelled = cancelled
        # Allocates the host arrays fused stages write their outputs into (np.empty, or
        # pinned memory below prefetch_to_device, so batches are copied to the GPU as
        # they are).
        self.host_empty = host_empty or np.empty
        self.feed = feed or {}
        self.state = state if state is not None else RunState()
        self._stats = stats if stats is not None else {}
        self._make_dataset = make_dataset
        self.budget = budget if budget is not None else ThreadBudget(options)
        self.op_index = op_index or {}
        self.epochs = epochs or {}
        self.path = path

    @property
    def cancelled(self) -> threading.Event:
        event = self._cancelled
        if event is None:
            with _EVENT_LOCK:
                if self._cancelled is None:
                    self._cancelled = threading.Event()
                event = self._cancelled
        return event

    def with_path(self, epoch: int) -> "ExecContext":
        """This context for epoch ``epoch`` of a ``repeat`` (random ops below it draw anew)."""
        return ExecContext(self.options, self.feed, self.state, self._stats, self._make_dataset,
                           self.budget, self.op_index, self.epochs, self.path + (epoch,),
                           self.host_empty, self.cancelled, self.memory)

    def with_host_allocator(self, host_empty: Callable) -> "ExecContext":
        """This context with fused stages' outputs allocated by ``host_empty``."""
        return ExecContext(self.options, self.feed, self.state, self._stats, self._make_dataset,
                           self.budget, self.op_index, self.epochs, self.path, host_empty,
                           self.cancelled, self.memory)

    def renewed(self) -> "ExecContext":
        """This context with a new cancellation (for a run resumed after an interrupt)."""
        return ExecContext(self.options, self.feed, self.state, self._stats, self._make_dataset,
                           self.budget, self.op_index, self.epochs, self.path, self.host_empty,
                           memory=self.memory)

    def epoch(self, node, reshuffle: bool) -> int:
        """The epoch a random op's draws are keyed on: the iteration of the pipeline this
        run is (each iteration of a dataset reshuffles) and the repeat epochs above the
        op; 0 when it does not reshuffle. It depends only on the run's position, so an
        iterator restored from saved state draws the same values."""
        if not reshuffle:
            return 0
        epoch = self.epochs.get(node.resource_key, 0)
        for e in self.path:
            epoch = int(random_key(epoch, REPEAT_STREAM, e))
        return epoch

    def op_seed(self, node) -> int:
        """A random op's seed: its own (or the global seed's), else one derived from the
        pipeline seed and the op's place in the plan (the same in every process)."""
        if node.seed is not None:
            return node.seed
        return derive_seed(self.state.seed, self.op_index.get(node.resource_key, 0))

    def value(self, x: Any) -> Any:
        if isinstance(x, Placeholder):
            if x not in self.feed:
                raise FailedPreconditionError(
                    f"placeholder {x.name!r} has no value: initialize the iterator with "
                    f"feed_dict={{{x.name}: ...}}")
            return self.feed[x]
        return x

    def resource(self, key: int, factory: Callable[[], Any]) -> Any:
        return self.state.resource(key, factory)

    def consumer_stats(self) -> ConsumerStats:
        """The pipeline's consumer-side counters (one object for all its iterations)."""
        found = self._stats.get("consumer")
        if found is None:
            found = self._stats.setdefault("consumer", ConsumerStats())
        return found

    def stats(self, node, kind: type = StageStats) -> StageStats:
        """The node's counters (made as ``kind``, a StageStats class, at first use)."""
        found = self._stats.get(id(node))
        if found is None:
            found = self._stats.setdefault(id(node), kind(node.title(), node))
        return found

    def open_chunks(self, node, state: dict | None = None):
        if state is None:
            return TimedChunks(node.open_chunks(self, None), self.stats(node))
        try:
            if not isinstance(state, dict):
                raise StateFieldError("state", state, "expected a record of fields")
            it = node.open_chunks(self, state)
        except StateFieldError as e:
            # A field the op read through nbdata/state_check.py: named with the op.
            raise InvalidArgumentError(
                f"restore: the state of {node.label} does not fit this pipeline: {e.message}",
                node.op) from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as e:
            # A saved state that passed its checksum and the pipeline's identity can still
            # not fit an op: a placeholder fed another value, a state made by hand. Said
            # so, naming the op; an error of the user's own code goes out as it is.
            if isinstance(e, OpError) or not _raised_in_nbdata(e):
                raise
            raise InvalidArgumentError(
                f"restore: the state of {node.label} does not fit this pipeline "
                f"({type(e).__name__}: {e})", node.op) from e
        return TimedChunks(it, self.stats(node))

    def open_dataset_chunks(self, ds, state: dict | None = None):
        return ds.compile().open_chunks_in(self, state)

    def make_dataset(self, node) -> Any:
        if self._make_dataset is None:
            raise FailedPreconditionError("this pipeline cannot make datasets at run time")
        return self._make_dataset(node)

    def kernels(self, cap: int | None = None):
        """A section in which parallel kernels run with this run's thread budget (at most
        ``cap`` threads when given)."""
        threads = self.budget.kernel_threads()
        return kernel_section(min(threads, cap) if cap else threads)

    @contextlib.contextmanager
    def tuned_kernels(self, node, rows: int):
        """A section in which ``node``'s parallel kernels run ``rows`` rows on the thread
        count tuned for it (a :class:`KernelThreadTuner` per node for all the pipeline's
        runs; the budget's count where the user fixed the threads)."""
        limit = self.budget.kernel_threads()
        if not self.budget.tunes:
            with kernel_section(limit):
                yield
            return
        key = ("kernel threads", id(node))
        tuner = self._stats.get(key)
        if tuner is None:
            tuner = self._stats.setdefault(key, KernelThreadTuner())
        threads = tuner.threads(limit)
        began = time.perf_counter()
        with kernel_section(threads):
            yield
        tuner.record(threads, rows, time.perf_counter() - began)
        tuner.publish(self.stats(node))

    def run_gpu_chain(self, chain, batch, seed_base: int):
        """A GPU chain (``nbdata/primitives/gpu.py``) applied to a device batch, its random
        steps counting elements from ``seed_base``."""
        from nbdata.compiler.backend_gpu import run_chain
        return run_chain(chain, batch, seed_base)

    def max_rows(self, spec) -> int:
        """Rows per chunk for elements of ``spec`` (``Options().chunk_rows`` when set)."""
        return self.options.chunk_rows or max_chunk_rows(spec)


# A pull's work the top-level demand grows towards (seconds).
PULL_TARGET_S = 0.0005


def next_demand(want: int, took: float, limit: int) -> int:
    """The next pull's demand after one of ``want`` rows took ``took`` seconds: at least
    double, and as many rows as about PULL_TARGET_S of work when pulls are cheaper
    (a fast kernel reaches whole chunks in three pulls, not a dozen, while a slow
    per-element function still starts with one element and doubles), up to ``limit``."""
    grow = 2
    if took * 2 < PULL_TARGET_S:
        grow = min(64, int(PULL_TARGET_S / max(took, 1e-6)))
    return min(want * max(2, grow), limit)


class Pace:
    """What a compiled pipeline's iterations learn of its speed: the seconds per element
    of the largest pull of the last one. A later iteration's first pull asks for about
    PULL_TARGET_S of work at that speed (a whole kernel chunk of a fast fused stage),
    not one element: the few small pulls and kernel calls of a ramp from one element
    cost a fifth of a short in-memory epoch. Kept only for plans that read ahead
    without side effects (``Node.reads_ahead_freely``)."""

    __slots__ = ("seconds_per_element",)

    def __init__(self):
        self.seconds_per_element: float | None = None

    def first_demand(self, limit: int) -> int:
        per = self.seconds_per_element
        if per is None:
            return 1
        return max(1, min(limit, int(PULL_TARGET_S / max(per, 1e-9))))


class RunShape:
    """How a run of a pipeline hands out elements of ``spec`` (the same for each of its
    iterations): the packing of a row's leaves, whether an element is its one leaf or a
    flat tuple of them, and the most rows a pull asks for."""

    __slots__ = ("pack", "single", "leaf_only", "flat_tuple", "limit")

    def __init__(self, spec, options):
        self.pack = packer(spec)
        self.single = not isinstance(spec, (tuple, Mapping))   # an element is its one leaf
        # How a chunk of plain arrays is handed out without Python per element: an element
        # that is its one leaf is the column's row (the column's own iterator gives them),
        # a flat tuple the tuple of the columns' rows (zip gives them).
        self.leaf_only = self.single and spec is not None and not is_custom_nest(spec)
        self.flat_tuple = self.pack is tuple
        self.limit = options.chunk_rows or max_chunk_rows(spec)


class ChunkedRun:
    """The top-level iterator: elements one at a time from the root's chunks.

    It asks for one element first and grows its demand as iteration goes on
    (:func:`next_demand`), so that a consumer that stops early does not pay for (or
    run the side effects of) a whole chunk; a later iteration of a pipeline without
    such side effects starts at about PULL_TARGET_S of work instead (:class:`Pace`).
    Its state is the root's state before the
    current chunk and the number of rows already handed out since that state.
    """

    def __init__(self, ctx: ExecContext, root, spec, state: dict | None = None,
                 pace: Pace | None = None, shape: RunShape | None = None):
        self.ctx = ctx
        self.pace = pace
        self.largest = 0   # elements of this run's largest pull so far (for the pace)
        self.root = root
        self.consumer = ctx.consumer_stats()
        self.started: float | None = None   # the first pull of this iteration
        self.last_pull: float | None = None
        if ctx.options.profile:
            profiler.record_to(ctx.options.profile)
        shape = shape if shape is not None else RunShape(spec, ctx.options)
        self.pack, self.single, self.leaf_only = shape.pack, shape.single, shape.leaf_only
        self.flat_tuple, self.limit = shape.flat_tuple, shape.limit
        self.want = 1 if pace is None else pace.first_demand(self.limit)
        self.lock = threading.RLock()   # taken to read a chunk and to save, not per row
        self.interrupted: dict | None = None   # the state to resume from after Ctrl-C
        self.progress = None   # Options().progress: its bar (nbdata/progress.py)
        # Set by Pipeline.__iter__: its iterator and the pipeline (weakly), which takes
        # the run back once it ended, to start it over for its next iteration (reopen)
        self.owner = self.spare_to = None
        self._open(state)

    def _open(self, state: dict | None) -> None:
        self._hand_out(None)
        if state is None:
            self._root(self.ctx.open_chunks(self.root))
            self.before, self.base, self.ended = None, 0, False
        else:
            try:   # the iterator's own fields: the rows of a chunk already handed out
                state_check.record(state, "root", "skip", "ended")
                ended = state_check.flag(state, "ended")
                skip = state_check.integer(state, "skip", 0, self.limit)
            except StateFieldError as e:
                raise InvalidArgumentError(f"restore: the iterator's state does not fit this "
                                           f"pipeline: {e.message}", "iterator") from None
            self._root(self.ctx.open_chunks(self.root, state["root"]))
            self.before, self.base, self.ended = state["root"], 0, ended
            if not self.ended:
                chunk, self.base = skip_rows(self.it, skip)
                self.ended = chunk is None and self.base < skip
                self._hand_out(chunk)

    def reopen(self, next_epochs: Callable[[], dict]) -> bool:
        """Start this ended run over from the first element, as a fresh run would,
        its random ops drawing with the iteration numbers ``next_epochs()`` gives (the
        pipeline's next iteration, where the last one ended and its iterator is gone:
        ``Pipeline.__iter__``). Cold, an open touched some 25 functions' code and data
        for 100 us, an eighth of a short in-memory epoch; this touches a few. False
        where the root cannot start over in place (``FusedChunks.reopen``): nothing
        changed then, no iteration number taken."""
        reopen = getattr(self.inner, "reopen", None)
        ctx = self.ctx
        if (self.timed is None or not self.ended or self.interrupted is not None
                or self.progress is not None or ctx.feed or ctx.path or ctx._cancelled is not None
                or reopen is None or not reopen(ctx, next_epochs)):
            return False
        ctx.budget.refresh()
        self.largest = 0
        self.started = self.last_pull = None
        self.want = 1 if self.pace is None else self.pace.first_demand(self.limit)
        self.before, self.base, self.ended = None, 0, False
        return True

    def _root(self, it) -> None:
        """The root's chunk iterator ``it``; a pull calls the iterator a TimedChunks
        times (``inner``) itself and records the chunk with the pull's own clock
        (``timed``): two frames fewer per pull."""
        self.it = it
        self.inner, self.timed = (it.it, it) if type(it) is TimedChunks else (it, None)

    def _hand_out(self, chunk) -> None:
        """Makes ``chunk``'s rows the ones to hand out: ``elements``, a C iterator that
        gives them (a column's own iterator, zip over the columns, or map of a packing
        function over row numbers), and ``claims``, the iterator inside it whose
        ``operator.length_hint`` is the rows not yet handed out. An element is one
        ``next(elements)``: C code under the GIL, so threads sharing this iterator get
        disjoint rows without a lock per row, and a ``for`` loop runs no Python frame of
        nbdata's per element (Iterator.__next__ calls it directly)."""
        if chunk is None:
            self.elements = self.claims = iter(())
            self.n = 0
            return
        columns = chunk.columns
        n = self.n = chunk.n
        if self.single and len(columns) == 1 and (
                type(columns[0]) in (list, RowList)
                or (type(columns[0]) is np.ndarray and self.leaf_only)):
            # A chunk of whole elements (batches: one list of arrays), or a column of
            # plain-array elements: the column's iterator gives them.
            column = columns[0]
            self.elements = self.claims = iter(column if len(column) == n else column[:n])
        elif columns and all(type(c) in (np.ndarray, StringColumn) for c in columns):
            # Arrays and strings (records, lines): the elements from zip over the columns
            # (cut to the chunk's rows: zip stops with its first iterator, the claims),
            # a string column's rows made bytes at once (one copy of the chunk's bytes,
            # sliced in C; per row, col_row's dispatch and slicing cost several times as
            # much). A single string leaf is handed out as its list.
            rows = [c if len(c) == n else c[:n] if type(c) is np.ndarray else c.slice(0, n)
                    for c in columns]
            rows = [c.values() if type(c) is StringColumn else c for c in rows]
            self.claims = iter(rows[0])
            if self.single and len(rows) == 1 and self.leaf_only:
                self.elements = self.claims
            else:
                elements = zip(self.claims, *rows[1:])
                # (a flat tuple is zip's own element)
                self.elements = elements if self.flat_tuple else map(self.pack, elements)
        else:
            pack = self.pack
            if all(type(c) is np.ndarray for c in columns):
                def element(j, columns=columns):
                    return pack([c[j] for c in columns])
            else:
                def element(j, columns=columns):
                    return pack([col_row(c, j) for c in columns])
            self.claims = iter(range(n))
            self.elements = map(element, self.claims)

    def _pull(self) -> bool:
        if self.interrupted is not None:   # resumed after Ctrl-C: the run opens again
            state, self.interrupted = self.interrupted, None
            self.ctx = self.ctx.renewed()
            self._open(state)
            if self.ended:
                return False
            if operator.length_hint(self.claims):
                return True
        inner = self.inner
        self.before = inner.save()
        self.base = 0
        self._hand_out(None)
        began = time.perf_counter()
        if self.started is None:
            self.started = began
        try:
            chunk = inner.next(self.want)
        except KeyboardInterrupt:
            # The pull handed out nothing, so the state before it is where the run
            # stands. Its threads are told to stop and are not waited for, so the
            # interrupt surfaces at once; iterating again (or restoring the state that
            # save() now gives) reopens the run there.
            self.interrupted = {"root": self.before, "skip": 0, "ended": False}
            self.ctx.cancelled.set()
            self.close()
            raise
        ended = time.perf_counter()
        if self.timed is not None:
            self.timed.record(chunk, self.want, began, ended)
        if self.want < self.limit:
            self.want = next_demand(self.want, ended - began, self.limit)
        self.consumer.pulled(began, ended, ended - (self.last_pull or self.started))
        self.last_pull = ended
        if chunk is None:
            self.ended = True
            if self.ctx.options.profile:
                profiler.save_to(self.ctx.options.profile)
            if self.progress is not None:
                self.progress.close()
            return False
        if self.progress is not None:
            self.progress.update(chunk.n)
        if self.pace is not None and 0 < chunk.n >= self.largest:
            self.largest = chunk.n
            self.pace.seconds_per_element = (ended - began) / chunk.n
        self._hand_out(chunk)
        return True

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            elements = self.elements
            try:
                return next(elements)
            except StopIteration:
                pass
            with self.lock:
                if self.elements is elements and (self.ended or not self._pull()):
                    self.close()
                    raise StopIteration

    def between_chunks(self) -> bool:
        """Whether every row of the chunk read last was handed out (a state saved now
        is the root's, with no rows to skip)."""
        return not operator.length_hint(self.claims)

    def save(self) -> dict:
        with self.lock:
            if self.interrupted is not None:
                return self.interrupted
            if self.ended:
                return {"root": self.before, "skip": 0, "ended": True}
            n = self.n
            left = operator.length_hint(self.claims)
            if not left:
                return {"root": self.it.save(), "skip": 0, "ended": False}
            return {"root": self.before, "skip": self.base + n - left, "ended": False}

    def close(self) -> None:
        self.it.close()
        if self.progress is not None:
            self.progress.close()
        if self.ended and self.spare_to is not None:
            pipeline = self.spare_to()
            if pipeline is not None:
                pipeline._spare = self

    def __del__(self):
        try:
            self.it.close()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass
