"""``map`` after ``prefetch_to_device``: nd.gpu ops on device batches, one fused kernel per
output leaf and batch.

The map function is recorded (``nbdata/trace``) on one tensor per leaf of the batch. The
nd.gpu ops it applies to a device leaf (or, for ``nd.gpu.decode_jpeg``, to a host leaf
of encoded images) are found in the op table and become the steps of a chain
(``nbdata/primitives/gpu.py``); host leaves may only pass through. Consecutive GPU maps
are fused by the ``gpu_map_fusion`` pass into one node whose chains hold all the steps,
so they run as ONE generated kernel per output leaf (``explain()`` shows its source).
With ``num_parallel_calls`` several batches are decoded and launched at once, on pool
threads, and handed out in input order (:class:`GpuMapChunks`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import time
from typing import Any, Callable

from nbdata import state_check
from nbdata.chunks import Chunk, RowList, col_row
from nbdata.errors import CancelledError, InvalidArgumentError
from nbdata.ops.node import AUTOTUNE, Node, UnaryNode, arg_field
from nbdata.ops.map import call_threads
from nbdata.ops.runtime import InputChunks, Tuner
from nbdata.primitives.gpu import Apply, Chain, decode_first
from nbdata.primitives.table import lookup
from nbdata.spec import TensorSpec, flatten, pack_as
from nbdata.trace.abstract import function_name
from nbdata.trace.function import record_function
from nbdata.trace.graph import Tensor


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One output leaf: input leaf ``source`` through ``steps`` (a device leaf, or a host
    leaf its first step decodes), or passed through unchanged (``steps`` None)."""

    source: int
    steps: tuple | None = None


def _refused(op: str, fn: Callable, what: str) -> TypeError:
    return TypeError(f"{op}: after prefetch_to_device, map function {function_name(fn)} must "
                     f"apply nd.gpu ops to its device components (or decode a host component "
                     f"of JPEG bytes with nd.gpu.decode_jpeg) or return its components "
                     f"unchanged; {what}")


def _steps_to(t: Tensor, inputs: dict, op: str, fn: Callable) -> tuple[int, list]:
    """(input leaf, steps) of the chain of nd.gpu ops computing ``t``."""
    steps = []
    while id(t) not in inputs:
        node = t.op
        entry = lookup(node.call[0]) if node.call is not None else None
        if entry is None or not entry.device:
            raise _refused(op, fn, f"it applies {node.type} to a batch")
        _, args, kwargs = node.call
        steps.append(entry.gpu(*args[1:], **kwargs))
        t = args[0]
    return inputs[id(t)], steps[::-1]


def trace(fn: Callable, spec: Any, device: tuple, op: str, per_value: bool = False) -> tuple:
    """(leaves, output spec) of a GPU map function over elements of ``spec`` (the batches
    of ``prefetch_to_device``, whose leaves ``device`` are on the GPU)."""
    specs = flatten(spec)
    for k in device:
        s = specs[k]
        if s.shape is None or not s.shape or any(d is None for d in s.shape[1:]):
            raise ValueError(f"{op}: nd.gpu ops need batches of a known element shape; "
                             f"component {k} has shape {s.shape}")
    if per_value:   # ds.map(fn, device="cuda"): fn on every value of every device leaf
        leaves = tuple(Leaf(k, (Apply(fn),)) if k in device else Leaf(k) for k in range(len(specs)))
    else:
        graph = record_function(fn, spec)
        inputs = {id(t): k for k, t in enumerate(graph.inputs)}
        leaves = []
        for value in graph.output_leaves:
            if not isinstance(value, Tensor):
                raise _refused(op, fn, f"it returned a {type(value).__name__}")
            source, steps = _steps_to(value, inputs, op, fn)
            first_decodes = bool(steps) and steps[0].kind == "decode"
            if (source in device) == first_decodes and steps:
                raise _refused(op, fn, "nd.gpu.decode_jpeg takes the encoded images (a host "
                               "component), and ops of device batches take device batches")
            leaves.append(Leaf(source, tuple(steps) if steps else None))
        leaves = tuple(leaves)
        spec_out = graph.outputs
    out_specs = []
    for leaf in leaves:
        s = specs[leaf.source]
        if leaf.steps is None:
            out_specs.append(s)
            continue
        chain = leaf_chain(leaf, s)
        out_specs.append(TensorSpec((s.shape[0],) + tuple(chain.out_shape), chain.out_dtype))
    return leaves, pack_as(spec if per_value else spec_out, out_specs)


