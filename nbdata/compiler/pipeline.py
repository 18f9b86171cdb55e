"""``Pipeline``: a dataset's optimized physical plan, ready to iterate any number of times."""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable

from nbdata import checkpoint, progress
from nbdata.compiler.backend_cpu import CpuTyper, compile_stages
from nbdata.compiler.backend_gpu import kernel_source
from nbdata.compiler.executor import (ChunkedRun, ExecContext, Pace, RunShape, RunState,
                                      StageStats, element_unit)
from nbdata.compiler.drawing import plan_graph, plot_stats
from nbdata.compiler.lowering import plan
from nbdata.compiler.passes import run_passes
from nbdata.compiler.plan import plan_lines
from nbdata.kernels.threads import (ThreadBudget, oversubscription_line, sched_sample,
                                    serialises_kernels, tune_allocator)
from nbdata.ops.arrow_source import narrow_reads
from nbdata.memory import MemoryBudget
from nbdata.compiler.plan_identity import entries_fingerprint, mismatch, op_entries, stage_shapes
from nbdata.errors import DataLossError, InvalidArgumentError
from nbdata.iterator import Iterator
from nbdata.ops.node import INFINITE, Node
from nbdata.ops.shuffle import EpochCounter
from nbdata.options import Options
from nbdata.trace.placeholder import Placeholder

STATE_VERSION = 2


def _malformed_field(doc: dict) -> str | None:
    """The first field a restore reads that a state document lacks or holds of another
    kind (None: it is well formed)."""
    run = doc.get("run")
    top = run.get("run") if isinstance(run, dict) else None
    epochs = run.get("epochs") if isinstance(run, dict) else None
    checks = [
        ("run", isinstance(top, dict) and {"root", "skip", "ended"} <= set(top)),
        ("skip", isinstance(top, dict) and isinstance(top.get("skip"), int)),
        ("epochs", isinstance(epochs, dict) and all(
            isinstance(k, int) and isinstance(v, int) for k, v in epochs.items())),
        ("fingerprint", isinstance(doc.get("fingerprint"), str)),
        ("ops", isinstance(doc.get("ops"), list)),
        ("stages", isinstance(doc.get("stages"), list)),
        ("seed", doc.get("seed") is None or isinstance(doc["seed"], int)),
    ]
    return next((name for name, ok in checks if not ok), None)


def _well_formed(doc: dict) -> bool:
    """True when a state document has the fields a restore reads, of the right kinds."""
    return _malformed_field(doc) is None


def _check_run_fields(doc: dict) -> None:
    """The pipeline-wide fields of a well-formed state fit (``nbdata/state_check.py``
    checks each op's): iteration numbers and the seed are integers in their ranges."""
    from nbdata import state_check
    for index, epoch in doc["run"]["epochs"].items():
        state_check.check_int(index, "epochs", 0, state_check.MAX_POSITION)
        state_check.check_int(epoch, f"epochs[{index}]", 0, state_check.MAX_EPOCH)
    if doc["seed"] is not None:
        state_check.check_int(doc["seed"], "seed", 0, (1 << 63) - 1)


class PlanText(str):
    """A plan listing that shows as plain text at the interactive prompt."""

    def __repr__(self) -> str:
        return str(self)


def _walk(node: Node):
    yield node
    for child in node.inputs:
        yield from _walk(child)


