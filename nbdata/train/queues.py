"""TF1 queues: ``FIFOQueue``, ``PaddingFIFOQueue``, ``RandomShuffleQueue``.

The graph side (the classes users make) records enqueue/dequeue/close/size ops;
each session holds a :class:`QueueState` per queue: bounded, blocking and
thread-safe, with TF1's rules — a closed queue refuses enqueues (CancelledError),
hands out what it holds and then raises OutOfRangeError; a RandomShuffleQueue
keeps ``min_after_dequeue`` elements until it is closed. Elements are stored as
columns (one array per component for a run of rows), so a queue runner that moves
chunks enqueues and a consumer dequeues whole blocks without touching rows one by
one in Python.
"""

from __future__ import annotations

import collections
import os
import threading
import weakref
from typing import Any

import numpy as np

from nbdata import random as nd_random
from nbdata.errors import CancelledError, FailedPreconditionError, InvalidArgumentError, OutOfRangeError
from nbdata.kernels.shuffle import drain_plan
from nbdata.spec import TensorSpec, as_dtype, dtype_name, string
from nbdata.trace.graph import Operation, Tensor, as_tensor, constant, get_default_graph
from nbdata.spec import TensorShape


def _shape_text(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


class QueueBase:
    """What the three queue kinds share: component dtypes, shapes and names, and the
    ops on them (``tf.QueueBase``)."""

    kind = "Queue"
    _pads = False      # a PaddingFIFOQueue: dims may be unknown, batches are padded

    def __init__(self, capacity: int, dtypes, shapes=None, names=None, shared_name=None,
                 name: str | None = None, default_name: str = "queue"):
        dtypes = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes]
        if not dtypes:
            raise ValueError("a queue needs at least one component dtype")
        self.dtypes = [as_dtype(d) for d in dtypes]
        if shapes is not None:
            shapes = list(shapes) if isinstance(shapes, (list, tuple)) and (
                not shapes or isinstance(shapes[0], (list, tuple, TensorShape)) or shapes[0] is None) \
                else [shapes]
            if len(shapes) != len(self.dtypes):
                raise ValueError(f"Queue shapes must have the same length as dtypes, received "
                                 f"len(shapes)={len(shapes)}, len(dtypes)={len(self.dtypes)}")
            self.shapes = [TensorShape(s) for s in shapes]
            if not self._pads and not all(s.is_fully_defined() for s in self.shapes):
                raise ValueError(f"All shapes must be fully defined: {self.shapes}")
        else:
            self.shapes = [TensorShape(None) for _ in self.dtypes]
        self._shaped = shapes is not None
        if names is not None:
            names = list(names) if isinstance(names, (list, tuple)) else [names]
            if len(names) != len(self.dtypes):
                raise ValueError("Queue names must have the same length as dtypes")
        self.names = names
        self.capacity = int(capacity)
        if self.capacity <= 0:
            raise ValueError(f"capacity must be positive, got {self.capacity}")
        self.graph = get_default_graph()
        self.name = self.graph._op_name(name or default_name)
        self._short = self.name.rsplit("/", 1)[-1]   # default op names (scoped anyway)
        self.shared_name = shared_name
        self.runners: list = []   # queue runners filling this queue (set by QueueRunner)

    # ------------------------------------------------------------ specs
    def _state(self, run) -> "QueueState":
        make = _shared_state if self.shared_name else QueueState
        return run.session.resource(self, lambda: make(self, run.session))

    def _values(self, vals: Any, many: bool) -> list:
        """The enqueued tensors in component order, converted and checked."""
        if self.names is not None:
            if not isinstance(vals, dict):
                raise ValueError("You must enqueue a dictionary in a Queue with names")
            if set(vals) != set(self.names):
                raise ValueError(f"Keys in dictionary to enqueue do not match names of Queue.  "
                                 f"Dictionary: {sorted(vals)},Queue: {sorted(self.names)}")
            vals = [vals[n] for n in self.names]
        elif isinstance(vals, dict):
            raise ValueError("Queue must have names to enqueue a dictionary")
        elif not isinstance(vals, (list, tuple)):
            vals = [vals]
        tensors = []
        # As in TF1, extra values are dropped (zip) and missing ones fail when run.
        for k, (v, dt) in enumerate(zip(vals, self.dtypes)):
            t = v if isinstance(v, Tensor) else (as_tensor(v) if not _is_value(v) else
                                                 constant(_python_value(v, dt), dtype=dt))
            if t.dtype != dt:
                raise TypeError(f"Expected {dtype_name(dt)}, but got {t.name} of dtype "
                                f"{dtype_name(t.dtype)} (component {k} of an enqueue to "
                                f"{self.kind} '{self.name}')")
            shape, got = self.shapes[k], t.shape
            if many and got.dims is not None:
                if not got.dims:
                    raise ValueError("Shape () must have rank at least 1")
                got = got[1:]
            if shape.dims is not None and not shape.is_compatible_with(got):
                raise ValueError(f"Shapes {got} and {shape} are incompatible")
            tensors.append(t)
        return tensors

    def _signature(self, values: list) -> None:
        if len(values) != len(self.dtypes):
            have = ", ".join(["resource"] + [dtype_name(self.dtypes[k]) for k in range(len(values))])
            want = ", ".join(["resource"] + [dtype_name(d) for d in self.dtypes])
            raise InvalidArgumentError(f"Signature mismatch, have: {have}-> expected: {want}->",
                                       self.name)

    def _outputs(self, tensors: list) -> Any:
        if self.names is not None:
            return dict(zip(self.names, tensors))
        return tensors[0] if len(tensors) == 1 else tensors

    # --------------------------------------------------------------- ops
    def _op(self, type_: str, name, suffix: str, inputs: list, fn, specs: list,
            tag: bool = True) -> Operation:
        """A stateful op of this queue, named ``<queue>_<suffix>`` by default; enqueue and
        dequeue ops are tagged with the queue (``op.queue``)."""
        op = Operation(self.graph, type_, name or f"{self._short}_{suffix}", inputs, fn, specs,
                       kind="stateful")
        if tag:
            op.queue = self
        return op

    def enqueue(self, vals: Any, name: str | None = None) -> Operation:
        """An op enqueueing one element (blocks while the queue is full)."""
        tensors = self._values(vals, many=False)

        def fn(run, values):
            self._signature(values)
            self._state(run).enqueue_many(run, [_one_row(v) for v in values], 1, many=False)
        return self._op("QueueEnqueueV2", name, "enqueue", tensors, fn, [])

    def enqueue_many(self, vals: Any, name: str | None = None) -> Operation:
        """An op enqueueing the rows of ``vals`` (dimension 0 of each component) as
        elements, as space frees."""
        tensors = self._values(vals, many=True)

        def fn(run, values):
            self._signature(values)
            columns = [_as_column(v) for v in values]
            n = len(columns[0])
            if any(len(c) != n for c in columns):
                raise InvalidArgumentError(
                    f"{self.kind} '{self.name}': enqueue_many components have different batch "
                    f"sizes {[len(c) for c in columns]}", self.name)
            self._state(run).enqueue_many(run, columns, n)
        return self._op("QueueEnqueueManyV2", name, "EnqueueMany", tensors, fn, [])

    def dequeue(self, name: str | None = None) -> Any:
        """Tensors of one dequeued element (a tensor for a one-component queue, a dict
        for a queue with names)."""
        specs = [TensorSpec(s.dims, dt) for s, dt in zip(self.shapes, self.dtypes)]

        def fn(run, values):
            return [c[0] for c in self._state(run).dequeue_many(run, 1, False, single=True)]
        return self._outputs(self._op("QueueDequeueV2", name, "Dequeue", [], fn, specs).outputs)

    def dequeue_many(self, n, name: str | None = None) -> Any:
        """Tensors of ``n`` elements, concatenated along a new dimension 0; raises
        OutOfRangeError when the queue is closed with fewer than ``n`` left."""
        return self._dequeue_n(n, False, name)

    def dequeue_up_to(self, n, name: str | None = None) -> Any:
        """Like :meth:`dequeue_many`, but a closed queue gives what it has left (at
        least one element)."""
        return self._dequeue_n(n, True, name)

    def _dequeue_n(self, n, up_to: bool, name) -> Any:
        if not isinstance(n, Tensor) and not _is_value(n):
            n = as_tensor(n)
        count = _static_count(n)
        first = None if up_to or count is None else count
        specs = [TensorSpec(None if s.dims is None else (first,) + tuple(s.dims), dt)
                 for s, dt in zip(self.shapes, self.dtypes)]
        inputs = [n] if isinstance(n, Tensor) else []

        def fn(run, values):
            if not self._shaped:
                raise InvalidArgumentError(f"{self.kind}'s DequeueMany and DequeueUpTo require the "
                                           "components to have specified shapes.", self.name)
            want = int(values[0]) if inputs else count
            if want < 0:
                raise InvalidArgumentError(f"{self.kind} '{self.name}': requested {want} elements")
            return self._state(run).dequeue_many(run, want, up_to)
        kind = "QueueDequeueUpToV2" if up_to else "QueueDequeueManyV2"
        return self._outputs(self._op(kind, name, kind[5:-2], inputs, fn, specs).outputs)

    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None) -> Operation:
        """An op closing the queue: later enqueues fail, dequeues drain what is left;
        with ``cancel_pending_enqueues`` blocked enqueues are cancelled."""
        def fn(run, values):
            self._state(run).close(run, cancel_pending_enqueues)
        return self._op("QueueCloseV2", name, "Close", [], fn, [], tag=False)

    def is_closed(self, name: str | None = None) -> Tensor:
        def fn(run, values):
            return [np.bool_(self._state(run).closed)]
        return self._op("QueueIsClosedV2", name, "IsClosed", [], fn, [TensorSpec((), np.bool_)],
                        tag=False).outputs[0]

    def size(self, name: str | None = None) -> Tensor:
        """An int32 tensor: the number of elements in the queue."""
        def fn(run, values):
            return [np.int32(self._state(run).size)]
        return self._op("QueueSizeV2", name, "Size", [], fn, [TensorSpec((), np.int32)],
                        tag=False).outputs[0]

    def __repr__(self) -> str:
        return f"<nd.{self.kind} {self.name!r} capacity={self.capacity}>"


