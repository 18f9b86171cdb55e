"""Helpers shared by the nd.train tests (imported as ``from queue_helpers import ...``;
pytest puts this folder on ``sys.path``)."""

import contextlib
import re
from types import SimpleNamespace

import nbdata as nd


def session(g, timeout_ms=5000, **config):
    """A session whose blocking ops give up after ``timeout_ms`` (a safety net)."""
    return nd.Session(graph=g, config=nd.ConfigProto(operation_timeout_in_ms=timeout_ms, **config))


def core_message(e) -> str:
    """The kernel message of an error, comparable between nbdata and TF 2.21 (which wraps
    it in 'Graph execution error ... Node: ...'): resource numbers as '_N_'."""
    m = getattr(e, "message", str(e))
    if "Graph execution error" in m:
        lines = [line for line in m.split("\n") if line.strip()]
        i = next(j for j, line in enumerate(lines) if line.startswith("Node:"))
        m = "\n".join(line for line in lines[i + 1:] if not line.strip().startswith("[["))
    return re.sub(r"'_\d+_", "'_N_", m.split("\n\t [[")[0])


def without_counts(message: str) -> str:
    """``message`` without its "(requested n, current size m)": those counts depend on
    whether the last dequeue was already waiting when the queue closed (it then holds
    what it took), a race in TF1 as well."""
    return re.sub(r" \(requested \d+, current size \d+\)", "", message)


@contextlib.contextmanager
def started(sess, init_locals: bool = True):
    """Queue runners of ``sess`` started with a Coordinator; at the end the runners are
    stopped and joined (their error is kept in ``state.join_error``; it is raised
    unless ``state.expect_join_error``), and no thread may be left running."""
    if init_locals:
        with sess.graph.as_default():
            sess.run(nd.local_variables_initializer())
    coord = nd.train.Coordinator()
    threads = nd.train.start_queue_runners(sess, coord)
    state = SimpleNamespace(coord=coord, threads=threads, join_error=None,
                            expect_join_error=False)
    failed = False
    try:
        yield state
    except BaseException:
        failed = True
        raise
    finally:
        coord.request_stop()
        try:
            coord.join(threads, stop_grace_period_secs=5)
        except Exception as e:  # noqa: BLE001 - inspected by the tests
            state.join_error = e
        alive = [t.name for t in threads if t.is_alive()]
        if not failed:
            assert not alive, f"threads still running: {alive}"
            if state.join_error is not None and not state.expect_join_error:
                raise state.join_error