class Pipeline:
    """The compiled form of a dataset (``ds.compile()``).

    Iterating it opens a fresh :class:`nd.Iterator` each time; ``explain()`` gives
    the physical plan and ``stats()`` what its stages did so far; ``len(pipe)`` the
    number of elements when it is known. The common Dataset methods (``take``,
    ``batch``, ``map``, ...: :attr:`DATASET_METHODS`) apply to the dataset it was
    compiled from and give that dataset's pipeline.

    >>> import nbdata as nd
    >>> pipe = nd.Dataset.range(6).map(lambda x: x * 2).batch(4).compile()
    >>> [b.tolist() for b in pipe]
    [[0, 2, 4, 6], [8, 10]]
    """

    def __init__(self, logical: Node, options: Options, state: RunState | None = None,
                 make_dataset: Callable | None = None):
        if not options.__dict__.get("_frozen"):
            # A frozen copy: its values are fixed for the pipeline's life, and a frozen
            # Options reads each value as a plain attribute after its first read (an
            # unfrozen one resolves defaults per read, 1-2 us, many times per iteration).
            options = options.merge(type(options)())._freeze()
        self.options = options
        self.logical = logical
        self.state = state if state is not None else RunState()
        self._make_dataset = make_dataset
        self._stats: dict = {}
        self.memory = MemoryBudget(options.memory_budget)   # every iteration's buffers
        tune_allocator()
        # Compiling says what it does once it takes over a second (nbdata/progress.py).
        with progress.working("compiling a pipeline"):
            progress.step("running the rewrite passes")
            # Not a switchable pass: which Arrow columns' nulls are errors is semantics.
            self.optimized, self.passes = run_passes(narrow_reads(logical), options)
            progress.step("planning its stages (Numba's type inference of its functions)")
            planned, self.notes = plan(self.optimized, options, CpuTyper())
            self.physical = compile_stages(planned, options)
        self.element_spec = logical.spec
        seeded = [n for n in _walk(self.optimized) if n.seeded]
        self.op_index = {}
        for n in seeded:
            self.op_index.setdefault(n.resource_key, len(self.op_index))
        self.draws_seed = any(n.seed is None for n in seeded)
        # Later iterations start at the demand the last one settled on (Pace), where no
        # node runs user Python per element or writes files: reading ahead there has no
        # side effect a consumer that stops early could see.
        self._pace = Pace() if all(n.reads_ahead_freely() for n in _walk(self.physical)) \
            else None
        # One thread budget for every iteration of the pipeline (two iterations running
        # at once share the cores: each sees the other's busy threads), and how the top
        # iterator hands out elements: both made once, not per iteration (an iteration
        # of a short in-memory epoch spent a fifth of its time opening).
        self._budget = ThreadBudget(options)
        self._shape = RunShape(self.element_spec, options)

    @functools.cached_property
    def identity(self) -> tuple[str, list, list]:
        """(fingerprint, op entries, stage shapes) that saved states carry and restores
        check (``nbdata/compiler/plan_identity.py``): taken at the first save or restore,
        as it may hash the arrays a pipeline holds."""
        ops = op_entries(self.logical)
        return entries_fingerprint(ops), ops, stage_shapes(self.physical)

    @property
    def fingerprint(self) -> str:
        """Identifies the pipeline across processes: its ops, their element specs and
        arguments, and its functions' code, constants and the values they read."""
        return self.identity[0]

    def _context(self, feed: dict, epochs: dict | None = None,
                 cancelled=None) -> ExecContext:
        """A context for one run; ``epochs`` (by op index) restores a saved run's, else
        each random op gets its next iteration number."""
        if epochs is None:
            bases = self._next_epochs()
        else:
            by_index = {index: key for key, index in self.op_index.items()}
            bases = {by_index[int(i)]: int(e) for i, e in epochs.items() if int(i) in by_index}
        if "sched" not in self._stats:
            self._stats["sched"] = sched_sample()   # summary(): waits for a CPU since
        self._budget.refresh()
        return ExecContext(self.options, feed, self.state, self._stats, self._make_dataset,
                           self._budget, self.op_index, bases, cancelled=cancelled,
                           memory=self.memory)

    def _next_epochs(self) -> dict:
        """The iteration number each random op draws with in the run opening now."""
        return {key: self.state.resource(key, lambda: EpochCounter(True)).next_epoch()
                for key in self.op_index}

    def _epochs_by_index(self, ctx: ExecContext) -> dict:
        return {index: ctx.epochs.get(key, 0) for key, index in self.op_index.items()}

    @staticmethod
    def _feed(feed_dict: dict | None) -> dict:
        feed = {}
        for ph, value in (feed_dict or {}).items():
            if not isinstance(ph, Placeholder):
                raise TypeError(f"feed_dict keys must be nd.placeholder objects, got {ph!r}")
            feed[ph] = ph.bind(value)
        return feed

    def open(self, feed_dict: dict | None = None, state: dict | None = None) -> Any:
        """The executor's raw iterator (``__next__`` raising StopIteration), with
        placeholders bound from ``feed_dict`` (and resumed from ``state``).

        >>> import numpy as np, nbdata as nd
        >>> n = nd.placeholder(np.int64, shape=[])
        >>> pipe = nd.Dataset.range(n).compile()
        >>> [int(x) for x in pipe.open({n: 3})]
        [0, 1, 2]
        """
        ctx = self._context(self._feed(feed_dict), None if state is None else state["epochs"])
        run = ChunkedRun(ctx, self.physical, self.element_spec,
                         None if state is None else state["run"], pace=self._pace,
                         shape=self._shape)
        if self.options.progress:
            run.progress = self._progress_bar()
        return run

    def _progress_bar(self) -> progress.Progress:
        """``Options().progress``: a bar for the iteration opening now."""
        self._iterations = getattr(self, "_iterations", 0) + 1
        title = self.options.progress
        n = self.cardinality()
        unit = "batch" if element_unit(self.physical) == "batches" else "elem"
        return progress.Progress(title if isinstance(title, str) else f"epoch {self._iterations}",
                                 n if n >= 0 else None, unit, asked=True)

    def open_chunks(self, feed_dict: dict | None = None, state: dict | None = None,
                    epochs: dict | None = None):
        """A run's root chunk iterator: ``next(want)`` gives a Chunk (one column per leaf
        of the element, up to about ``want`` rows) or None at the end. For consumers that
        move whole chunks (the TF1 queue runners of ``nbdata.train``, the workers of
        ``distribute``): ``state`` (what the iterator's ``save()`` gave) resumes a run,
        ``epochs`` (iteration numbers by op index) sets what random ops draw."""
        return self._context(self._feed(feed_dict), epochs).open_chunks(self.physical, state)

    def open_chunks_in(self, outer: ExecContext, state: dict | None = None):
        """Open this pipeline's chunk iterator inside another one's run (a dataset made by
        ``flat_map`` or ``interleave``): the outer feed binds placeholders, this
        pipeline's own options, passes and run state apply."""
        return self._context(outer.feed, cancelled=outer.cancelled).open_chunks(self.physical, state)

    def __iter__(self) -> Iterator:
        it = Iterator(self.element_spec)
        it._start(self, None, self._ended_run())
        if self._recycles:
            run = it._raw
            run.owner, run.spare_to = weakref.ref(it), weakref.ref(self)
        return it

    @functools.cached_property
    def _recycles(self) -> bool:
        """Whether an iteration's run may start over for the next iteration: no
        profile or progress bar is kept per iteration."""
        return not (self.options.profile or self.options.progress)

    def _ended_run(self) -> ChunkedRun | None:
        """The run of an iteration that ended (it left itself in ``_spare`` as it
        closed, ChunkedRun.close), started over for the next one (ChunkedRun.reopen,
        its random ops drawing with their next iteration numbers, as a fresh run's do)
        where its iterator is gone, so that no thread can be using the run and nothing
        can save its state; else None (a fresh run opens)."""
        run = self.__dict__.pop("_spare", None)   # (atomic: one iteration takes it)
        if run is None or run.owner() is not None or not run.reopen(self._next_epochs):
            return None
        return run

    def cardinality(self) -> int:
        """The number of elements an iteration gives, or ``nd.INFINITE`` / ``nd.UNKNOWN``
        (the dataset's :meth:`nd.Dataset.cardinality`)."""
        return self.logical.cardinality()

    def as_numpy_iterator(self) -> Iterator:
        """An iterator of NumPy elements (what iterating gives; as the Dataset method).

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(3).compile().as_numpy_iterator()]
        [0, 1, 2]
        """
        return iter(self)

    def __len__(self) -> int:
        """The number of elements an iteration gives when it is known (so that
        ``tqdm(pipe)`` shows a total); TypeError for an infinite or unknown one.

        >>> import nbdata as nd
        >>> len(nd.Dataset.range(10).batch(4).compile())
        3
        """
        n = self.cardinality()
        if n == INFINITE:
            raise TypeError("the dataset is infinite")
        if n < 0:
            raise TypeError("the dataset length is unknown")
        return n

    # Dataset methods a compiled pipeline takes too: applied to the dataset it was
    # compiled from, giving that dataset's compiled pipeline (compiled kernels come
    # from the kernel cache).
    DATASET_METHODS = frozenset({
        "apply", "batch", "cache", "concatenate", "enumerate", "filter", "flat_map",
        "interleave", "map", "padded_batch", "prefetch", "rebatch", "repeat", "shard",
        "shuffle", "skip", "take", "unbatch", "window", "with_options", "zip",
    })

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self.DATASET_METHODS:
            raise AttributeError(
                f"'Pipeline' object has no attribute {name!r}"
                + ("" if name.startswith("_") else
                   f": a compiled pipeline iterates, explains and profiles; apply Dataset "
                   f"methods ({name}(...) included) to the dataset before compile()"))
        dataset = self.__dict__.get("_dataset")
        if dataset is None:
            raise AttributeError(
                f"'Pipeline' object has no attribute {name!r}: this pipeline was not "
                f"compiled from an nd.Dataset it knows; apply {name}(...) to the dataset "
                f"before compile()")
        method = getattr(dataset, name)

        @functools.wraps(method)
        def applied(*args, **kwargs):
            return method(*args, **kwargs).compile()
        return applied

    # ---------------------------------------------------------- state
    def save_state(self, run) -> bytes:
        """The bytes of a run's state (what ``Iterator.save()`` returns): the run's
        positions with the pipeline's identity (fingerprint, ops, stages), checksummed
        (``nbdata/checkpoint.py``)."""
        fingerprint, ops, stages = self.identity
        doc = {"version": STATE_VERSION, "fingerprint": fingerprint, "ops": ops,
               "stages": stages,
               "run": {"run": run.save(), "epochs": self._epochs_by_index(run.ctx)},
               "seed": self.state.seed if self.draws_seed else None}
        return checkpoint.encode(doc)

    def read_state(self, data: bytes) -> dict:
        """The checked document of ``save_state`` bytes, nothing opened yet: DataLossError
        for bytes that are corrupt, cut short or of another format version;
        NotFoundError when they were saved by a pipeline of other ops, and
        InvalidArgumentError when an op's arguments, functions or element spec differ
        (naming the op) or the pipeline was planned differently."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"restore: expected the bytes of it.save(), got {type(data).__name__}")
        doc = checkpoint.decode(data)
        if not isinstance(doc, dict) or "version" not in doc:
            raise DataLossError("restore: the bytes hold no iterator state")
        if doc["version"] != STATE_VERSION:
            raise DataLossError(f"restore: unknown iterator state version {doc['version']!r} "
                                f"(this nbdata reads version {STATE_VERSION})")
        bad = _malformed_field(doc)
        if bad is not None:
            raise DataLossError(f"restore: the iterator state is malformed (its field {bad!r})")
        try:
            _check_run_fields(doc)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"restore: the iterator state does not fit this "
                                       f"pipeline: {e.message}", "iterator") from None
        fingerprint, ops, stages = self.identity
        if doc["fingerprint"] != fingerprint:
            raise mismatch(doc["ops"], ops)
        if doc["stages"] != stages:
            raise InvalidArgumentError(
                "restore: the state was saved by this pipeline planned differently (its "
                f"stages: {', '.join(map(str, doc['stages']))}; here: {', '.join(stages)}): "
                "restore it with the Options it was saved with (fusion, optimization switches)")
        return doc

    def resume(self, doc: dict, feed_dict: dict | None = None):
        """A run resumed from a document of :meth:`read_state`."""
        if doc["seed"] is not None:
            self.state.seed = doc["seed"]
        return self.open(feed_dict, doc["run"])

    def restore_state(self, data: bytes, feed_dict: dict | None = None):
        """A run resumed from ``save_state`` bytes (:meth:`read_state`, then :meth:`resume`)."""
        return self.resume(self.read_state(data), feed_dict)

    # ---------------------------------------------------------- reports
    @property
    def applied_passes(self) -> list[str]:
        """The names of the rewrite passes that changed the plan, in order."""
        return [run.name for run in self.passes if run.changed]

    def fused_stages(self) -> list:
        """The compiled fused stages of the physical plan, sink first."""
        return [n for n in _walk(self.physical) if n.op == "fused_stage"]

    def profile(self, path: str | None = None):
        """A context manager recording a trace of what this process's pipelines do
        while the block runs (stages, kernel runs, Python fallbacks, waits, copies to
        the GPU, on each thread), written to ``path`` as Chrome trace-event JSON that
        Perfetto and chrome://tracing open (:mod:`nbdata.profiler`)::

            with pipe.profile("trace.json"):
                for batch in pipe:
                    train_step(batch)
        """
        from nbdata import profiler
        return profiler.profile(path)

    def stats(self) -> "PipelineStats":
        """What each stage did over every iteration so far: rows and chunks, time (its
        inputs' included) and rows/s, what AUTOTUNE chose, how long a prefetch's consumer
        waited, and for fused stages the rows run in the kernel and the rows re-run on
        the reference path (with the first reasons).

        >>> import nbdata as nd
        >>> o = nd.Options(); o.fusion_min_rows = 0
        >>> pipe = nd.Dataset.range(10).map(lambda x: x + 1).with_options(o).compile()
        >>> _ = list(pipe)
        >>> s = pipe.stats().stages[0]
        >>> s.kernel_rows, s.fallback_rows
        (10, 0)
        """
        stages = []
        for node in _walk(self.physical):
            found = self._stats.get(id(node))
            if found is None and node.op == "fused_stage":
                found = StageStats(node.title(), node)
            if found is not None:
                stages.append(found)
        found = PipelineStats(stages, self._stats.get("consumer"), self.memory)
        found.sched_start = self._stats.get("sched")
        return found

    def explain(self, stats: bool = False, format: str = "text") -> PlanText:
        """The physical plan: stages from sink to source, fused stages with their ops,
        what is not fused and why, which stages handle elements one at a time in Python
        (everything else moves chunks of rows), each fused stage's generated source, the
        pipeline seed when one was drawn, and what the stages did so far (with
        ``stats=True``: every stage's rows, time and choices). ``format="mermaid"`` or
        ``"dot"`` gives the plan as a graph instead (Mermaid flowchart or Graphviz text:
        a box per op, each fused stage a cluster of its ops, per-element Python stages
        marked).

        >>> import nbdata as nd
        >>> print(nd.Dataset.range(3).map(lambda x: x + 1).compile().explain())
        == physical plan (sink first) ==
        map(fn=<lambda>)
          range(start=0, stop=3, step=1, dtype=dtype('int64'))
        == rewrite passes ==
          noop_elimination: no change (... ms)
          decode_lifting: no change (... ms)
          decode_vectorization: no change (... ms)
          batch_map_fusion: no change (... ms)
          map_fusion: no change (... ms)
          gpu_map_fusion: no change (... ms)
          filter_fusion: no change (... ms)
          shuffle_indices: no change (... ms)
        == not fused ==
          range(start=0, stop=3, step=1, dtype=dtype('int64')): 3 rows, fewer than Options().fusion_min_rows (4096) -> not compiled: the ops above it run op by op
        == execution: chunks of rows through every stage, except ==
          map(fn=<lambda>): per element: calls <lambda> in Python for each element
        """
        if format != "text":
            # A drawn graph: ``format="mermaid"`` (GitHub and many Markdown viewers draw
            # it; mermaid.live) or ``"dot"`` (Graphviz: ``dot -Tsvg``).
            return PlanText(plan_graph(self.physical, format))
        lines = ["== physical plan (sink first) =="]
        lines += plan_lines(self.physical)
        if self.passes:
            lines.append("== rewrite passes ==")
            lines += [f"  {run.line()}" for run in self.passes]
        if self.notes:
            lines.append("== not fused ==")
            lines += [f"  {note.line()}" for note in self.notes]
        kernels = [(n, n.kernel_note()) for n in _walk(self.physical) if n.kernel_note()]
        if kernels:
            lines.append("== record kernels ==")
            lines += [f"  {n.describe()}: {note}" for n, note in kernels]
        per_element = [(n, n.per_element()) for n in _walk(self.physical)
                       if n.per_element() is not None]
        if per_element:
            lines.append("== execution: chunks of rows through every stage, except ==")
            lines += [f"  {n.describe()}: per element: {why}" for n, why in per_element]
        for node in _walk(self.physical):
            extra = node.explain_lines()
            if extra:
                lines.append(f"== {node.title()}: driver and workers ==")
                lines += extra
        stages = self.fused_stages()
        for stage in stages:
            lines.append(f"== {stage.title()} ==")
            lines += stage.report_lines()
        for node in _walk(self.physical):
            for label, chain in node.gpu_chains():
                lines.append(f"== {node.describe()}: GPU kernels of {label}: "
                             f"{chain.describe()} ==")
                for segment in chain.segments():
                    lines += ["  " + line for line in kernel_source(segment)[0].rstrip().splitlines()]
        if self.draws_seed:
            lines.append("== random seeds ==")
            lines.append(f"  pipeline seed {self.state.seed} (drawn, as no seed and no global "
                         "seed were set; kept in saved iterator state)")
        if stages and serialises_kernels():
            lines.append("== threads ==")
            lines.append("  Numba's workqueue threading layer cannot run two parallel kernels "
                         "at once: nbdata runs one kernel at a time (install tbb, or set "
                         "NUMBA_THREADING_LAYER=omp, to overlap them)")
        report = self.stats().stages if stats else [s for s in self.stats().stages
                                                     if s.node is not None and s.node.op == "fused_stage"]
        if report:
            lines.append("== stage statistics (all iterations so far) ==")
            lines += ["  " + s.line() for s in report]
        return PlanText("\n".join(lines))


class PipelineStats:
    """Per stage counters (:class:`nbdata.compiler.executor.StageStats`), sink first,
    and the consumer's (:class:`nbdata.compiler.executor.ConsumerStats`): ``summary()``
    says whether the consumer is input-bound, which stage bounds the throughput and what
    AUTOTUNE chose and why."""

    def __init__(self, stages: list, consumer=None, memory=None):
        self.stages = stages
        self.consumer = consumer
        self.memory = memory

    @property
    def input_share(self) -> float | None:
        """The share of the consumer's iteration time spent waiting for input (None
        before any iteration)."""
        c = self.consumer
        if c is None or c.wall_seconds <= 0:
            return None
        return min(1.0, c.input_seconds / c.wall_seconds)

    def own_seconds(self, stage) -> float:
        """A stage's time less its direct inputs' (what it spent itself). A stage whose
        input runs on a thread of its own (a prefetch) spent its time handing over and
        waiting: its own time is the hand-over."""
        node = stage.node
        if stage.wait_seconds or getattr(node, "op", None) == "prefetch":
            return max(0.0, stage.seconds - stage.wait_seconds)
        inputs = [s for s in self.stages if node is not None and s.node in node.inputs]
        return max(0.0, stage.seconds - sum(s.seconds for s in inputs))

    def bounding_stage(self):
        """The stage that spent the most time of its own (the one to speed up)."""
        timed = [s for s in self.stages if s.seconds > 0]
        return max(timed, key=self.own_seconds) if timed else None

    def summary(self) -> str:
        """The input-bound summary: the consumer's wait for input, the bounding stage,
        what AUTOTUNE chose and why."""
        lines = []
        oversubscribed = oversubscription_line(getattr(self, "sched_start", None))
        if oversubscribed is not None:
            lines.append(oversubscribed)
        share, c = self.input_share, self.consumer
        if share is not None:
            verdict = ("input-bound: speed up the pipeline" if share >= 0.5 else
                       "input waits are a minor part: the consumer's own work dominates")
            lines.append(f"input: the consumer waited for input {share:.0%} of the "
                         f"{c.wall_seconds:.3f} s it iterated ({c.input_seconds:.3f} s in "
                         f"{c.pulls:,} pulls) -> {verdict}")
        bound = self.bounding_stage()
        if bound is not None:
            total = sum(self.own_seconds(s) for s in self.stages) or 1.0
            lines.append(f"bounding stage: {bound.title} ({self.own_seconds(bound):.3f} s of "
                         f"its own, {self.own_seconds(bound) / total:.0%} of the stages' time)")
        if self.memory is not None and self.memory.peak:
            lines.append(f"memory: the pipeline's buffers held at most "
                         f"{self.memory.peak / 2**20:,.1f} MiB together (of its memory budget, "
                         f"Options().memory_budget: {self.memory.limit / 2**20:,.0f} MiB)")
        for s in self.stages:
            for k, v in s.chosen.items():
                if k in ("buffer rows", "parallelism", "kernel threads"):
                    why = s.why.get(k, "its initial value")
                    lines.append(f"autotune: {s.title}: {k}={v} ({why})")
        return "\n".join(lines) or "no iteration has run"

    def plot(self, path: str, matplotlib: bool | None = None) -> str:
        """Draws what the stages did over time into ``path``: each stage's share of
        time busy producing (inputs included), the share its consumer waited on it (a
        prefetch), and the throughput at the sink. With matplotlib when it is installed
        (any format it writes), else a self-contained ``.svg`` or ``.html`` file
        (``matplotlib=False`` forces those). Returns the path."""
        return plot_stats(self, path, matplotlib)

    @property
    def kernel_rows(self) -> int:
        return sum(s.kernel_rows for s in self.stages)

    @property
    def fallback_rows(self) -> int:
        return sum(s.fallback_rows for s in self.stages)

    def __repr__(self) -> str:
        text = "\n".join(s.line() for s in self.stages) or "no stages have run"
        return text + ("\n" + self.summary() if self.consumer is not None else "")
