"""``nd.Session``: runs a TF1 graph — fetches, feeds, per-session resources, closing.

A session owns the runtime side of the graph's stateful objects (queues, readers,
variables), made on first use, so two sessions over one graph have separate queues,
as in TF1. ``run`` evaluates the ops the fetches need once each, in dependency
order: one ``run`` dequeues once per dequeue op and returns values that belong
together. Blocking ops (a dequeue from an empty queue, an enqueue into a full one)
wait on the queue; ``close()`` cancels every wait (CancelledError) and never hangs.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

import numpy as np

from nbdata.chunks import RecordArray
from nbdata.errors import (CancelledError, DeadlineExceededError, InvalidArgumentError, OpError,
                           UnimplementedError)
from nbdata.spec import TensorShape, TensorSpec, cast_leaf, flatten, is_namedtuple, string, to_leaf
from nbdata.trace.abstract import canonical_output, conform
from nbdata.trace.graph import Graph, Operation, Tensor, get_default_graph, output_leaves, upstream


class ConfigProto:
    """Session options (the fields of ``tf.ConfigProto`` that matter here).

    Args:
        operation_timeout_in_ms: a blocking op (dequeue, enqueue, reader read) that waits
            longer raises DeadlineExceededError; 0 (the default) waits without limit.
        queue_runner_start_timeout_in_ms: a dequeue that waits this long on a queue whose
            queue runners were never started in this session raises
            FailedPreconditionError naming them (an nbdata extension: TF1 would hang);
            0 turns the check off.
        lower_queue_pipelines: run lowerable enqueue ops of queue runners as compiled
            pipelines moving chunks (see ``nbdata/train/lowering.py``); False runs every
            enqueue op record by record, op by op (the reference path).

    Other ``tf.ConfigProto`` fields (thread pool sizes, device counts) are accepted
    and have no effect: nbdata's threads are set by ``nd.Options``.
    """

    def __init__(self, operation_timeout_in_ms: int = 0,
                 queue_runner_start_timeout_in_ms: int = 10_000,
                 lower_queue_pipelines: bool = True, **ignored):
        self.operation_timeout_in_ms = int(operation_timeout_in_ms or 0)
        self.queue_runner_start_timeout_in_ms = int(queue_runner_start_timeout_in_ms or 0)
        self.lower_queue_pipelines = bool(lower_queue_pipelines)


class RunOptions:
    """Options of one ``Session.run`` (``tf.RunOptions``): ``timeout_in_ms`` bounds its
    blocking ops (DeadlineExceededError), overriding the session's timeout."""

    def __init__(self, timeout_in_ms: int = 0, **ignored):
        self.timeout_in_ms = int(timeout_in_ms or 0)


class RunContext:
    """One ``run`` (or one step of a queue runner thread): the session, the deadline of
    its blocking ops and the values computed so far."""

    __slots__ = ("session", "deadline", "needed", "feeds")

    def __init__(self, session: "Session", timeout_ms: int, needed: frozenset | None = None,
                 feeds: dict | None = None):
        self.session = session
        self.deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
        self.needed = needed   # ids of the tensors this run uses (None: all)
        self.feeds = feeds     # the run's fed values by tensor id (an iterator initializer
        #                        binds the placeholders of its dataset from them)

    def uses(self, tensor) -> bool:
        """Whether this run needs ``tensor``'s value (an op may skip computing it)."""
        return self.needed is None or id(tensor) in self.needed

    def wait(self, cond: threading.Condition, ready: Callable[[], bool], what: str,
             stalled: Callable[[float], None] | None = None) -> None:
        """Wait on ``cond`` (held by the caller) until ``ready()``. Raises CancelledError
        when the session closes, DeadlineExceededError past the deadline; ``stalled(s)``
        is called every half second with the seconds waited so far (it may raise)."""
        started = time.monotonic()
        while not ready():
            if self.session._closed:
                raise CancelledError(f"{what} was cancelled: the session was closed")
            timeout = 0.5
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise DeadlineExceededError(f"Timed out waiting for notification: {what}")
                timeout = min(timeout, left)
            if stalled is not None:
                stalled(time.monotonic() - started)
            cond.wait(timeout)


# ------------------------------------------------------------ default session

_local = threading.local()


def _session_stack() -> list:
    stack = getattr(_local, "sessions", None)
    if stack is None:
        stack = _local.sessions = []
    return stack


def get_default_session() -> "Session | None":
    """The session made default in this thread (``with sess:`` or
    ``sess.as_default()``), else None."""
    stack = _session_stack()
    return stack[-1] if stack else None


