"""TF1 queues (nd.FIFOQueue, nd.PaddingFIFOQueue, nd.RandomShuffleQueue) in a session.

The expected values, errors and messages are TF1's (measured with TensorFlow 2.21's
``tf.compat.v1`` in graph mode). Messages name a queue by its resource name
``'_<n>_<op name>'``; the number is the session's and is matched as ``\\d+``.
Blocking behaviour is checked with helper threads that are always joined with a
timeout, and every session has an operation timeout, so a regression fails instead
of hanging.
"""

import collections
import re
import threading
import time

import numpy as np
import pytest

import nbdata as nd
from queue_helpers import core_message, session

OutOfRange = nd.errors.OutOfRangeError
Cancelled = nd.errors.CancelledError
InvalidArgument = nd.errors.InvalidArgumentError

KINDS = ["fifo", "padding", "shuffle"]
# kind -> (class name in messages of multi-element ops, class name in single-element
# ops and enqueues, op name)
LABELS = {
    "fifo": ("FIFOQueue", "FIFOQueue", "fifo_queue"),
    "padding": ("PaddingFIFOQueue", "FIFOQueue", "padding_fifo_queue"),
    "shuffle": ("RandomShuffleQueue", "RandomShuffleQueue", "random_shuffle_queue"),
}


def make_queue(kind, capacity=10, dtypes=np.int32, shapes=((),), **kw):
    shapes = [list(s) for s in shapes]
    if kind == "fifo":
        return nd.FIFOQueue(capacity, dtypes, shapes=shapes, **kw)
    if kind == "padding":
        return nd.PaddingFIFOQueue(capacity, dtypes, shapes=shapes, **kw)
    return nd.RandomShuffleQueue(capacity, 0, dtypes, shapes=shapes, seed=7, **kw)


def msg(label, name, rest):
    return "^" + re.escape(label) + r" '_\d+_" + re.escape(name) + "' " + re.escape(rest) + "$"


class Background:
    """Runs ``fn`` in a daemon thread, keeping its result or exception."""

    def __init__(self, fn):
        self.result = None
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn):
        try:
            self.result = fn()
        except BaseException as e:  # noqa: BLE001 - inspected by the test
            self.error = e

    def alive_after(self, seconds=0.3):
        self.thread.join(seconds)
        return self.thread.is_alive()

    def join(self, timeout=5.0):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the background op did not finish"
        return self