class FIFOQueue(QueueBase):
    """A first-in first-out queue (``tf.FIFOQueue``).

    Args:
        capacity: the most elements it holds; enqueues block beyond it.
        dtypes: the dtype of each component.
        shapes: the shape of each component (required for dequeue_many).
        names: component names; enqueue then takes a dict and dequeue gives one.
        shared_name: when given, every session uses the same queue under this name.
        name: the queue's name (its ops' names start with it).

    >>> import numpy as np, nbdata as nd
    >>> with nd.Graph().as_default():
    ...     q = nd.FIFOQueue(10, [np.int64, nd.string], shapes=[[], []])
    ...     fill = q.enqueue_many([[1, 2, 3], [b"a", b"b", b"c"]])
    ...     pair = q.dequeue_many(2)
    ...     with nd.Session() as sess:
    ...         sess.run(fill)
    ...         n, s = sess.run(pair)
    >>> n.tolist(), s.tolist()
    ([1, 2], [b'a', b'b'])
    """

    kind = "FIFOQueue"

    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None,
                 name: str = "fifo_queue"):
        super().__init__(capacity, dtypes, shapes, names, shared_name, name, "fifo_queue")


class PaddingFIFOQueue(QueueBase):
    """A FIFO queue whose components may have unknown dims; ``dequeue_many`` pads each
    batch to its largest element, with 0 (numbers) or ``b""`` (strings)
    (``tf.PaddingFIFOQueue``). ``shapes`` is required.

    >>> import numpy as np, nbdata as nd
    >>> with nd.Graph().as_default():
    ...     q = nd.PaddingFIFOQueue(5, [np.int64], shapes=[[None]])
    ...     ops = [q.enqueue([[1]]), q.enqueue([[2, 3]])]
    ...     batch = q.dequeue_many(2)
    ...     with nd.Session() as sess:
    ...         for op in ops:
    ...             sess.run(op)
    ...         print(sess.run(batch).tolist())
    [[1, 0], [2, 3]]
    """

    kind = "PaddingFIFOQueue"
    _pads = True

    def __init__(self, capacity, dtypes, shapes, names=None, shared_name=None,
                 name: str = "padding_fifo_queue"):
        if shapes is None:
            raise ValueError("PaddingFIFOQueue requires shapes")
        super().__init__(capacity, dtypes, shapes, names, shared_name, name, "padding_fifo_queue")
        if any(s.dims is None for s in self.shapes):
            raise ValueError("PaddingFIFOQueue: shapes must have a known rank (dims may be None)")


