"""Lowering TF1 queue pipelines onto the Dataset engine.

A queue runner's enqueue op written as in the "Reading data" guide — a reader's
``read`` of a filename queue, per-record decoding and preprocessing with NumPy and
nbdata functions, ``enqueue`` into a batching queue — is a per-record function of
the reader's records. Such an op is lowered: its graph becomes the element
function ``f(value)`` (or ``f(key, value)``) of a Dataset over the reader's records,

    ReaderRecords(reader, filename queue) -> map(f)

compiled once (the decoder becomes a record kernel, the rest a fused kernel), and
the runner thread moves whole chunks of rows from it into the batching queue with
one ``enqueue_many`` each. The reader still takes its work items from the live
filename queue (epochs, shuffling and closing as before) and its keys are TF1's.

Not lowered (the op then runs record by record, as ``explain`` says): ops that are
not pure functions of the record (``py_func``, a dequeue, a variable), a reader
read by several ops, ``enqueue_many`` (its values are batches already, e.g. after
``read_up_to``: then each run moves a whole batch anyway).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import numpy as np

from nbdata.chunks import Chunk, RowList, StringColumn
from nbdata.errors import OpError, OutOfRangeError, UnimplementedError
from nbdata.ops.node import UNKNOWN, Node, arg_field
from nbdata.ops.runtime import ChunkIter
from nbdata.spec import TensorSpec, string
from nbdata.trace.function import FunctionGraph
from nbdata.trace.graph import Operation, Tensor, upstream
from nbdata.train.queues import _objects
from nbdata.train.session import RunContext

_binding = threading.local()


def _subgraph(outputs: list, stop: set) -> tuple[list, list]:
    """The pure ops computing ``outputs`` from the tensors whose ids are in ``stop``
    (dependencies first) and the ops met that are not pure (which end the walk)."""
    return upstream(outputs, stop, halt=lambda op: op.kind != "pure")


class Lowered:
    """An enqueue op run as a compiled pipeline over a reader's records."""

    def __init__(self, op: Operation, read_op: Operation, order: list):
        # The enqueued values as a function of the record (and key) the reader read.
        self.op = op
        self.queue = op.queue
        self.read_op = read_op
        self.reader = read_op.reader
        self.filenames = read_op.queue
        key, value = read_op.outputs
        self.keep = bool(getattr(op, "keep", False))   # inputs[0]: enqueue or not
        self.targets = list(op.inputs)
        used = {id(t) for o in order for t in o.inputs} | {id(t) for t in self.targets}
        self.with_key = id(key) in used
        inputs = [key, value] if self.with_key else [value]
        graph = FunctionGraph(op.graph, inputs, tuple(t.spec for t in inputs), tuple(self.targets))
        self.element_fn = graph.python_function(f"graph_of_{op.name.replace('/', '_')}")
        self._pipeline = None
        self._lock = threading.Lock()

    def dataset(self, traced: bool = True):
        """The Dataset; the map's output spec is traced (so that decoders become record
        kernels), or with ``traced=False`` the specs the graph gives the enqueued tensors
        (for functions that sample records cannot trace, e.g. a reshape of a decoded
        record whose length only real records have)."""
        from nbdata.dataset import Dataset
        from nbdata.options import Options
        node = ReaderRecords(source=self, with_key=self.with_key)
        options = Options()
        options.fusion_min_rows = 0   # the records come in chunks: fuse from the first one
        signature = None if traced else tuple(t.spec for t in self.targets)
        return Dataset(node).map(self.element_fn, output_signature=signature).with_options(options)

    def pipeline(self):
        """The compiled pipeline (compiled on first use, once for every session)."""
        with self._lock:
            if self._pipeline is None:
                try:
                    self._pipeline = self.dataset().compile()
                except OpError:
                    self._pipeline = self.dataset(traced=False).compile()
            return self._pipeline

    def stepper(self, sess):
        """A callable moving one chunk into the queue in ``sess``; the threads running
        this op in one session share its records."""
        return sess.resource(self, lambda: SharedRecords(self, sess)).step

    def explain(self) -> str:
        return self.pipeline().explain()