def leaf_chain(leaf: Leaf, spec: TensorSpec) -> Chain:
    """The chain of a leaf's kernel steps (after a decoding first step, over what it
    decodes to), checked: a ValueError names the op that cannot follow."""
    steps = list(leaf.steps)
    shape, dtype = tuple(spec.shape[1:]), spec.dtype
    if steps and steps[0].kind == "decode":
        shape, dtype = steps[0].out_shape(shape), steps[0].out_dtype(dtype)
        steps = steps[1:]
    return Chain(steps, shape, dtype)


@dataclasses.dataclass(frozen=True, eq=False)
class GpuMap(UnaryNode):
    leaves: tuple = arg_field()
    out_spec: Any = arg_field()
    names: tuple = arg_field()      # the user functions, in call order (for plans)
    # batches in flight at once (map's num_parallel_calls: None one, AUTOTUNE tuned)
    num_parallel_calls: Any = None
    op = "map"

    @property
    def spec(self):
        return self.out_spec

    @property
    def device_leaves(self) -> tuple:
        return tuple(k for k, leaf in enumerate(self.leaves)
                     if leaf.steps is not None or leaf.source in self.input.device_leaves)

    def describe(self) -> str:
        calls = self.num_parallel_calls
        shown = "" if calls is None else \
            f", num_parallel_calls={'AUTOTUNE' if calls == AUTOTUNE else calls}"
        return f"{self.label}[gpu](fn={' then '.join(self.names)}{shown})"

    def chains(self) -> list:
        """(output leaf, decoding step or None, Chain) of each leaf computed on the GPU."""
        specs = flatten(self.input.spec)
        out = []
        for k, leaf in enumerate(self.leaves):
            if leaf.steps is not None:
                decode = leaf.steps[0] if leaf.steps[0].kind == "decode" else None
                out.append((k, decode, leaf_chain(leaf, specs[leaf.source])))
        return out

    def kernel_note(self) -> str | None:
        lines = []
        for k, decode, chain in self.chains():
            if decode is not None:
                lines.append(f"component {k} from component {self.leaves[k].source}: "
                             f"{decode.describe()}")
            if chain.steps:
                launches = len(chain.segments())
                lines.append(f"GPU kernel for component {k}: {chain.describe()} ("
                             + ("one launch" if launches == 1 else
                                f"{launches} launches and the reductions between them")
                             + " per batch)")
        return "; ".join(lines) if lines else None

    def gpu_chains(self) -> list:
        return [(f"component {k}", chain) for k, _, chain in self.chains() if chain.steps]

    def open_chunks(self, ctx, state=None):
        return GpuMapChunks(self, ctx, state)


# The most batches a GPU map with num_parallel_calls=AUTOTUNE keeps in flight: each
# holds a decoder and its decoded batch in device memory, and the calls spend their time
# in nvImageCodec and launches, which release the GIL.
MAX_IN_FLIGHT = 4


class _Batch:
    """One input row (a batch) of a GPU map: its values, its first element's number (the
    counter of its random draws), its number among the batches, and its result once
    computed (``future`` on a pool thread, else ``outcome``: (ok, value or error))."""

    __slots__ = ("values", "rows", "start", "index", "before", "at", "future", "outcome")

    def __init__(self, values: list, rows: int, start: int, index: int, before, at: int):
        self.values, self.rows, self.start, self.index = values, rows, start, index
        self.before, self.at = before, at   # the input's state before its chunk, its row there
        self.future = self.outcome = None


