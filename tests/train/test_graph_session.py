"""TF1 graphs and sessions: ops recorded by NumPy calls on tensors, ``Session.run``'s fetch
and feed structures, default sessions, py_func and run timeouts.

Expected behaviour is TF1's (``tf.compat.v1`` in graph mode) except for dtypes, which
follow NumPy (a Python int is int64, a float float64) as nbdata documents.
"""

import collections
import threading
import time

import numpy as np
import pytest

import nbdata as nd
from queue_helpers import session

Pair = collections.namedtuple("Pair", ["first", "second"])


def filled_queue(values, dtype=np.int64):
    q = nd.FIFOQueue(len(values) + 1, dtype, shapes=[[]])
    return q, q.enqueue_many([np.asarray(values, dtype)])


# ------------------------------------------------------------ recording ops

def test_numpy_calls_record_ops_with_dtypes_and_shapes(graph):
    x = nd.placeholder(np.float32, shape=[None, 3])
    a = nd.constant(1)
    b = nd.constant(2.5)
    v = nd.constant([1, 2, 3])
    assert (a.dtype, a.shape) == (np.int64, nd.TensorShape([]))
    assert (b.dtype, b.shape) == (np.float64, nd.TensorShape([]))
    before = len(graph.get_operations())
    doubled = x * 2
    summed = np.sum(doubled, axis=1)
    cast = x.astype(np.int32)
    stacked = np.stack([v, v * a])
    row = x[0]
    sq = np.sqrt(b)
    cmp = v > 1
    assert len(graph.get_operations()) > before
    assert isinstance(doubled, nd.Tensor) and doubled.graph is graph
    assert (doubled.dtype, doubled.shape) == (np.float32, nd.TensorShape([None, 3]))
    assert (summed.dtype, summed.shape) == (np.float32, nd.TensorShape([None]))
    assert (cast.dtype, cast.shape) == (np.int32, nd.TensorShape([None, 3]))
    assert (stacked.dtype, stacked.shape) == (np.int64, nd.TensorShape([2, 3]))
    assert (row.dtype, row.shape) == (np.float32, nd.TensorShape([3]))
    assert (sq.dtype, cmp.dtype, cmp.shape) == (np.float64, np.bool_, nd.TensorShape([3]))
    feed = np.arange(6, dtype=np.float32).reshape(2, 3) + 0.5
    with session(graph) as sess:
        got = sess.run([doubled, summed, cast, stacked, row, sq, cmp], feed_dict={x: feed})
    np.testing.assert_array_equal(got[0], feed * 2)
    assert got[0].dtype == np.float32
    np.testing.assert_array_equal(got[1], (feed * 2).sum(axis=1))
    assert got[2].tolist() == [[0, 1, 2], [3, 4, 5]] and got[2].dtype == np.int32
    assert got[3].tolist() == [[1, 2, 3], [1, 2, 3]]
    assert got[4].tolist() == [0.5, 1.5, 2.5]
    assert got[5] == pytest.approx(np.sqrt(2.5))
    assert got[6].tolist() == [False, True, True]


def test_stack_shape_mismatch_raises_when_building(graph):
    a = nd.constant(np.array([1, 2], np.int32))
    b = nd.constant(np.array([1, 2, 3], np.int32))
    n = len(graph.get_operations())
    with pytest.raises(ValueError):
        np.stack([a, b])
    with pytest.raises(ValueError):
        a + b
    assert len(graph.get_operations()) == n


def test_placeholder_shape_mismatch_raises_when_building(graph):
    x = nd.placeholder(np.float32, shape=[None, 3])
    y = nd.placeholder(np.float32, shape=[None, 4])
    with pytest.raises(ValueError):
        x + y
    assert (x + nd.placeholder(np.float32, shape=[3])).shape == nd.TensorShape([None, 3])


def test_decode_csv_on_tensors_returns_a_list(graph):
    """tf.io.decode_csv returns a list of tensors (as nbdata's eager decode_csv does)."""
    cols = nd.io.decode_csv(nd.placeholder(nd.string, shape=[]), [[1], [0.0]])
    assert isinstance(cols, list)


def test_decode_csv_on_tensors(graph):
    rec = nd.placeholder(nd.string, shape=[])
    cols = nd.io.decode_csv(rec, [[1], [0.0], [""]])
    assert len(cols) == 3
    assert [c.dtype for c in cols[:2]] == [np.int64, np.float64] and cols[2].dtype is nd.string
    with session(graph) as sess:
        assert list(sess.run(cols, feed_dict={rec: b"7,2.5,x"})) == [7, 2.5, b"x"]
        with pytest.raises(nd.errors.InvalidArgumentError):
            sess.run(cols, feed_dict={rec: b"7,2.5"})