class SharedRecords:
    """The lowered pipeline's chunks in one session, taken by the runner threads in
    turn (a lock around each take; the enqueue happens outside it)."""

    def __init__(self, lowered: Lowered, sess):
        self.lowered = lowered
        self.sess = sess
        self.lock = threading.Lock()
        self.it = None
        self.ended = False
        self.want = 64

    def step(self) -> None:
        lowered, sess = self.lowered, self.sess
        run = RunContext(sess, sess.config.operation_timeout_in_ms)
        with self.lock:
            if not self.ended:
                if self.it is None:
                    reads = RunContext(sess, 0)   # waits for work items are not op timeouts
                    _binding.current = (reads, lowered.reader._state(reads),
                                        lowered.filenames._state(reads))
                    try:
                        self.it = lowered.pipeline().open_chunks()
                    finally:
                        _binding.current = None
                chunk = self.it.next(self.want)
                self.want = min(self.want * 2, 4096)
                self.ended = chunk is None
            if self.ended:
                raise OutOfRangeError("the reader's input is exhausted", lowered.read_op.name)
        ragged = [isinstance(c, RowList) for c in chunk.columns]
        columns = [c.to_objects() if isinstance(c, StringColumn) else
                   _objects(c) if isinstance(c, RowList) else np.asarray(c)
                   for c in chunk.columns]
        n = chunk.n
        if lowered.keep:
            mask = columns[0].astype(bool)
            columns = [c[mask] for c in columns[1:]]
            ragged = ragged[1:]
            n = int(mask.sum())
            if not n:
                return
        queue = lowered.queue._state(run)
        for block, rows in _uniform_blocks(columns, ragged, n):
            queue.enqueue_many(run, block, rows)


def _uniform_blocks(columns: list, ragged: list, n: int):
    """The rows as blocks of columns in which every row has one shape: ragged columns
    (rows of different shapes, for a PaddingFIFOQueue) are cut into runs of rows of
    equal shapes and stacked."""
    if not any(ragged):
        yield columns, n
        return
    shapes = [tuple(np.shape(columns[k][j]) for k in range(len(columns)) if ragged[k])
              for j in range(n)]
    start = 0
    for j in range(1, n + 1):
        if j == n or shapes[j] != shapes[start]:
            yield [np.stack(list(c[start:j])) if r else c[start:j]
                   for c, r in zip(columns, ragged)], j - start
            start = j


@dataclasses.dataclass(frozen=True, eq=False)
class ReaderRecords(Node):
    """The records a reader reads from its filename queue, in chunks (keys too when
    ``with_key``): the source of a lowered queue pipeline."""

    source: Any = arg_field()
    with_key: bool = arg_field(default=False)
    op = "reader_records"

    @property
    def spec(self):
        record = TensorSpec((), string)
        return (record, record) if self.with_key else record

    def cardinality(self) -> int:
        return UNKNOWN

    def describe(self) -> str:
        r = self.source
        return f"{type(r.reader).__name__}[{r.reader.name}].read({r.filenames.kind} '{r.filenames.name}')"

    def open_chunks(self, ctx, state=None):
        if state is not None:
            raise UnimplementedError("records read from a TF1 queue have no saveable position")
        bound = getattr(_binding, "current", None)
        if bound is None:
            raise UnimplementedError("a lowered TF1 reader runs only inside a queue runner")
        return ReaderChunks(*bound, self.with_key)


class ReaderChunks(ChunkIter):
    """Chunks of one reader's records; the end of the input (the filename queue closed
    and drained) ends them."""

    def __init__(self, run: RunContext, reader, filenames, with_key: bool):
        self.run, self.reader, self.filenames, self.with_key = run, reader, filenames, with_key

    def next(self, want: int):
        try:
            keys, values = self.reader.read_chunk(self.run, self.filenames, max(1, want),
                                                  self.with_key, partial=True)
        except OutOfRangeError:
            return None
        columns = [StringColumn.from_values(keys), values] if self.with_key else [values]
        return Chunk(columns, len(values))

    def save(self) -> dict:
        # Upstream ops note their input's state before each pull; a queue-fed reader has
        # no position to give back (restoring one raises, see ReaderRecords.open_chunks).
        return {}


# ------------------------------------------------------------------ planning