class GpuMapChunks(InputChunks):
    """The input's batches through the chains, in input order.

    With ``num_parallel_calls`` > 1 (AUTOTUNE: tuned up to MAX_IN_FLIGHT within the
    thread budget) that many batches are decoded and launched at once on pool threads,
    each thread on its own decode and compute streams and its own decoder: the host work
    of a batch (nvImageCodec's parsing, its CPU share of decoding, launches) overlaps
    the next batches'. A batch's random draws count elements from its position in the
    input (``start``), whichever thread computes it and whether a batch before it
    failed, so the values do not depend on the parallelism.

    State: the input's before the chunk of the first batch not handed out, that batch's
    row in the chunk (``skip``: a restore reads the chunk again and skips the rows before
    it; batches in flight are computed again) and its element count. An error is raised
    for its batch alone, after the batches before it went out."""

    def __init__(self, node: GpuMap, ctx, state):
        self.before = None if state is None else state["input"]
        self.it = ctx.open_chunks(node.input, self.before)
        self.ctx = ctx
        self.leaves = node.leaves
        self.chains = {k: (decode, chain) for k, decode, chain in node.chains()}
        # an input leaf the chains read: its length is the batch's element count
        self.counted = next((leaf.source for leaf in node.leaves if leaf.steps is not None),
                            None)
        self.next_start = 0 if state is None else state_check.integer(state, "rows")
        self.next_index = 0   # batches taken by this iterator (for error messages)
        self.stats = ctx.stats(node)
        limit = max(1, min(MAX_IN_FLIGHT, ctx.budget.total))
        threads, _ = call_threads(ctx, node.num_parallel_calls, None, limit)
        self.tuner = Tuner(limit) if threads is None else None
        self.threads = 1 if threads is None else max(1, threads)
        self.pool = None
        self.queue: collections.deque = collections.deque()   # _Batch, in input order
        self.chunk: Chunk | None = None   # the input chunk rows are taken from
        self.taken = 0
        self.skip = 0 if state is None else state_check.integer(
            state, "skip", 0, state_check.MAX_CHUNK_SKIP, default=0)
        self.ended = False

    def _workers(self) -> int:
        return self.tuner.value if self.tuner is not None else self.threads

    def _take(self, want: int) -> bool:
        """Queue the next input row (on a pool thread when there are several workers);
        False at the input's end."""
        while self.chunk is None or self.taken >= self.chunk.n:
            if self.ended:
                return False
            self.before = self.it.save()
            self.chunk, self.taken = self.it.next(max(1, want + self.skip)), 0
            if self.chunk is None:
                self.ended = True
                return False
            if self.skip:   # after a restore: the rows a save had handed out already
                self.taken = min(self.skip, self.chunk.n)
                self.skip -= self.taken
        values = [col_row(c, self.taken) for c in self.chunk.columns]
        self.taken += 1
        v = values[self.counted] if self.counted is not None else ()
        rows = int(v.shape[0]) if hasattr(v, "shape") else len(v)
        batch = _Batch(values, rows, self.next_start, self.next_index, self.before,
                       self.taken - 1)
        self.next_start += rows
        self.next_index += 1
        if self._workers() > 1:
            if self.pool is None:
                self.pool = concurrent.futures.ThreadPoolExecutor(
                    self.tuner.limit if self.tuner is not None else self.threads,
                    thread_name_prefix="nbdata-gpu-map")
            batch.future = self.pool.submit(self._apply, batch)
        self.queue.append(batch)
        return True

    def _apply(self, batch: _Batch) -> list:
        from nbdata.gpu import runtime
        if self.ctx.cancelled.is_set():
            raise CancelledError("the run was interrupted: its iterator was closed", "map[gpu]")
        runtime.backend().bind()   # this may be a pipeline's background or pool thread
        out = []
        for k, leaf in enumerate(self.leaves):
            value = batch.values[leaf.source]
            if leaf.steps is None:
                out.append(value)
                continue
            decode, chain = self.chains[k]
            if decode is not None:
                try:
                    value, steps = decode_first(decode, chain.steps, value, batch.start)
                except InvalidArgumentError as e:
                    raise InvalidArgumentError(f"{e.message} (batch {batch.index})",
                                               e.op) from None
                if steps and steps[0] is not chain.steps[0]:   # decoded the crop windows
                    chain = self.windowed_chain(k, chain, steps)
            out.append(self.ctx.run_gpu_chain(chain, value, batch.start) if chain.steps else value)
        return out

    def windowed_chain(self, k: int, chain, steps: list):
        """The chain of leaf ``k`` over batches decoded as their crop windows (made once)."""
        cached = getattr(self, "_windowed", None)
        if cached is None:
            cached = self._windowed = {}
        if k not in cached:
            cached[k] = Chain(steps, chain.shape, chain.dtype)
        return cached[k]

    def _outcome(self, batch: _Batch) -> tuple:
        """(ok, value or error) of a batch: its pool thread's, or computed here."""
        if batch.outcome is None:
            try:
                value = batch.future.result() if batch.future is not None else self._apply(batch)
                batch.outcome = (True, value)
            except Exception as e:  # noqa: BLE001 - raised for its batch, in order
                batch.outcome = (False, e)
        return batch.outcome

    def next(self, want: int):
        began = time.perf_counter()
        rows, elements = [], 0
        while len(rows) < want:
            while len(self.queue) < self._workers() and self._take(want - len(rows)):
                pass
            if not self.queue:
                break
            head = self.queue[0]
            if rows and head.outcome is None and (head.future is None or not head.future.done()):
                break   # hand out what is done; the rest is computed meanwhile
            ok, value = self._outcome(head)
            if not ok:
                if rows:   # the batches before it go out first; it raises alone
                    break
                self.queue.popleft()
                raise value
            self.queue.popleft()
            rows.append(value)
            elements += head.rows
        if not rows:
            return None
        if self.tuner is not None:
            self.tuner.report(elements, time.perf_counter() - began)
            self.stats.chosen["parallelism"] = self.tuner.value
            self.stats.why["parallelism"] = self.tuner.why
        columns = [RowList(r[k] for r in rows) for k in range(len(self.leaves))]
        return Chunk(columns, len(rows))

    def save(self) -> dict:
        if self.queue:
            head = self.queue[0]
            return {"input": head.before, "skip": head.at, "rows": head.start}
        if self.chunk is not None and self.taken < self.chunk.n:
            return {"input": self.before, "skip": self.taken, "rows": self.next_start}
        return {"input": self.it.save(), "skip": self.skip, "rows": self.next_start}

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        self.queue.clear()
        self.it.close()