class RandomShuffleQueue(QueueBase):
    """A queue that dequeues elements in a random order (``tf.RandomShuffleQueue``).

    Until it is closed, a dequeue leaves at least ``min_after_dequeue`` elements in
    the queue (it waits for more); after ``close()`` it drains everything. The order
    is drawn from a counter-based generator keyed on the seed and the number of
    elements dequeued so far: the same seed and the same enqueue order give the same
    output order.

    >>> import numpy as np, nbdata as nd
    >>> with nd.Graph().as_default():
    ...     q = nd.RandomShuffleQueue(10, 2, [np.int64], shapes=[[]], seed=3)
    ...     fill, close = q.enqueue_many([np.arange(6)]), q.close()
    ...     out = q.dequeue_up_to(10)
    ...     with nd.Session() as sess:
    ...         _ = sess.run([fill, close])
    ...         print(sorted(sess.run(out).tolist()))
    [0, 1, 2, 3, 4, 5]
    """

    kind = "RandomShuffleQueue"

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, names=None, seed=None,
                 shared_name=None, name: str = "random_shuffle_queue"):
        super().__init__(capacity, dtypes, shapes, names, shared_name, name, "random_shuffle_queue")
        self.min_after_dequeue = int(min_after_dequeue)
        if self.min_after_dequeue < 0:
            raise ValueError(f"min_after_dequeue must be >= 0, got {min_after_dequeue}")
        self.seed = nd_random.op_seed(seed)