def test_decode_csv_bad_defaults_raise_when_building(graph):
    rec = nd.placeholder(nd.string, shape=[])
    with pytest.raises(TypeError):
        nd.io.decode_csv(rec, 5)                  # not a list
    with pytest.raises(ValueError):
        nd.io.decode_csv(rec, [[1, 2]])           # a default of more than one value
    with pytest.raises(TypeError):
        nd.io.decode_csv(rec, [[True]])           # bool is not a CSV column type
    with pytest.raises(TypeError):
        nd.io.decode_csv(rec, [object()])


# ------------------------------------------------------------ fetches

def test_fetch_structures(graph):
    c = nd.constant(np.array([1, 2], np.int32))
    s = nd.constant(b"x")
    op = c.op
    with session(graph) as sess:
        v = sess.run(c)
        assert isinstance(v, np.ndarray) and v.dtype == np.int32 and v.tolist() == [1, 2]
        assert sess.run(s) == b"x" and type(sess.run(s)) is bytes
        assert sess.run(op) is None
        lst = sess.run([c, op])
        assert type(lst) is list and lst[0].tolist() == [1, 2] and lst[1] is None
        tup = sess.run((c, s))
        assert type(tup) is tuple and tup[1] == b"x"
        d = sess.run({"a": c, "b": [s, (c,)], "op": op})
        assert type(d) is dict and sorted(d) == ["a", "b", "op"]
        assert d["a"].tolist() == [1, 2] and d["op"] is None
        assert type(d["b"]) is list and d["b"][0] == b"x" and type(d["b"][1]) is tuple
        nt = sess.run(Pair(c, {"k": s}))
        assert type(nt) is Pair and nt.first.tolist() == [1, 2] and nt.second == {"k": b"x"}
        assert sess.run([]) == []
        assert sess.run(c.name).tolist() == [1, 2]
    with session(graph) as sess, pytest.raises(TypeError):
        sess.run(None)


def test_fetch_of_another_graph_is_refused(graph):
    other = nd.Graph()
    with other.as_default():
        foreign = nd.constant(1)
    with session(graph) as sess:
        with pytest.raises(ValueError):
            sess.run(foreign)


def test_feed_dict_with_placeholders_and_tensors(graph):
    x = nd.placeholder(np.float32, shape=[None])
    c = nd.constant(np.array([1, 2], np.int64))
    y = x * 2
    z = c + 1
    with session(graph) as sess:
        assert sess.run(y, feed_dict={x: [1, 2, 3]}).tolist() == [2, 4, 6]
        assert sess.run(y, feed_dict={x: np.array([0.5], np.float64)}).dtype == np.float32
        assert sess.run(z).tolist() == [2, 3]
        assert sess.run(z, feed_dict={c: [10, 20]}).tolist() == [11, 21]   # a fed tensor
        assert sess.run(y, feed_dict={y: [7.0]}).tolist() == [7.0]          # no need to feed x
        assert sess.run(x, feed_dict={x: [4]}).tolist() == [4.0]
        with pytest.raises(ValueError, match="Cannot feed value of shape"):
            sess.run(y, feed_dict={x: np.ones((2, 2))})


def test_unfed_placeholder(graph):
    x = nd.placeholder(np.float32, shape=[None, 3], name="features")
    y = x + 1
    with session(graph) as sess:
        with pytest.raises(nd.errors.InvalidArgumentError,
                           match="You must feed a value for placeholder tensor 'features'"):
            sess.run(y)


def test_one_run_dequeues_once_per_dequeue_op(graph):
    q, fill = filled_queue([1, 2, 3, 4, 5])
    x = q.dequeue()
    y = q.dequeue()
    size = q.size()
    with session(graph) as sess:
        sess.run(fill)
        a, b = sess.run([x, x + 1])
        assert (a, b) == (1, 2)
        assert sess.run({"p": x * 10, "q": [x, x - 1]}) == {"p": 20, "q": [2, 1]}
        assert sess.run(size) == 3
        a, b = sess.run([x, y])       # two dequeue ops: two elements
        assert sorted([int(a), int(b)]) == [3, 4]
        assert sess.run(size) == 1


# ------------------------------------------------------------ default sessions

