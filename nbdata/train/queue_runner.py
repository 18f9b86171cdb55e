"""``nd.train.QueueRunner``: threads that keep a queue filled, and
``start_queue_runners`` / ``add_queue_runner``.

Each thread repeats its enqueue op until the input ends (OutOfRangeError or
CancelledError: then the last thread closes the queue) or the Coordinator asks it
to stop; any other exception goes to the Coordinator (``join`` re-raises it). An
enqueue op whose inputs are a per-record function of a reader's records is
*lowered* (``nbdata/train/lowering.py``): the thread then moves whole chunks of
records through a compiled Dataset pipeline instead of running the graph once per
record.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from nbdata.errors import CancelledError, OutOfRangeError
from nbdata.train.graph import GraphKeys
from nbdata.trace.graph import Operation, get_default_graph
from nbdata.train.session import Session, get_default_session


class QueueRunner:
    """Holds the enqueue ops of a queue and runs each in its own thread
    (``tf.train.QueueRunner``).

    Args:
        queue: the queue the ops fill.
        enqueue_ops: the enqueue ops (the same op may appear several times: that many
            threads run it).
        close_op: run when the input ends (default ``queue.close()``).
        cancel_op: run when the coordinator stops (default
            ``queue.close(cancel_pending_enqueues=True)``).
        queue_closed_exception_types: exceptions meaning "the input ended"
            (default OutOfRangeError and CancelledError).
    """

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None, queue_runner_def=None, import_scope=None):
        if queue_runner_def is not None:
            raise ValueError("queue_runner_def (protocol buffers) is not supported")
        if queue is None or not enqueue_ops:
            raise ValueError("QueueRunner needs a queue and at least one enqueue op")
        self.queue = queue
        self.enqueue_ops = list(enqueue_ops)
        self.close_op = close_op if close_op is not None else queue.close()
        self.cancel_op = cancel_op if cancel_op is not None else queue.close(
            cancel_pending_enqueues=True)
        self.queue_closed_exception_types = tuple(queue_closed_exception_types or
                                                  (OutOfRangeError, CancelledError))
        self._lock = threading.Lock()
        self._runs_per_session: dict[int, int] = {}
        self._exceptions_raised: list = []
        self._lowered: dict[int, Any] = {}
        queue.runners.append(self)

    @property
    def name(self) -> str:
        return self.queue.name

    @property
    def exceptions_raised(self) -> list:
        """Exceptions raised by threads started without a coordinator."""
        return self._exceptions_raised

    def lowering(self, op: Operation):
        """The lowered form of ``op`` (a :class:`nbdata.train.lowering.Lowered`), or the
        reason it runs record by record (a string)."""
        key = id(op)
        if key not in self._lowered:
            from nbdata.train.lowering import lower
            self._lowered[key] = lower(op)
        return self._lowered[key]

    def _run(self, sess: Session, op: Operation, coord) -> None:
        decremented = False
        try:
            step = self._stepper(sess, op)
            while coord is None or not coord.should_stop():
                try:
                    step()
                except self.queue_closed_exception_types:
                    with self._lock:
                        self._runs_per_session[id(sess)] -= 1
                        decremented = True
                        last = self._runs_per_session[id(sess)] == 0
                    if last:
                        with contextlib.suppress(Exception):   # the session may be closed
                            sess.run(self.close_op)
                    return
        except Exception as e:  # noqa: BLE001 - reported to the coordinator
            if coord is not None:
                coord.request_stop(e)
            else:
                with self._lock:
                    self._exceptions_raised.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[id(sess)] -= 1

    def _stepper(self, sess: Session, op: Operation):
        lowered = self.lowering(op) if sess.config.lower_queue_pipelines else None
        if lowered is not None and not isinstance(lowered, str):
            return lowered.stepper(sess)
        plan = sess._plan([op], frozenset())
        return lambda: sess.execute(plan, sess.config.operation_timeout_in_ms)

    def _close_on_stop(self, sess: Session, coord) -> None:
        coord.wait_for_stop()
        with contextlib.suppress(Exception):   # the session may be closed already
            sess.run(self.cancel_op)

    def create_threads(self, sess: Session, coord=None, daemon: bool = False,
                       start: bool = False) -> list:
        """Threads running the enqueue ops in ``sess`` (and, with a coordinator, one that
        cancels pending enqueues when it stops). Returns [] when this runner already
        has threads running in ``sess``."""
        with self._lock:
            if self._runs_per_session.get(id(sess), 0) > 0:
                return []
            self._runs_per_session[id(sess)] = len(self.enqueue_ops)
            self._exceptions_raised = []
        sess.started_runners.add(id(self))
        jobs = [(self._run, (sess, op, coord), op.name) for op in self.enqueue_ops]
        if coord is not None:
            jobs.append((self._close_on_stop, (sess, coord), "close_on_stop"))
        threads = [threading.Thread(target=fn, args=args, daemon=daemon,
                                    name=f"QueueRunnerThread-{self.name}-{what}")
                   for fn, args, what in jobs]
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads


def add_queue_runner(qr: QueueRunner, collection: str = GraphKeys.QUEUE_RUNNERS) -> None:
    """Add ``qr`` to a collection of the default graph (``tf.train.add_queue_runner``)."""
    get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess: Session | None = None, coord=None, daemon: bool = True,
                        start: bool = True, collection: str = GraphKeys.QUEUE_RUNNERS) -> list:
    """Start the threads of every queue runner in ``collection`` of the session's graph
    (``tf.train.start_queue_runners``); returns them all."""
    sess = sess if sess is not None else get_default_session()
    if sess is None:
        raise ValueError("Cannot start queue runners: No default session is registered. Use "
                         "`with sess.as_default()` or pass an explicit session to "
                         "tf.compat.v1.start_queue_runners(sess=sess)")
    if not isinstance(sess, Session):
        raise TypeError(f"sess must be a `nd.Session` object. Given class: {type(sess)}")
    return [t for qr in sess.graph.get_collection(collection)
            for t in qr.create_threads(sess, coord=coord, daemon=daemon, start=start)]


__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]