# ----------------------------------------------------------------- values

def _is_value(v) -> bool:
    from nbdata.trace.placeholder import Placeholder
    return not isinstance(v, (Tensor, Placeholder))


def _python_value(value: Any, dtype) -> Any:
    """A Python or NumPy value enqueued as ``dtype``: TF1's conversion rules (a float
    does not become an integer, a number does not become a string, nor the reverse)."""
    if dtype is string:
        arr = np.asarray(value, dtype=object) if not isinstance(value, (bytes, str)) else None
        if arr is not None and arr.size and not all(isinstance(v, (bytes, str)) for v in arr.reshape(-1)):
            raise TypeError(f"Expected string, but got {value!r} of type '{type(value).__name__}'.")
        return value
    arr = np.asarray(value)
    kind = arr.dtype.kind
    if kind in "OSU" or (kind in "fc" and dtype.kind in "biu") or (kind == "c" and dtype.kind == "f"):
        raise TypeError(f"Expected {dtype_name(dtype)}, but got {value!r} of type "
                        f"'{type(value).__name__}'.")
    if kind in "iu" and dtype.kind in "iu" and arr.size and not np.array_equal(arr.astype(dtype), arr):
        raise ValueError(f"Can't convert Python value {value!r} to {dtype_name(dtype)}: out of range.")
    return value


def _static_count(n) -> int | None:
    if isinstance(n, Tensor):
        return _static_count(n.op.fn()) if n.op.type == "Const" else None
    n = int(n)
    if n < 0:
        raise ValueError(f"the number of elements to dequeue must be >= 0, got {n}")
    return n


def _objects(values: list) -> np.ndarray:
    """An object column of ``values``."""
    out = np.empty(len(values), object)
    out[:] = values
    return out


def _one_row(value: Any) -> np.ndarray:
    """A one-row column holding ``value``."""
    if isinstance(value, bytes):
        return _objects([value])
    arr = np.asarray(value)
    return arr.reshape((1,) + arr.shape)


def _as_column(value: Any) -> np.ndarray:
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if arr.ndim == 0:
        raise InvalidArgumentError("enqueue_many needs values with a batch dimension")
    return arr


# ------------------------------------------------------------------ runtime

# Shared queue states by shared_name, held by the sessions that use them (their
# resources): a name no open session uses any more is forgotten with its elements.
_shared: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_shared_lock = threading.Lock()