def wait_until(predicate, timeout=3.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# ------------------------------------------------------------ names and types

def test_queue_names(graph):
    assert nd.FIFOQueue(10, np.int32, shapes=[[]]).name == "fifo_queue"
    assert nd.PaddingFIFOQueue(10, np.int32, shapes=[[]]).name == "padding_fifo_queue"
    assert nd.RandomShuffleQueue(10, 0, np.int32, shapes=[[]]).name == "random_shuffle_queue"
    assert nd.FIFOQueue(10, np.int32, shapes=[[]]).name == "fifo_queue_1"


@pytest.mark.parametrize("kind", KINDS)
def test_size_is_int32_scalar_and_is_closed_bool(graph, kind):
    q = make_queue(kind)
    size, closed = q.size(), q.is_closed()
    assert size.dtype == np.int32 and size.shape == nd.TensorShape([])
    fill = q.enqueue_many([[1, 2, 3]])
    with session(graph) as sess:
        s = sess.run(size)
        assert type(s) is np.int32 and s == 0
        sess.run(fill)
        assert sess.run(size) == 3
        c = sess.run(closed)
        assert type(c) is np.bool_ and not c
        sess.run(q.close())
        assert sess.run(closed) == np.True_
        assert sess.run(size) == 3


# ------------------------------------------------------------ closed queues

@pytest.mark.parametrize("kind", KINDS)
def test_dequeue_on_closed_empty_queue(graph, kind):
    _, single, name = LABELS[kind]
    q = make_queue(kind)
    x, close = q.dequeue(), q.close()
    with session(graph) as sess:
        sess.run(close)
        with pytest.raises(OutOfRange, match=msg(
                single, name, "is closed and has insufficient elements (requested 1, current size 0)")):
            sess.run(x)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("many", [False, True])
def test_enqueue_on_closed_queue_is_cancelled(graph, kind, many):
    _, single, name = LABELS[kind]
    q = make_queue(kind)
    op = q.enqueue_many([[1, 2]]) if many else q.enqueue(1)
    close = q.close()
    with session(graph) as sess:
        sess.run(close)
        with pytest.raises(Cancelled, match=msg(single, name, "is closed.")):
            sess.run(op)


@pytest.mark.parametrize("kind", KINDS)
def test_close_twice(graph, kind):
    name = LABELS[kind][2]
    q = make_queue(kind)
    close = q.close()
    with session(graph) as sess:
        sess.run(close)
        with pytest.raises(Cancelled, match=msg("Queue", name, "is already closed.")):
            sess.run(close)
        with pytest.raises(Cancelled, match=msg("Queue", name, "is already closed.")):
            sess.run(q.close(cancel_pending_enqueues=True))


@pytest.mark.parametrize("kind", KINDS)
def test_dequeue_many_on_closed_queue_keeps_the_elements(graph, kind):
    many_label, _, name = LABELS[kind]
    q = make_queue(kind)
    fill, close = q.enqueue_many([[1, 2]]), q.close()
    many, up_to, size = q.dequeue_many(3), q.dequeue_up_to(3), q.size()
    with session(graph) as sess:
        sess.run([fill])
        sess.run(close)
        with pytest.raises(OutOfRange, match=msg(
                many_label, name, "is closed and has insufficient elements (requested 3, current size 2)")):
            sess.run(many)
        assert sess.run(size) == 2
        got = sess.run(up_to)
        assert got.dtype == np.int32
        assert (sorted(got.tolist()) if kind == "shuffle" else got.tolist()) == [1, 2]
        assert sess.run(size) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_blocked_dequeue_many_restores_elements_when_closed(graph, kind):
    """The elements a blocked dequeue_many had are back in the queue, in order, when it
    fails on close."""
    q = make_queue(kind)
    fill, close = q.enqueue_many([[7, 8]]), q.close()
    many, up_to, size = q.dequeue_many(3), q.dequeue_up_to(5), q.size()
    with session(graph) as sess:
        sess.run(fill)
        bg = Background(lambda: sess.run(many))
        assert bg.alive_after(0.3)
        sess.run(close)
        bg.join()
        assert isinstance(bg.error, OutOfRange)
        assert sess.run(size) == 2
        got = sess.run(up_to).tolist()
        assert (sorted(got) if kind == "shuffle" else got) == [7, 8]


@pytest.mark.parametrize("kind", KINDS)
def test_blocked_dequeue_many_holds_what_it_took(graph, kind):
    """TF1: a blocked dequeue_many takes the available elements at once (size() reads 0
    while it waits, even after more enqueues) and on close reports the number it still
    needed: (requested 1, current size 0) for n=3 with 2 taken."""
    many_label, _, name = LABELS[kind]
    q = make_queue(kind)
    fill, one, close = q.enqueue_many([[7, 8]]), q.enqueue(9), q.close()
    many, size = q.dequeue_many(4), q.size()
    with session(graph) as sess:
        sess.run(fill)
        bg = Background(lambda: sess.run(many))
        assert bg.alive_after(0.3)
        assert sess.run(size) == 0
        sess.run(one)
        assert bg.alive_after(0.2)
        assert sess.run(size) == 0
        sess.run(close)
        bg.join()
    assert isinstance(bg.error, OutOfRange)
    assert re.match(msg(many_label, name,
                        "is closed and has insufficient elements (requested 1, current size 0)"),
                    bg.error.message), bg.error.message


@pytest.mark.parametrize("kind", KINDS)
def test_dequeue_up_to(graph, kind):
    many_label, _, name = LABELS[kind]
    q = make_queue(kind)
    fill, close = q.enqueue_many([[1, 2, 3, 4, 5]]), q.close()
    up_to = q.dequeue_up_to(3)
    with session(graph) as sess:
        sess.run(fill)
        assert len(sess.run(up_to)) == 3   # open queue holding enough: n elements
        sess.run(close)
        assert len(sess.run(up_to)) == 2   # closed, 0 < k < n: the k
        with pytest.raises(OutOfRange, match=msg(
                many_label, name, "is closed and has insufficient elements (requested 3, current size 0)")):
            sess.run(up_to)


@pytest.mark.parametrize("kind", KINDS)
def test_dequeue_up_to_blocks_on_open_queue_until_n_then_partial_on_close(graph, kind):
    q = make_queue(kind)
    one, two, close = q.enqueue(1), q.enqueue(2), q.close()
    up_to = q.dequeue_up_to(3)
    with session(graph) as sess:
        sess.run(one)
        bg = Background(lambda: sess.run(up_to))
        assert bg.alive_after(0.3)          # open queue: waits for 3, like dequeue_many
        sess.run(two)
        assert bg.alive_after(0.2)
        sess.run(close)
        bg.join()
    assert bg.error is None, bg.error
    assert sorted(bg.result.tolist()) == [1, 2]


@pytest.mark.parametrize("kind", KINDS)
def test_dequeue_many_zero_on_closed_empty_queue(graph, kind):
    q = make_queue(kind)
    close, none = q.close(), q.dequeue_many(0)
    assert none.shape == nd.TensorShape([0])
    with session(graph) as sess:
        sess.run(close)
        got = sess.run(none)
    assert isinstance(got, np.ndarray) and got.shape == (0,) and got.dtype == np.int32


# ------------------------------------------------------------ shapes and dtypes

def test_queue_without_shapes_reports_unknown_shapes(graph):
    assert nd.FIFOQueue(10, np.int32).shapes == [nd.TensorShape(None)]
    assert nd.FIFOQueue(10, [np.int32, nd.string]).shapes == [nd.TensorShape(None)] * 2


def test_queue_without_shapes(graph):
    q = nd.FIFOQueue(10, np.int32)
    ops = [q.enqueue(np.int32(v)) for v in (1, 2, 3)]
    x = q.dequeue()
    many, up_to = q.dequeue_many(2), q.dequeue_up_to(2)
    assert x.shape == nd.TensorShape(None)
    assert many.shape == nd.TensorShape(None) and up_to.shape == nd.TensorShape(None)
    with session(graph) as sess:
        for op in ops:
            sess.run(op)
        expected = ("FIFOQueue's DequeueMany and DequeueUpTo require the components to have "
                    "specified shapes.")
        for op in (many, up_to):
            with pytest.raises(InvalidArgument, match="^" + re.escape(expected) + "$"):
                sess.run(op)
        assert sess.run(x) == 1          # dequeue works; nothing was taken by the failures
        assert sess.run(q.size()) == 2


def test_static_shapes_of_dequeues(graph):
    q = nd.FIFOQueue(10, [np.int32, np.float32], shapes=[[], [2, 3]])
    a, b = q.dequeue()
    assert (a.shape, b.shape) == (nd.TensorShape([]), nd.TensorShape([2, 3]))
    a, b = q.dequeue_many(4)
    assert (a.shape, b.shape) == (nd.TensorShape([4]), nd.TensorShape([4, 2, 3]))
    a, b = q.dequeue_up_to(4)
    assert (a.shape, b.shape) == (nd.TensorShape([None]), nd.TensorShape([None, 2, 3]))
    assert (a.dtype, b.dtype) == (np.int32, np.float32)


def test_dequeue_many_static_shape_with_constant_count(graph):
    q = nd.FIFOQueue(10, np.int32, shapes=[[3]])
    assert q.dequeue_many(nd.constant(4)).shape == nd.TensorShape([4, 3])


def test_dequeue_many_with_count_tensor_runs(graph):
    q = nd.FIFOQueue(10, np.int32, shapes=[[]])
    n = nd.placeholder(np.int32, shape=[])
    fill, many = q.enqueue_many([[1, 2, 3, 4]]), q.dequeue_many(n)
    with session(graph) as sess:
        sess.run(fill)
        assert sess.run(many, feed_dict={n: 3}).tolist() == [1, 2, 3]
        assert sess.run(many, feed_dict={n: 1}).tolist() == [4]


def test_wrong_static_shape_raises_when_building(graph):
    q = nd.FIFOQueue(10, np.int32, shapes=[[]])
    with pytest.raises(ValueError, match=re.escape("Shapes (2,) and () are incompatible")):
        q.enqueue(nd.constant(np.array([1, 2], np.int32)))
    q2 = nd.FIFOQueue(10, np.int32, shapes=[[2]])
    with pytest.raises(ValueError, match=re.escape("Shapes (3,) and (2,) are incompatible")):
        q2.enqueue_many([np.array([[1, 2, 3]], np.int32)])
    with pytest.raises(ValueError, match=re.escape("Shapes () and (2,) are incompatible")):
        q2.enqueue_many([np.array([1, 2, 3], np.int32)])


def test_runtime_shape_mismatch(graph):
    p = nd.placeholder(np.int32, shape=None)
    q = nd.FIFOQueue(10, np.int32, shapes=[[]])
    q2 = nd.FIFOQueue(10, np.int32, shapes=[[2]])
    pq = nd.PaddingFIFOQueue(10, np.int32, shapes=[[None]])
    enq, enq_many, pad_enq = q.enqueue(p), q2.enqueue_many(p), pq.enqueue(p)
    with session(graph) as sess:
        with pytest.raises(InvalidArgument, match=re.escape(
                "Shape mismatch in tuple component 0. Expected [], got [2]")):
            sess.run(enq, feed_dict={p: np.array([1, 2], np.int32)})
        with pytest.raises(InvalidArgument, match=re.escape(
                "Shape mismatch in tuple component 0. Expected [1,2], got [1,3]")):
            sess.run(enq_many, feed_dict={p: np.array([[1, 2, 3]], np.int32)})
        with pytest.raises(InvalidArgument, match=re.escape(
                "Shape mismatch in tuple component 0. Expected [?], got [1,1]")):
            sess.run(pad_enq, feed_dict={p: np.array([[1]], np.int32)})
        assert sess.run([q.size(), q2.size(), pq.size()]) == [0, 0, 0]


def test_wrong_python_value_dtype_raises_type_error(graph):
    q = nd.FIFOQueue(10, np.int32, shapes=[[]])
    with pytest.raises(TypeError, match=re.escape("Expected int32, but got 1.5 of type 'float'.")):
        q.enqueue(1.5)


def test_wrong_tensor_dtype_raises_when_building(graph):
    q = nd.FIFOQueue(10, np.int32, shapes=[[]])
    with pytest.raises((TypeError, ValueError)):
        q.enqueue(nd.constant(1.5, dtype=np.float32))
    assert q.enqueue(nd.constant(1, dtype=np.int32)) is not None


def test_extra_values_for_one_component_are_dropped(graph):
    """TF1 zips the values with the dtypes: enqueue((1, 2)) to a one-component queue
    enqueues 1."""
    q = nd.FIFOQueue(10, np.int32, shapes=[[]])
    op = q.enqueue((1, 2))
    with session(graph) as sess:
        sess.run(op)
        assert sess.run(q.dequeue()) == 1


def test_missing_component_fails_at_run(graph):
    """TF1 builds enqueue([1]) to a two-component queue; running it fails."""
    q = nd.FIFOQueue(10, [np.int32, np.int32], shapes=[[], []])
    op = q.enqueue([1])
    with session(graph) as sess:
        with pytest.raises(InvalidArgument, match="Signature mismatch"):
            sess.run(op)


def test_constructor_errors(graph):
    with pytest.raises(ValueError, match=re.escape(
            "Queue shapes must have the same length as dtypes, received len(shapes)=1, "
            "len(dtypes)=2")):
        nd.FIFOQueue(10, [np.int32, np.int32], shapes=[[]])
    with pytest.raises(ValueError, match=re.escape(
            "All shapes must be fully defined: [TensorShape([None])]")):
        nd.FIFOQueue(10, np.int32, shapes=[[None]])
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'shapes'"):
        nd.PaddingFIFOQueue(10, np.int32)


# ------------------------------------------------------------ dequeue structure, names

def test_dequeue_return_types(graph):
    one = nd.FIFOQueue(10, np.int32, shapes=[[]])
    assert isinstance(one.dequeue(), nd.Tensor)
    listed = nd.FIFOQueue(10, [np.int32], shapes=[[]])
    assert isinstance(listed.dequeue(), nd.Tensor)
    two = nd.FIFOQueue(10, [np.int32, nd.string], shapes=[[], []])
    out = two.dequeue()
    assert isinstance(out, list) and len(out) == 2
    assert out[1].dtype is nd.string


def test_names_give_dicts(graph):
    q = nd.FIFOQueue(10, [np.int32, nd.string], shapes=[[], []], names=["a", "b"])
    single = nd.FIFOQueue(10, [np.int32], shapes=[[]], names=["a"])
    out = q.dequeue()
    assert isinstance(out, dict) and sorted(out) == ["a", "b"]
    assert isinstance(single.dequeue(), dict) and list(single.dequeue()) == ["a"]
    many = q.dequeue_many(2)
    assert isinstance(many, dict) and many["a"].shape == nd.TensorShape([2])
    fill = [q.enqueue({"a": 1, "b": b"x"}), q.enqueue({"b": b"y", "a": 2})]
    with session(graph) as sess:
        for op in fill:
            sess.run(op)
        got = sess.run(out)
        assert got == {"a": 1, "b": b"x"}
        assert type(got["a"]) is np.int32 and type(got["b"]) is bytes
        sess.run(q.close())
        got = sess.run(q.dequeue_up_to(5))
        assert got["a"].tolist() == [2] and got["b"].tolist() == [b"y"]


def test_names_errors(graph):
    named = nd.FIFOQueue(10, [np.int32, np.int32], shapes=[[], []], names=["a", "b"])
    plain = nd.FIFOQueue(10, [np.int32], shapes=[[]])
    with pytest.raises(ValueError, match="^You must enqueue a dictionary in a Queue with names$"):
        named.enqueue([1, 2])
    with pytest.raises(ValueError, match="^" + re.escape(
            "Keys in dictionary to enqueue do not match names of Queue.  Dictionary: ['a'],"
            "Queue: ['a', 'b']") + "$"):
        named.enqueue({"a": 1})
    with pytest.raises(ValueError, match="^Queue must have names to enqueue a dictionary$"):
        plain.enqueue({"a": 1})


# ------------------------------------------------------------ PaddingFIFOQueue

def test_padding_queue_static_shapes(graph):
    q = nd.PaddingFIFOQueue(10, [np.int32, np.float32], shapes=[[None], [None, 2]])
    a, b = q.dequeue()
    assert (a.shape, b.shape) == (nd.TensorShape([None]), nd.TensorShape([None, 2]))
    a, b = q.dequeue_many(2)
    assert (a.shape, b.shape) == (nd.TensorShape([2, None]), nd.TensorShape([2, None, 2]))


def test_padding_values(graph):
    ints = nd.PaddingFIFOQueue(5, np.int32, shapes=[[None]])
    strs = nd.PaddingFIFOQueue(5, nd.string, shapes=[[None]])
    floats = nd.PaddingFIFOQueue(5, np.float32, shapes=[[None, 2]])
    bools = nd.PaddingFIFOQueue(5, np.bool_, shapes=[[None]])
    ops = [ints.enqueue(np.array([1], np.int32)), ints.enqueue(np.array([1, 2, 3], np.int32)),
           strs.enqueue(np.array([b"a"], object)), strs.enqueue(np.array([b"a", b"b"], object)),
           floats.enqueue(np.array([[1, 2]], np.float32)),
           floats.enqueue(np.zeros((0, 2), np.float32)),
           bools.enqueue(np.array([True], np.bool_)), bools.enqueue(np.array([True, True]))]
    outs = [q.dequeue_many(2) for q in (ints, strs, floats, bools)]
    with session(graph) as sess:
        for op in ops:
            sess.run(op)
        i, s, f, b = sess.run(outs)
    assert i.dtype == np.int32 and i.tolist() == [[1, 0, 0], [1, 2, 3]]
    assert s.tolist() == [[b"a", b""], [b"a", b"b"]]
    assert f.dtype == np.float32 and f.tolist() == [[[1, 2]], [[0, 0]]]
    assert b.dtype == np.bool_ and b.tolist() == [[True, False], [True, True]]


def test_padding_is_per_dequeue(graph):
    q = nd.PaddingFIFOQueue(10, np.int64, shapes=[[None]])
    ops = [q.enqueue(np.arange(n)) for n in (1, 2, 4, 1)]
    many = q.dequeue_many(2)
    with session(graph) as sess:
        for op in ops:
            sess.run(op)
        assert sess.run(many).tolist() == [[0, 0], [0, 1]]
        assert sess.run(many).tolist() == [[0, 1, 2, 3], [0, 0, 0, 0]]


# ------------------------------------------------------------ RandomShuffleQueue

def test_shuffle_queue_keeps_min_after_dequeue_until_closed(graph):
    q = nd.RandomShuffleQueue(20, 5, np.int32, shapes=[[]], seed=1)
    fill, close = q.enqueue_many([np.arange(8, dtype=np.int32)]), q.close()
    many, up_to, one, size = q.dequeue_many(3), q.dequeue_up_to(5), q.dequeue(), q.size()
    got = []
    with session(graph) as sess:
        sess.run(fill)
        got += sess.run(many).tolist()
        assert sess.run(size) == 5
        with pytest.raises(nd.errors.DeadlineExceededError):
            sess.run(one, options=nd.RunOptions(timeout_in_ms=200))
        assert sess.run(size) == 5
        sess.run(close)
        got += sess.run(many).tolist()
        rest = sess.run(up_to).tolist()
        assert len(rest) == 2
        got += rest
        with pytest.raises(OutOfRange, match=msg(
                "RandomShuffleQueue", "random_shuffle_queue",
                "is closed and has insufficient elements (requested 1, current size 0)")):
            sess.run(one)
    assert sorted(got) == list(range(8))


def test_shuffle_queue_blocked_dequeue_wakes_when_floor_exceeded(graph):
    q = nd.RandomShuffleQueue(10, 3, np.int32, shapes=[[]], seed=1)
    fill, more, one = q.enqueue_many([[1, 2, 3]]), q.enqueue(4), q.dequeue()
    with session(graph) as sess:
        sess.run(fill)
        bg = Background(lambda: sess.run(one))
        assert bg.alive_after(0.3)
        sess.run(more)
        bg.join()
        assert bg.error is None and int(bg.result) in (1, 2, 3, 4)
        assert sess.run(q.size()) == 3


def _shuffled_order(seed, values, dequeues):
    g = nd.Graph()
    with g.as_default():
        q = nd.RandomShuffleQueue(50, 0, np.int64, shapes=[[]], seed=seed)
        fill = q.enqueue_many([np.asarray(values, np.int64)])
        ops = [q.dequeue_many(n) if n > 1 else q.dequeue() for n in dequeues]
        with session(g) as sess:
            sess.run(fill)
            out = []
            for op in ops:
                out += np.atleast_1d(sess.run(op)).tolist()
    return out


def test_shuffle_queue_seed_determinism():
    values = list(range(30))
    a = _shuffled_order(11, values, [1, 5, 4, 10, 10])
    b = _shuffled_order(11, values, [1, 5, 4, 10, 10])
    c = _shuffled_order(12, values, [1, 5, 4, 10, 10])
    assert a == b
    assert sorted(a) == values and sorted(c) == values
    assert a != values                        # it does shuffle
    assert a != c                             # and the seed matters


def test_shuffle_queue_multiset_with_concurrent_producers(graph):
    q = nd.RandomShuffleQueue(8, 2, np.int64, shapes=[[]])
    x = nd.placeholder(np.int64, shape=[None])
    fill, close, out = q.enqueue_many([x]), q.close(), q.dequeue_up_to(3)
    with session(graph) as sess:
        producers = [Background(lambda k=k: sess.run(fill, feed_dict={x: np.arange(k * 20, k * 20 + 20)}))
                     for k in range(3)]

        def close_when_produced():
            for p in producers:
                p.join()
            sess.run(close)
        closer = Background(close_when_produced)
        got = []
        while True:
            try:
                got += sess.run(out).tolist()
            except OutOfRange:
                break
        closer.join()
        assert closer.error is None
        assert all(p.error is None for p in producers)
    assert sorted(got) == list(range(60))


def test_shuffle_queue_min_after_dequeue_not_below_capacity(graph):
    q = nd.RandomShuffleQueue(10, 10, np.int32, shapes=[[]])     # builds
    size = q.size()
    with session(graph) as sess:
        with pytest.raises(InvalidArgument, match=re.escape("min_after_dequeue 10 must be < capacity 10")):
            sess.run(size)


# ------------------------------------------------------------ blocking, timeouts, threads

@pytest.mark.parametrize("kind", KINDS)
def test_timeouts(graph, kind):
    q = make_queue(kind, capacity=2)
    fill, one, x = q.enqueue_many([[1, 2]]), q.enqueue(3), q.dequeue_many(3)
    with session(graph, timeout_ms=0) as sess:
        opts = nd.RunOptions(timeout_in_ms=100)
        start = time.monotonic()
        with pytest.raises(nd.errors.DeadlineExceededError, match="Timed out waiting for notification"):
            sess.run(x, options=opts)
        sess.run(fill)
        with pytest.raises(nd.errors.DeadlineExceededError, match="Timed out waiting for notification"):
            sess.run(one, options=opts)
        assert time.monotonic() - start < 3
        assert sess.run(q.size()) == 2


def test_session_operation_timeout(graph):
    q = nd.FIFOQueue(2, np.int32, shapes=[[]])
    x = q.dequeue()
    with session(graph, timeout_ms=100) as sess:
        with pytest.raises(nd.errors.DeadlineExceededError):
            sess.run(x)


def test_enqueue_many_larger_than_capacity_with_consumer(graph):
    q = nd.FIFOQueue(3, np.int64, shapes=[[]])
    fill, x, size = q.enqueue_many([np.arange(10)]), q.dequeue(), q.size()
    with session(graph) as sess:
        bg = Background(lambda: sess.run(fill))
        assert bg.alive_after(0.3)            # blocked after a partial enqueue
        assert sess.run(size) == 3
        got = [int(sess.run(x)) for _ in range(10)]
        bg.join()
        assert bg.error is None
        assert sess.run(size) == 0
    assert got == list(range(10))


def test_close_with_cancel_pending_enqueues(graph):
    q = nd.FIFOQueue(2, np.int32, shapes=[[]])
    fill, blocked = q.enqueue_many([[1, 2]]), q.enqueue(3)
    cancel, x, up_to = q.close(cancel_pending_enqueues=True), q.dequeue(), q.dequeue_up_to(5)
    with session(graph) as sess:
        sess.run(fill)
        bg = Background(lambda: sess.run(blocked))
        assert bg.alive_after(0.3)
        sess.run(cancel)
        bg.join()
        assert isinstance(bg.error, Cancelled)
        assert bg.error.message == "Enqueue operation was cancelled"
        assert sess.run(q.is_closed())
        assert sess.run(up_to).tolist() == [1, 2]       # elements already in are kept
        with pytest.raises(OutOfRange):
            sess.run(x)


def test_close_waits_behind_pending_enqueue(graph):
    q = nd.FIFOQueue(2, np.int32, shapes=[[]])
    fill, blocked, close = q.enqueue_many([[1, 2]]), q.enqueue(3), q.close()
    x, closed = q.dequeue(), q.is_closed()
    with session(graph) as sess:
        sess.run(fill)
        enq = Background(lambda: sess.run(blocked))
        assert enq.alive_after(0.3)
        closer = Background(lambda: sess.run(close))
        assert closer.alive_after(0.3)          # queued behind the pending enqueue
        assert not sess.run(closed)
        assert sess.run(x) == 1                 # makes room: the enqueue completes, then the close
        enq.join()
        closer.join()
        assert enq.error is None and closer.error is None
        assert sess.run(closed)
        assert [sess.run(x) for _ in range(2)] == [2, 3]
        with pytest.raises(OutOfRange):
            sess.run(x)


@pytest.mark.parametrize("kind", KINDS)
def test_session_close_unblocks_dequeue(graph, kind):
    q = make_queue(kind)
    x = q.dequeue()
    sess = session(graph, timeout_ms=0)
    sess.run(q.size())
    bg = Background(lambda: sess.run(x))
    assert bg.alive_after(0.3)
    start = time.monotonic()
    closer = Background(sess.close)
    closer.join()
    bg.join()
    assert time.monotonic() - start < 3
    assert isinstance(bg.error, Cancelled)
    with pytest.raises(RuntimeError):
        sess.run(x)


def test_session_close_unblocks_enqueue(graph):
    q = nd.FIFOQueue(1, np.int32, shapes=[[]])
    fill = q.enqueue_many([[1, 2, 3]])
    sess = session(graph, timeout_ms=0)
    bg = Background(lambda: sess.run(fill))
    assert bg.alive_after(0.3)
    sess.close()
    bg.join()
    assert isinstance(bg.error, Cancelled)


def test_two_sessions_have_separate_queues(graph):
    q = nd.FIFOQueue(5, np.int32, shapes=[[]])
    one, size = q.enqueue(1), q.size()
    with session(graph) as a, session(graph) as b:
        a.run(one)
        a.run(one)
        assert a.run(size) == 2
        assert b.run(size) == 0


def test_a_shared_name_is_shared_while_a_session_uses_it(graph):
    import gc
    from nbdata.train import queues
    q = nd.FIFOQueue(5, np.int32, shapes=[[]], shared_name="shared_q")
    one, size = q.enqueue(1), q.size()
    with session(graph) as a, session(graph) as b:
        a.run(one)
        assert b.run(size) == 1   # the same queue in both sessions
    gc.collect()
    assert "shared_q" not in queues._shared   # forgotten with its element once both closed
    with session(graph) as c:
        assert c.run(size) == 0


def test_fifo_order_across_producers_and_consumers(graph):
    """Every element enqueued by 4 producer threads is dequeued exactly once by 3
    consumers."""
    q = nd.FIFOQueue(4, [np.int64, np.int64], shapes=[[], []])
    k = nd.placeholder(np.int64, shape=[])
    v = nd.placeholder(np.int64, shape=[])
    enq, close, out = q.enqueue([k, v]), q.close(), q.dequeue_up_to(2)
    results = collections.defaultdict(list)
    lock = threading.Lock()

    with session(graph) as sess:
        def produce(p):
            for i in range(25):
                sess.run(enq, feed_dict={k: p, v: i})

        def consume():
            while True:
                try:
                    ks, vs = sess.run(out)
                except OutOfRange:
                    return
                with lock:
                    for a, b in zip(ks.tolist(), vs.tolist()):
                        results[a].append(b)

        consumers = [Background(consume) for _ in range(3)]
        producers = [Background(lambda p=p: produce(p)) for p in range(4)]
        for t in producers:
            t.join()
            assert t.error is None
        sess.run(close)
        for t in consumers:
            t.join()
            assert t.error is None
    assert sorted(results) == [0, 1, 2, 3]
    for p in range(4):
        assert sorted(results[p]) == list(range(25))


# ------------------------------------------------------------ against TensorFlow

def _run_steps(run, steps):
    out = []
    for step in steps:
        try:
            value = run(step)
        except Exception as e:  # noqa: BLE001 - compared with TF's
            out.append(("error", type(e).__name__, core_message(e)))
            continue
        out.append(("value", value))
    return out


def _queue_script(m, string, constant):
    """The same queue program in TF1 (``m`` = tf.compat.v1) and nbdata (``m`` = nd)."""
    i32 = np.int32
    f = m.FIFOQueue(5, i32, shapes=[[2]])
    p = m.PaddingFIFOQueue(5, [i32, string], shapes=[[None], []])
    return [
        f.enqueue_many([constant(np.array([[1, 2], [3, 4], [5, 6]], i32))]),
        f.dequeue(), f.dequeue_many(2), f.size(),
        p.enqueue([constant(np.array([1], i32)), constant(b"a")]),
        p.enqueue([constant(np.array([1, 2, 3], i32)), constant(b"bc")]),
        p.enqueue([constant(np.zeros(0, i32)), constant(b"")]),
        p.dequeue_many(2), p.close(), p.is_closed(), p.dequeue_many(2), p.size(),
        p.dequeue_up_to(2), p.dequeue(), p.dequeue_up_to(2),
        f.close(), f.enqueue(constant(np.array([7, 8], i32))), f.close(), f.dequeue(),
        f.dequeue_many(0),
    ]


def _normalize(value):
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if value is None:
        return None
    arr = np.asarray(value)
    return (arr.dtype.kind, arr.shape, arr.tolist())


def test_queue_program_matches_tensorflow(tf):
    with tf.Graph().as_default() as g:
        steps = _queue_script(tf, tf.string, tf.constant)
        with tf.Session(graph=g) as sess:
            expected = _run_steps(lambda s: _normalize(sess.run(s)), steps)
    g = nd.Graph()
    with g.as_default():
        steps = _queue_script(nd, nd.string, nd.constant)
        with session(g) as sess:
            got = _run_steps(lambda s: _normalize(sess.run(s)), steps)
    assert [e[0] for e in expected].count("error") == 6
    assert got == expected