def lower(op: Operation):
    """The :class:`Lowered` form of an enqueue op, or why it runs record by record."""
    if op.type != "QueueEnqueueV2":
        if op.type == "QueueEnqueueManyV2":
            return ("enqueue_many: each run enqueues a whole batch of values already "
                    "(read_up_to, or tensors holding many rows)")
        return f"{op.type} is not an enqueue"
    targets = list(op.inputs)
    order, impure = _subgraph(targets, set())
    if any(o.type == "SparseToQueue" for o in order):
        return "a sparse tensor is enqueued (it travels as one Python object per element)"
    reads = [o for o in impure if o.type == "ReaderReadV2"]
    others = [o for o in impure if o.type != "ReaderReadV2"]
    if others:
        o = others[0]
        return (f"{o.type} '{o.name}' is not a per-record function of a reader's records "
                f"(py_func, a dequeue, a variable or a placeholder): the graph runs op by op")
    if len(reads) != 1:
        return ("the enqueued values do not come from one reader's read()" if not reads else
                "the enqueued values combine several reads")
    read_op = reads[0]
    readers = [o for o in op.graph.get_operations() if getattr(o, "reader", None) is read_op.reader
               and o.type in ("ReaderReadV2", "ReaderReadUpToV2")]
    if len(readers) > 1:
        return f"reader '{read_op.reader.name}' is read by several ops"
    order, _ = _subgraph(targets, {id(t) for t in read_op.outputs})
    lowered = Lowered(op, read_op, order)
    try:
        lowered.pipeline()
    except Exception as e:  # noqa: BLE001 - the graph still runs, op by op
        return f"compiling it as a pipeline failed ({type(e).__name__}: {e})"
    return lowered


def explain(tensor) -> str:
    """How the queues behind ``tensor`` (what a batcher or a dequeue returned) are
    filled: for each queue runner, the compiled pipeline of a lowered enqueue op, or
    why it runs record by record.

    >>> import numpy as np, nbdata as nd
    >>> with nd.Graph().as_default():
    ...     x = nd.train.range_input_producer(4, shuffle=False).dequeue()
    ...     b = nd.train.batch([x * 2], 2)
    ...     print(nd.train.explain(b).splitlines()[0])
    queue 'batch/fifo_queue' (FIFOQueue, capacity 32) <- QueueRunner with 1 thread(s)
    """
    if isinstance(tensor, (list, tuple)):
        tensor = tensor[0]
    if isinstance(tensor, dict):
        tensor = next(iter(tensor.values()))
    if not isinstance(tensor, Tensor):
        raise TypeError(f"explain: expected a tensor, got {type(tensor).__name__}")
    lines: list[str] = []
    _explain_queue_of(tensor, lines, set(), 0)
    if not lines:
        lines.append(f"{tensor.name}: not fed by a queue")
    return "\n".join(lines)


def _explain_queue_of(tensor: Tensor, lines: list, seen: set, depth: int) -> None:
    order, impure = _subgraph([tensor], set())
    for op in impure:
        queue = getattr(op, "queue", None)
        if queue is None or id(queue) in seen:
            continue
        seen.add(id(queue))
        pad = "  " * depth
        head = f"{pad}queue '{queue.name}' ({queue.kind}, capacity {queue.capacity}) <- "
        if not queue.runners:
            lines.append(head + "no queue runner: filled by the program")
        for runner in queue.runners:
            lines.append(f"{head}QueueRunner with {len(runner.enqueue_ops)} thread(s)")
            for enqueue in dict.fromkeys(runner.enqueue_ops):
                lowered = runner.lowering(enqueue)
                if isinstance(lowered, str):
                    lines.append(f"{pad}  {enqueue.name}: per record, op by op: {lowered}")
                    for t in enqueue.inputs:
                        _explain_queue_of(t, lines, seen, depth + 2)
                else:
                    lines.append(f"{pad}  {enqueue.name}: lowered onto a compiled pipeline, chunks "
                                 "of records per enqueue_many:")
                    lines.extend(f"{pad}    {line}" for line in lowered.explain().splitlines())
                    _explain_queue_of(lowered.read_op.outputs[1], lines, seen, depth + 2)
                    lines.append(f"{pad}    reads work items from queue '{lowered.filenames.name}':")
                    _explain_filenames(lowered.filenames, lines, seen, depth + 3)


def _explain_filenames(queue, lines: list, seen: set, depth: int) -> None:
    if id(queue) in seen:
        return
    seen.add(id(queue))
    pad = "  " * depth
    for runner in queue.runners:
        lines.append(f"{pad}queue '{queue.name}' ({queue.kind}, capacity {queue.capacity}) "
                     f"<- QueueRunner with {len(runner.enqueue_ops)} thread(s) enqueueing "
                     "whole lists of work items")
    if not queue.runners:
        lines.append(f"{pad}queue '{queue.name}' ({queue.kind}) <- filled by the program")


__all__ = ["Lowered", "ReaderRecords", "explain", "lower"]