def _shared_state(qdef: QueueBase, session) -> "QueueState":
    """The queue state every session shares under ``qdef.shared_name`` (made by the first
    session that uses it); a queue of another kind, dtypes, shapes or capacity under the
    same name is an error, as in TF1."""
    with _shared_lock:
        state = _shared.get(qdef.shared_name)
        if state is None:
            state = _shared[qdef.shared_name] = QueueState(qdef, session)
            return state
    other = state.qdef
    same = (other.kind == qdef.kind and other.dtypes == qdef.dtypes
            and other.capacity == qdef.capacity
            and [x.dims for x in other.shapes] == [x.dims for x in qdef.shapes])
    if not same:
        raise InvalidArgumentError(
            f"Shared queue '{qdef.shared_name}' has a different kind, dtypes, shapes or capacity "
            f"({other.kind} of {[dtype_name(d) for d in other.dtypes]}, capacity {other.capacity}) "
            f"than {qdef.kind} '{qdef.name}' requests", qdef.name)
    return state


class QueueState:
    """A queue in one session: the elements and the locking around them. Messages name
    the queue as TF1 does, by its resource name ``_<n>_<op name>``."""

    def __init__(self, qdef: QueueBase, session):
        self.qdef = qdef
        self.session = session
        self.label = f"'_{session.next_resource_number()}_{qdef.name}'"
        floor = getattr(qdef, "min_after_dequeue", 0)
        if floor >= qdef.capacity:
            raise InvalidArgumentError(
                f"min_after_dequeue {floor} must be < capacity {qdef.capacity}", qdef.name)
        self.floor = floor
        self.cond = threading.Condition()
        self.size = 0
        self.closed = False
        self.cancelled = False       # close(cancel_pending_enqueues=True)
        self.pending = 0             # enqueues waiting for room
        self.enqueued = 0            # elements ever enqueued (for stall checks)
        self.store = (ShuffleStore(qdef) if isinstance(qdef, RandomShuffleQueue)
                      else BlockStore(qdef))
        # PaddingFIFOQueue's single-element ops speak as the FIFOQueue they are built on.
        self.plain_kind = "FIFOQueue" if qdef.kind == "PaddingFIFOQueue" else qdef.kind

    # ------------------------------------------------------------- checks
    def _check(self, columns: list, many: bool) -> None:
        q = self.qdef
        for k, (col, dt) in enumerate(zip(columns, q.dtypes)):
            if dt is string:
                if col.dtype != object:
                    raise InvalidArgumentError(f"{q.kind} {self.label}: component {k} holds "
                                               f"strings, got an array of {col.dtype}", q.name)
            elif col.dtype != dt:
                raise InvalidArgumentError(
                    f"{q.kind} {self.label}: type mismatch in component {k}: expected "
                    f"{dtype_name(dt)}, got {col.dtype}", q.name)
            shape = q.shapes[k].dims
            if shape is not None and not TensorShape(shape).is_compatible_with(col.shape[1:]):
                lead = (len(col),) if many else ()
                raise InvalidArgumentError(
                    f"Shape mismatch in tuple component {k}. Expected "
                    f"{_shape_text(lead + tuple(shape))}, got "
                    f"{_shape_text(col.shape if many else col.shape[1:])}", q.name)

    def _stalled(self, waited: float) -> None:
        """A dequeue that waits on a queue whose runners were never started fails after
        the session's ``queue_runner_start_timeout_in_ms``."""
        limit = self.session.config.queue_runner_start_timeout_in_ms
        runners = self.qdef.runners
        if (not limit or not runners or waited * 1000 < limit or self.enqueued
                or any(id(r) in self.session.started_runners for r in runners)):
            return
        raise FailedPreconditionError(
            f"{self.qdef.kind} {self.label} is empty and none of the queue runners that "
            f"fill it was started in this session (waited {waited:.1f} s): call "
            "nd.train.start_queue_runners(sess=sess, coord=coord) before running ops that "
            "dequeue from it", self.qdef.name)

    # ------------------------------------------------------------- enqueue
    def enqueue_many(self, run, columns: list, n: int, many: bool = True) -> None:
        q = self.qdef
        self._check(columns, many)
        pos = 0
        cap = q.capacity
        with self.cond:
            if self.closed:
                raise CancelledError(f"{self.plain_kind} {self.label} is closed.", q.name)
            while pos < n:
                if self.size >= cap:
                    self.pending += 1
                    try:
                        run.wait(self.cond, lambda: self.size < cap or self.cancelled,
                                 f"enqueue to {q.kind} {self.label}")
                    finally:
                        self.pending -= 1
                        self.cond.notify_all()
                    if self.cancelled:
                        raise CancelledError("Enqueue operation was cancelled", q.name)
                m = min(n - pos, cap - self.size)
                self.store.put([c[pos:pos + m] for c in columns] if pos or m < n else columns, m)
                self.size += m
                self.enqueued += m
                pos += m
                self.cond.notify_all()

    # ------------------------------------------------------------- dequeue
    def dequeue_many(self, run, n: int, up_to: bool, single: bool = False) -> list:
        """Dequeue ``n`` elements (columns of ``n`` rows). As in TF1, a dequeue that waits
        takes elements as they arrive (later dequeues do not overtake it); when the queue
        closes before it has ``n`` it puts them back and raises OutOfRangeError, or with
        ``up_to`` returns what it has."""
        q = self.qdef
        kind = self.plain_kind if single else q.kind
        parts: list = []
        got = 0
        with self.cond:
            while True:
                need = n - got
                if self.closed:
                    if self.size >= need:
                        take = need
                    elif up_to and got + self.size > 0:
                        take = self.size
                    else:
                        if parts:
                            self.store.put_front(self.store.join(parts), got)
                            self.size += got
                        raise OutOfRangeError(
                            f"{kind} {self.label} is closed and has insufficient elements "
                            f"(requested {need}, current size {self.size - got})", q.name)
                else:
                    take = min(need, self.size - self.floor)
                if take > 0 or (need == 0 and not parts):
                    parts.append(self.store.take(take))
                    self.size -= take
                    got += take
                    self.cond.notify_all()
                if got == n or (self.closed and up_to):
                    return parts[0] if len(parts) == 1 else self.store.join(parts)
                run.wait(self.cond, lambda: self.closed or self.size > self.floor,
                         f"dequeue from {q.kind} {self.label}", self._stalled)

    # --------------------------------------------------------------- close
    def close(self, run, cancel_pending_enqueues: bool) -> None:
        """Close: with ``cancel_pending_enqueues`` blocked enqueues fail at once, else the
        close waits behind them (as TF1's close op does)."""
        with self.cond:
            if self.closed:
                raise CancelledError(f"Queue {self.label} is already closed.", self.qdef.name)
            if cancel_pending_enqueues:
                self.cancelled = True
            else:
                self.cond.notify_all()
                run.wait(self.cond, lambda: self.pending == 0 or self.cancelled,
                         f"close of {self.qdef.kind} {self.label}")
            self.closed = True
            self.cond.notify_all()

    def cancel_all(self) -> None:
        """Wake every waiter (the session was closed: they raise CancelledError)."""
        with self.cond:
            self.cond.notify_all()