def fuse(outer: GpuMap, inner: GpuMap) -> GpuMap:
    """One GpuMap doing ``inner`` then ``outer``: each chain of outer continues the chain
    of the inner leaf it reads."""
    leaves = []
    for leaf in outer.leaves:
        base = inner.leaves[leaf.source]
        if leaf.steps is None:
            leaves.append(base)
        elif base.steps is None:
            leaves.append(Leaf(base.source, leaf.steps))
        elif leaf.steps[0].kind == "decode":
            raise ValueError(f"nd.gpu.{leaf.steps[0].name} must come first in a chain of GPU ops")
        else:
            leaves.append(Leaf(base.source, base.steps + leaf.steps))
    return GpuMap(inner.input, tuple(leaves), outer.out_spec, inner.names + outer.names,
                  _joined_calls(inner.num_parallel_calls, outer.num_parallel_calls),
                  name=outer.name or inner.name)


def _joined_calls(a, b):
    """The parallelism of two fused GPU maps: AUTOTUNE if either asks for it, else the
    larger (None: one batch at a time)."""
    given = [c for c in (a, b) if c is not None]
    if not given:
        return None
    return AUTOTUNE if AUTOTUNE in given else max(given)


def gpu_map(node: Node, fn: Callable, name: str | None, per_value: bool,
            num_parallel_calls: Any = None) -> GpuMap:
    """The GpuMap node of ``ds.map(fn)`` over a dataset whose batches are on the device
    (``num_parallel_calls``: checked by the caller)."""
    label = f"map[{name}]" if name else "map"
    device = tuple(getattr(node, "device_leaves", ()))
    if not device:
        raise ValueError(f"{label}: device='cuda' applies to batches on the GPU; call "
                         "prefetch_to_device() first")
    leaves, spec = trace(fn, node.spec, device, label, per_value)
    return GpuMap(node, leaves, spec, (function_name(fn),), num_parallel_calls, name=name)


__all__ = ["GpuMap", "Leaf", "fuse", "gpu_map"]