def session_for(session: "Session | None", graph: Graph) -> "Session":
    """The session that evaluates a tensor of ``graph`` (``Tensor.eval``,
    ``Operation.run``; the registry's ``session_finder``)."""
    session = session or get_default_session()
    if session is None:
        raise ValueError("Cannot evaluate tensor using `eval()`: No default session is "
                         "registered. Use `with sess.as_default()` or pass an explicit "
                         "session to `eval(session=sess)`")
    if session.graph is not graph:
        raise ValueError("Cannot use the given session to evaluate tensor: the tensor's graph "
                         "is different from the session's graph.")
    return session


# -------------------------------------------------------------------- session

class Session:
    """Runs the ops of a graph (``tf.Session``).

    Args:
        target: "" (this process); a remote target raises UnimplementedError.
        graph: the graph to run (default: the default graph).
        config: an :class:`ConfigProto`.

    >>> import numpy as np, nbdata as nd
    >>> g = nd.Graph()
    >>> with g.as_default():
    ...     q = nd.FIFOQueue(3, [np.int64], shapes=[[]])
    ...     init = q.enqueue_many([[1, 2, 3]])
    ...     x = q.dequeue()
    >>> with nd.Session(graph=g) as sess:
    ...     sess.run(init)
    ...     [int(sess.run(x)) for _ in range(3)]
    [1, 2, 3]
    """

    def __init__(self, target: str = "", graph: Graph | None = None, config: ConfigProto | None = None):
        if target not in ("", b"", None):
            raise UnimplementedError(f"nd.Session runs graphs in this process; target {target!r} "
                                     "(a remote TensorFlow server) is not supported")
        self.graph = graph if graph is not None else get_default_graph()
        self.config = config or ConfigProto()
        self._closed = False
        self._lock = threading.RLock()
        self._resources: dict[int, Any] = {}
        self._plans: dict[tuple, list] = {}
        self.variables: dict[int, Any] = {}
        self.started_runners: set[int] = set()
        self._resource_numbers = 0

    # ---------------------------------------------------------- resources
    def next_resource_number(self) -> int:
        """Numbers the session's resources in the order they are made (TF1 names a queue
        ``_<n>_<op name>`` in messages)."""
        with self._lock:
            n = self._resource_numbers
            self._resource_numbers += 1
            return n

    def resource(self, owner: Any, factory: Callable[[], Any]) -> Any:
        """The runtime object of a stateful graph object (a queue, a reader) in this
        session, made by ``factory()`` on first use."""
        key = id(owner)
        entry = self._resources.get(key)
        if entry is None:
            with self._lock:
                entry = self._resources.get(key)
                if entry is None:
                    if self._closed:    # a step that began before close (run() refuses later ones)
                        raise CancelledError(f"{owner!r} was cancelled: the session was closed")
                    entry = self._resources[key] = (owner, factory())
        return entry[1]

    # -------------------------------------------------------------- run
    def run(self, fetches: Any, feed_dict: Mapping | None = None, options: RunOptions | None = None,
            run_metadata: Any = None) -> Any:
        """Evaluate ``fetches`` — a tensor, an operation (giving None), a tensor name, or
        nested lists, tuples, namedtuples and dicts of them — and return values of the
        same structure. ``feed_dict`` maps tensors or ``nd.placeholder`` objects to
        values that replace them in this run; ``options`` (:class:`RunOptions`) bounds its
        blocking ops. ``run_metadata`` (TF1's step statistics) is accepted and left as
        it is: ``pipe.stats()`` and ``nd.train.explain`` report what nbdata measures."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        from nbdata.iterator import Initializer
        targets: list = []
        starts: list = []   # eager iterators' initializers (it.initializer outside a graph)

        def add(fetch):
            if isinstance(fetch, Initializer):
                starts.append(fetch)
                targets.append(None)
            else:
                targets.append(self._fetch(fetch))
        structure = _walk(fetches, add)
        if starts:   # run as TF1 runs an initializer: its placeholders fed from feed_dict
            from nbdata.trace.placeholder import Placeholder
            feeds = {k: v for k, v in (feed_dict or {}).items() if isinstance(k, Placeholder)}
            for start in starts:
                start.run(feeds or None)
        computed = iter(self._execute([t for t in targets if t is not None], feed_dict, options))
        values = iter([None if t is None else next(computed) for t in targets])
        return _walk(structure, lambda _: next(values))

    def make_callable(self, fetches: Any, feed_list: list | None = None) -> Callable:
        """A function running ``fetches``; its arguments feed ``feed_list`` in order."""
        feed_list = list(feed_list or [])

        def call(*args):
            if len(args) != len(feed_list):
                raise TypeError(f"expected {len(feed_list)} feed values, got {len(args)}")
            return self.run(fetches, dict(zip(feed_list, args)) if feed_list else None)
        return call

    def _element(self, x: Any, ops: bool) -> Tensor | Operation | None:
        """The tensor (with ``ops``, or operation) of this graph that ``x`` is or names: a
        tensor, a placeholder, a name; None for anything else."""
        from nbdata.trace.placeholder import Placeholder
        if isinstance(x, Tensor) or ops and isinstance(x, Operation):
            if x.graph is not self.graph:
                raise ValueError("Fetch is not an element of this session's graph.")
            return x
        if isinstance(x, Placeholder):
            return self.graph.placeholder_tensor(x)
        if isinstance(x, str):
            return (self.graph.get_operation_by_name(x) if ops and ":" not in x
                    else self.graph.get_tensor_by_name(x))
        return None

    def _fetch(self, fetch: Any) -> Tensor | Operation:
        target = self._element(fetch, ops=True)
        if target is not None:
            return target
        if fetch is None:
            raise TypeError("Fetch argument None has invalid type <class 'NoneType'>")
        raise TypeError(f"Fetch argument {fetch!r} has invalid type {type(fetch)}, must be a "
                        f"string or Tensor. (Can not convert a {type(fetch).__name__} into a "
                        "Tensor or Operation.)")

    def _feeds(self, feed_dict: Mapping | None) -> dict:
        feeds = {}
        for key, value in (feed_dict or {}).items():
            tensor = self._element(key, ops=False)
            if tensor is None:
                raise TypeError(f"Cannot interpret feed_dict key as Tensor: {key!r}")
            feeds[id(tensor)] = _fed_value(tensor, value)
        return feeds

    def _plan(self, targets: list, fed: frozenset) -> "RunPlan":
        """The ops to run for ``targets`` (dependencies first), fed tensors cut off."""
        key = (tuple(id(t) for t in targets), fed)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        order, _ = upstream(targets, fed, control=True)
        needed = {id(t) for op in order for t in op.inputs}
        needed.update(id(t) for t in targets if isinstance(t, Tensor))
        plan = self._plans[key] = RunPlan(order, frozenset(needed))
        return plan

    def execute(self, plan: "RunPlan", timeout_ms: int, feeds: dict | None = None) -> dict:
        """Run the ops of ``plan`` once; returns the values by tensor id."""
        run = RunContext(self, timeout_ms, plan.needed, feeds)
        values = dict(feeds) if feeds else {}
        for op in plan.order:
            values.update(zip(map(id, op.outputs), evaluate(op, run, [values[id(t)] for t in op.inputs])))
        return values

    def _execute(self, targets: list, feed_dict: Mapping | None, options: RunOptions | None) -> list:
        feeds = self._feeds(feed_dict)
        timeout = options.timeout_in_ms if options is not None and options.timeout_in_ms else \
            self.config.operation_timeout_in_ms
        values = self.execute(self._plan(targets, frozenset(feeds)), timeout, feeds)
        return [_fetched(values[id(t)]) if isinstance(t, Tensor) else None for t in targets]

    # ---------------------------------------------------------- lifetime
    def close(self) -> None:
        """Close the session: every blocked op of it (in any thread) raises
        CancelledError, and later ``run`` calls raise RuntimeError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            resources = [res for _, res in self._resources.values()]
            self._resources = {}   # shared queues no open session uses are forgotten
        for res in resources:
            cancel = getattr(res, "cancel_all", None)
            if cancel is not None:
                cancel()

    @property
    def closed(self) -> bool:
        return self._closed

    @contextlib.contextmanager
    def as_default(self):
        """Make this the default session (for ``Tensor.eval``, ``Operation.run``,
        ``start_queue_runners``) within a ``with`` block; it is not closed at the end."""
        stack = _session_stack()
        stack.append(self)
        try:
            with self.graph.as_default():
                yield self
        finally:
            stack.remove(self)

    def __enter__(self) -> "Session":
        self._context = self.as_default()
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._context.__exit__(*exc)
        finally:
            self.close()

    def __del__(self):
        with contextlib.suppress(Exception):   # best effort at interpreter exit
            self.close()