def _empty_columns(qdef: QueueBase) -> list:
    """Zero rows of each component (unknown dims 0)."""
    return [np.empty((0,) + tuple(d or 0 for d in (s.dims or ())), object if dt is string else dt)
            for s, dt in zip(qdef.shapes, qdef.dtypes)]


class BlockStore:
    """FIFO storage: a deque of blocks, each a list of columns with a start row. Taking
    rows that lie in one block slices it (no copy); otherwise the pieces are joined,
    padded to the largest element for a PaddingFIFOQueue."""

    def __init__(self, qdef: QueueBase):
        self.qdef = qdef
        self.blocks: collections.deque = collections.deque()

    def put(self, columns: list, m: int) -> None:
        self.blocks.append([columns, 0, m])

    def take(self, n: int) -> list:
        if n == 0:
            return _empty_columns(self.qdef)
        pieces = []
        need = n
        while need:
            columns, start, stop = block = self.blocks[0]
            m = min(need, stop - start)
            pieces.append([c[start:start + m] for c in columns])
            need -= m
            if start + m == stop:
                self.blocks.popleft()
            else:
                block[1] = start + m
        return pieces[0] if len(pieces) == 1 else self.join(pieces)

    def put_front(self, columns: list, m: int) -> None:
        """Put rows taken by an unfinished dequeue back at the head of the queue."""
        self.blocks.appendleft([columns, 0, m])

    def join(self, pieces: list) -> list:
        """One list of columns from several taken in turn."""
        return [self._join([p[k] for p in pieces], k) for k in range(len(self.qdef.dtypes))]

    def _join(self, parts: list, k: int) -> np.ndarray:
        shapes = {p.shape[1:] for p in parts}
        if len(shapes) == 1:
            return np.concatenate(parts)
        if not self.qdef._pads:
            raise InvalidArgumentError(
                f"{self.qdef.kind} '{self.qdef.name}': shape mismatch in component {k}: elements "
                f"of shapes {sorted(shapes)} cannot be batched", self.qdef.name)
        rank = len(parts[0].shape) - 1
        target = tuple(max(s[d] for s in shapes) for d in range(rank))
        total = sum(len(p) for p in parts)
        dtype = parts[0].dtype
        out = np.empty((total,) + target, dtype)
        out.fill(b"" if dtype == object else 0)
        row = 0
        for p in parts:
            out[(slice(row, row + len(p)),) + tuple(slice(0, d) for d in p.shape[1:])] = p
            row += len(p)
        return out