def test_eval_and_run_with_default_session(graph):
    q, fill = filled_queue([4, 5])
    x = q.dequeue()
    c = nd.constant(3) * 2
    with pytest.raises(ValueError):
        c.eval()
    with session(graph) as sess:
        assert nd.get_default_session() is sess
        fill.run()
        assert c.eval() == 6
        assert x.eval() == 4
        assert sess.run(q.size()) == 1
    assert nd.get_default_session() is None
    other = session(graph)
    with other.as_default():
        assert c.eval() == 6
    assert not other.closed             # as_default() does not close it
    assert c.eval(session=other) == 6
    fill.run(session=other)
    assert other.run(q.size()) == 2
    other.close()


def test_closed_session(graph):
    c = nd.constant(1)
    with session(graph) as sess:
        assert sess.run(c) == 1
    assert sess.closed
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(c)
    sess.close()     # closing again is harmless


def test_step_in_flight_at_close_is_cancelled(graph):
    """A step that began before close() and reaches a queue the session never used
    (a queue runner's, say) is cancelled like every blocked op; runs started after
    close raise RuntimeError (above)."""
    q = nd.FIFOQueue(4, [np.int64])
    with session(graph) as sess:
        pass
    with pytest.raises(nd.errors.CancelledError, match="session was closed"):
        sess.resource(q, lambda: pytest.fail("a closed session makes no resources"))


def test_graph_as_default():
    outer = nd.get_default_graph()
    g = nd.Graph()
    with g.as_default():
        assert nd.get_default_graph() is g
        c = nd.constant(1)
        q = nd.FIFOQueue(2, np.int64, shapes=[[]])
        d = q.dequeue()
        inner = nd.Graph()
        with inner.as_default():
            assert nd.get_default_graph() is inner
        assert nd.get_default_graph() is g
        sess = nd.Session()
        assert sess.graph is g
    assert nd.get_default_graph() is outer
    assert c.graph is g and d.graph is g
    assert c.op in g.get_operations() and c.op not in outer.get_operations()
    assert sess.run(c) == 1
    sess.close()


def test_default_graph_is_per_thread():
    g = nd.Graph()
    seen = []
    with g.as_default():
        t = threading.Thread(target=lambda: seen.append(nd.get_default_graph()))
        t.start()
        t.join(5)
    assert not t.is_alive()
    assert seen and seen[0] is not g


# ------------------------------------------------------------ py_func

def test_py_func_values(graph):
    x = nd.placeholder(np.int64, shape=[None])
    calls = []

    def f(v):
        calls.append(v.copy())
        return v * 3

    y = nd.py_func(f, [x], np.int64)
    assert isinstance(y, nd.Tensor) and y.dtype == np.int64 and y.shape == nd.TensorShape(None)
    pair = nd.train.py_func(lambda v: (v.sum(), np.float32(0.5)), [x], [np.int64, np.float32])
    assert isinstance(pair, list) and [t.dtype for t in pair] == [np.int64, np.float32]
    s = nd.py_func(lambda v: b"n=%d" % len(v), [x], nd.string)
    with session(graph) as sess:
        got = sess.run([y, y + 1], feed_dict={x: [1, 2]})
        assert got[0].tolist() == [3, 6] and got[1].tolist() == [4, 7]
        assert len(calls) == 1                      # run once per run
        total, half = sess.run(pair, feed_dict={x: [1, 2, 4]})
        assert total == 7 and half == np.float32(0.5) and half.dtype == np.float32
        assert sess.run(s, feed_dict={x: [1, 2, 4]}) == b"n=3"


def _raise(exc):
    def f(v):
        raise exc
    return f


PY_ERRORS = [
    (ValueError("boom at 3"), "InvalidArgumentError"),
    (TypeError("bad type"), "InvalidArgumentError"),
    (StopIteration(), "OutOfRangeError"),
    (NotImplementedError("nope"), "UnimplementedError"),
    (MemoryError("oom"), "ResourceExhaustedError"),
    (KeyError("m"), "UnknownError"),
    (RuntimeError("rt"), "UnknownError"),
    (ZeroDivisionError("zd"), "UnknownError"),
    (IndexError("ix"), "UnknownError"),
    (nd.errors.OutOfRangeError("inner"), "UnknownError"),
]


@pytest.mark.parametrize("exc, cls", PY_ERRORS,
                         ids=[f"{type(e).__name__}->{c}" for e, c in PY_ERRORS])