class InteractiveSession(Session):
    """A session that makes itself the default session when made
    (``tf.InteractiveSession``)."""

    def __init__(self, target: str = "", graph: Graph | None = None, config: ConfigProto | None = None):
        super().__init__(target, graph, config)
        _session_stack().append(self)

    def close(self) -> None:
        super().close()
        stack = _session_stack()
        if self in stack:
            stack.remove(self)


class RunPlan(NamedTuple):
    """The ops one kind of ``run`` executes, in order, and the tensors it uses."""

    order: list
    needed: frozenset


def _walk(structure: Any, leaf: Callable[[Any], Any]) -> Any:
    """``structure`` (nested lists, tuples, namedtuples and mappings, a mapping that is
    not a dict becoming one) with each leaf ``x`` replaced by ``leaf(x)``, in order."""
    if isinstance(structure, Mapping):
        items = ((k, _walk(v, leaf)) for k, v in structure.items())
        return type(structure)(items) if isinstance(structure, dict) else dict(items)
    if is_namedtuple(structure):
        return type(structure)(*[_walk(v, leaf) for v in structure])
    if isinstance(structure, (list, tuple)):
        return type(structure)(_walk(v, leaf) for v in structure)
    return leaf(structure)


def _fetched(value: Any) -> Any:
    """A value as ``run`` returns it: plain NumPy (records read by a reader carry their
    column inside a run, see ``nbdata.chunks.RecordArray``)."""
    return value.view(np.ndarray) if isinstance(value, RecordArray) else value