class ShuffleStore:
    """RandomShuffleQueue storage: columns of slots, the live slots in ``order``; a
    dequeue of ``n`` draws ``n`` times one of the rows left (swap-with-last), keyed on
    the seed and the count of draws so far, then gathers every column at once."""

    def __init__(self, qdef: RandomShuffleQueue):
        self.qdef = qdef
        seed = qdef.seed if qdef.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        self.key = nd_random.key(seed, 0x51A1E, 0)
        self.draws = 0
        self.columns: list | None = None
        self.order = np.empty(0, np.int64)
        self.free: list = []
        self.length = 0

    def _grow(self, rows: int, sample: list) -> None:
        old = 0 if self.columns is None else len(self.columns[0])
        new = min(self.qdef.capacity, max(rows, 2 * old, 1024))
        if new <= old:
            return
        cols = [np.empty((new,) + c.shape[1:], c.dtype) for c in sample]
        for col, kept in zip(cols, self.columns or []):
            col[:old] = kept
        self.columns = cols
        order = np.empty(new, np.int64)
        order[:self.length] = self.order[:self.length]
        self.order = order
        self.free.extend(range(new - 1, old - 1, -1))

    def put(self, columns: list, m: int) -> None:
        if self.columns is not None:
            for k, c in enumerate(columns):
                if c.shape[1:] != self.columns[k].shape[1:]:
                    raise InvalidArgumentError(
                        f"RandomShuffleQueue '{self.qdef.name}': shape mismatch in component "
                        f"{k}: {_shape_text(c.shape[1:])} vs {_shape_text(self.columns[k].shape[1:])}",
                        self.qdef.name)
        if self.columns is None or len(self.free) < m:
            self._grow(self.length + m, columns)
        slots = np.array(self.free[-m:][::-1], np.int64)
        del self.free[-m:]
        for col, c in zip(self.columns, columns):
            col[slots] = c
        self.order[self.length:self.length + m] = slots
        self.length += m

    def put_front(self, columns: list, m: int) -> None:
        self.put(columns, m)   # no order to keep

    def join(self, pieces: list) -> list:
        return [np.concatenate([p[k] for p in pieces]) for k in range(len(self.qdef.dtypes))]

    def take(self, n: int) -> list:
        if n == 0:
            return ([c[:0].copy() for c in self.columns] if self.columns is not None
                    else _empty_columns(self.qdef))
        src = drain_plan(self.key, np.uint64(self.draws), n, self.order, self.length)
        self.draws += n
        self.length -= n
        out = [col[src] for col in self.columns]
        self.free.extend(src.tolist())
        return out


__all__ = ["FIFOQueue", "PaddingFIFOQueue", "QueueBase", "QueueState", "RandomShuffleQueue"]