def test_py_func_error_mapping(graph, exc, cls):
    y = nd.py_func(_raise(exc), [nd.constant(1)], np.int64)
    with session(graph) as sess:
        with pytest.raises(nd.errors.OpError) as info:
            sess.run(y)
    assert type(info.value).__name__ == cls


def test_py_func_error_message(graph):
    y = nd.py_func(_raise(ValueError("boom at 3")), [nd.constant(1)], np.int64)
    k = nd.py_func(_raise(KeyError("m")), [nd.constant(1)], np.int64)
    with session(graph) as sess:
        with pytest.raises(nd.errors.InvalidArgumentError) as info:
            sess.run(y)
        assert info.value.message.splitlines()[0] == "ValueError: boom at 3"
        with pytest.raises(nd.errors.UnknownError) as info:
            sess.run(k)
        assert info.value.message.splitlines()[0] == "KeyError: 'm'"


def test_py_func_error_does_not_break_the_session(graph):
    x = nd.placeholder(np.int64, shape=[])

    def f(v):
        if v < 0:
            raise ValueError("negative")
        return v + 1
    y = nd.py_func(f, [x], np.int64)
    with session(graph) as sess:
        with pytest.raises(ValueError):
            sess.run(y, feed_dict={x: -1})
        assert sess.run(y, feed_dict={x: 1}) == 2


# ------------------------------------------------------------ timeouts

def test_run_options_timeout_on_blocked_dequeue(graph):
    q = nd.FIFOQueue(2, np.int64, shapes=[[]])
    x = q.dequeue()
    with session(graph, timeout_ms=0) as sess:
        start = time.monotonic()
        with pytest.raises(nd.errors.DeadlineExceededError, match="Timed out waiting for notification"):
            sess.run(x, options=nd.RunOptions(timeout_in_ms=150))
        elapsed = time.monotonic() - start
        assert 0.1 <= elapsed < 3
        assert isinstance(nd.errors.DeadlineExceededError("m"), nd.errors.OpError)
        sess.run(q.enqueue(7))
        assert sess.run(x, options=nd.RunOptions(timeout_in_ms=150)) == 7


def test_run_options_override_session_timeout(graph):
    q = nd.FIFOQueue(2, np.int64, shapes=[[]])
    x = q.dequeue()
    with session(graph, timeout_ms=5000) as sess:
        start = time.monotonic()
        with pytest.raises(nd.errors.DeadlineExceededError):
            sess.run(x, options=nd.RunOptions(timeout_in_ms=100))
        assert time.monotonic() - start < 2


# ------------------------------------------------------------ against TensorFlow

def _normalize(value):
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_normalize(v) for v in value])
    if value is None:
        return None
    arr = np.asarray(value)
    return (arr.dtype.kind, arr.dtype.itemsize if arr.dtype.kind != "O" else 0, arr.shape,
            arr.tolist())


def _session_program(m, constant, string, py_func):
    """The same program in TF1 (``m`` = tf.compat.v1) and nbdata (``m`` = nd)."""
    x = m.placeholder(np.float32, shape=[None, 3])
    q = m.FIFOQueue(5, np.int32, shapes=[[]])
    fill = q.enqueue_many([constant(np.array([10, 20, 30], np.int32))])
    d = q.dequeue()
    doubled = py_func(lambda v: (v * 2).astype(np.int32), [d], np.int32)
    c = constant(np.array([1, 2], np.int64))
    s = constant(b"str")
    fetches = {"feed": [x * 2, (x[0],)], "pair": Pair(d, d + 1), "pf": doubled,
               "const": (c, s), "op": c.op}
    feed = {x: np.arange(6, dtype=np.float32).reshape(2, 3)}
    return fill, fetches, feed, q.size()


def test_session_program_matches_tensorflow(tf):
    results = []
    for m, constant, string, py_func, mk_graph in (
            (tf, tf.constant, tf.string, tf.py_func, tf.Graph),
            (nd, nd.constant, nd.string, nd.py_func, nd.Graph)):
        g = mk_graph()
        with g.as_default():
            fill, fetches, feed, size = _session_program(m, constant, string, py_func)
            sess = m.Session(graph=g)
            try:
                sess.run(fill)
                out = [_normalize(sess.run(fetches, feed_dict=feed)) for _ in range(2)]
                out.append(_normalize(sess.run(size)))
                results.append(out)
            finally:
                sess.close()
    assert results[1] == results[0]
    assert results[0][0]["pair"] == ("Pair", [("i", 4, (), 10), ("i", 4, (), 11)])