def _fed_value(tensor: Tensor, value: Any) -> Any:
    """A fed value converted to the tensor's dtype and checked against its shape."""
    spec = tensor.spec
    if spec.dtype is string:
        leaf = to_leaf(value, f"feed for {tensor.name}")
    else:
        arr = np.array(value)   # a copy: the user may change their array after feeding it
        if arr.dtype != spec.dtype:
            if not np.can_cast(arr.dtype, spec.dtype, "same_kind") and arr.size:
                raise InvalidArgumentError(
                    f"Cannot feed value of dtype {arr.dtype} for Tensor {tensor.name!r}, which "
                    f"has dtype {spec.dtype}")
            arr = arr.astype(spec.dtype)
        leaf = arr[()] if arr.ndim == 0 else arr
    if spec.shape is not None:
        shape = np.shape(leaf)
        if not TensorShape(spec.shape).is_compatible_with(shape):
            raise ValueError(f"Cannot feed value of shape {shape} for Tensor {tensor.name!r}, "
                             f"which has shape {TensorShape(spec.shape)}")
    return cast_leaf(leaf, spec, f"feed for {tensor.name}") if spec.dtype is not string else leaf


def _fits(value: Any, spec) -> bool:
    """Whether ``value`` is already what a tensor of ``spec`` holds (no conversion)."""
    if not isinstance(spec, TensorSpec):
        return False
    if spec.dtype is string:
        if spec.shape == ():
            return isinstance(value, bytes)
        if not (isinstance(value, np.ndarray) and value.dtype == object):
            return False
    elif not (isinstance(value, (np.ndarray, np.generic)) and value.dtype == spec.dtype):
        return False
    want, got = spec.shape, value.shape
    return want is None or len(want) == len(got) and all(
        d is None or d == g for d, g in zip(want, got))


def _run_recorded(op: Operation, inputs: list) -> list:
    """A recorded op's outputs, checked against the specs it was recorded with (values
    that already fit pass as they are; others are converted or refused)."""
    checked = op.checked
    try:
        out = op.fn(*inputs)
    except OpError:
        raise
    except Exception as e:  # noqa: BLE001 - the op's own failure, as TF1 reports it
        raise InvalidArgumentError(f"{checked.op}: function {checked.name} raised "
                                   f"{type(e).__name__}: {e}", op.name) from e
    leaves = output_leaves(out)
    if len(leaves) == len(op.outputs) and all(_fits(v, t.spec) for v, t in zip(leaves, op.outputs)):
        return leaves
    return flatten(conform(canonical_output(out, checked.op, checked.name), checked.output_spec,
                           checked.op, checked.name))


def evaluate(op: Operation, run: RunContext, inputs: list) -> list:
    """The output values of ``op`` in ``run`` given its input values."""
    if op.kind == "pure":
        if op.checked is None:   # a constant, or an op made with its output specs given
            out = op.fn(*inputs)
            return [out] if len(op.outputs) == 1 else list(out)
        return _run_recorded(op, inputs)
    if op.kind == "placeholder":
        t = op.outputs[0]
        raise InvalidArgumentError(
            f"You must feed a value for placeholder tensor '{op.name}' with dtype "
            f"{getattr(t.dtype, 'name', t.dtype)} and shape {t.shape}", op.name)
    if op.fn is None:   # a group of control inputs
        return []
    out = op.fn(run, inputs)
    return [] if out is None else out


__all__ = ["ConfigProto", "InteractiveSession", "RunContext", "RunOptions", "Session",
           "evaluate", "get_default_session", "session_for"]
