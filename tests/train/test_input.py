"""TF1 input producers and batchers (``nd.train.string_input_producer`` ... ``batch``,
``shuffle_batch``, the ``_join`` and ``maybe_`` variants) against TF1's measured
behaviour: return structures, static shapes,
values and order, the end of an epoch, and the errors raised when a graph is built
or run. A few tests compare a CSV pipeline with real ``tensorflow.compat.v1``.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd
from queue_helpers import started

DATA = Path(__file__).resolve().parent.parent / "data"


def _message(e: BaseException) -> str:
    return getattr(e, "message", str(e))


def _closed_message(kind: str, queue: str, requested: int, size: int) -> str:
    return (rf"^{kind} '_\d+_{re.escape(queue)}' is closed and has insufficient elements "
            rf"\(requested {requested}, current size {size}\)$")


def drain(sess, fetch, limit: int = 500):
    """Run ``fetch`` until OutOfRangeError: (the values, the error)."""
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(fetch))
        except nd.errors.OutOfRangeError as e:
            return out, e
    raise AssertionError(f"no end of input after {limit} runs")


def _lists(batches) -> list:
    return [b.tolist() if isinstance(b, np.ndarray) else [x.tolist() for x in b] for b in batches]


# ----------------------------------------------------------------- producers

def test_string_input_producer_queue_and_runner():
    with nd.Graph().as_default() as g:
        q = nd.train.string_input_producer([b"a", b"b", b"c"])
        assert isinstance(q, nd.FIFOQueue)
        assert q.name == "input_producer"
        assert q.dtypes == [nd.string]
        assert [nd.TensorShape(s) for s in q.shapes] == [nd.TensorShape([])]
        assert q.capacity == 32
        runners = g.get_collection(nd.GraphKeys.QUEUE_RUNNERS)
        assert len(runners) == 1 and runners[0].queue is q
        assert len(runners[0].enqueue_ops) == 1


def test_string_input_producer_num_epochs_in_order_then_out_of_range():
    with nd.Graph().as_default() as g:
        q = nd.train.string_input_producer(["a", "b", "c"], num_epochs=2, shuffle=False)
        name = q.dequeue()
        local = g.get_collection(nd.GraphKeys.LOCAL_VARIABLES)
        assert [v.name for v in local] == ["input_producer/limit_epochs/epochs"]
        assert g.get_collection(nd.GraphKeys.GLOBAL_VARIABLES) == []
        with nd.Session() as sess, started(sess):
            got, end = drain(sess, name)
    assert got == [b"a", b"b", b"c", b"a", b"b", b"c"]
    assert all(type(x) is bytes for x in got)
    assert re.match(_closed_message("FIFOQueue", "input_producer", 1, 0), _message(end))


def test_string_input_producer_without_local_init_fails_the_runner():
    with nd.Graph().as_default():
        q = nd.train.string_input_producer(["a", "b"], num_epochs=1, shuffle=False)
        name = q.dequeue()
        with nd.Session() as sess, started(sess, init_locals=False) as state:
            state.expect_join_error = True
            with pytest.raises(nd.errors.OutOfRangeError) as info:
                sess.run(name)
            assert re.match(_closed_message("FIFOQueue", "input_producer", 1, 0),
                            _message(info.value))
    assert type(state.join_error) is nd.errors.FailedPreconditionError
    assert _message(state.join_error).startswith(
        "Attempting to use uninitialized value input_producer/limit_epochs/epochs")


def test_string_input_producer_errors():
    with nd.Graph().as_default():
        with pytest.raises(ValueError, match="^string_input_producer requires a non-null input "
                                             "tensor$"):
            nd.train.string_input_producer([])
        with pytest.raises(TypeError):
            nd.train.string_input_producer([1, 2])


def test_string_input_producer_int_list_message():
    with nd.Graph().as_default():
        with pytest.raises(TypeError, match=re.escape("Expected string, but got 1 of type 'int'.")):
            nd.train.string_input_producer([1, 2])


def test_string_input_producer_empty_string_tensor_fails_at_run():
    with nd.Graph().as_default():
        names = nd.constant(np.array([], dtype=object), dtype=nd.string)
        q = nd.train.string_input_producer(names)
        name = q.dequeue()
        with nd.Session() as sess, started(sess) as state:
            state.expect_join_error = True
            with pytest.raises(nd.errors.OutOfRangeError):
                sess.run(name)
    assert type(state.join_error) is nd.errors.InvalidArgumentError
    assert "string_input_producer requires a non-null input tensor" in _message(state.join_error)


def _epochs(shuffle_seed, n_names=8, epochs=3):
    names = [f"f{i}".encode() for i in range(n_names)]
    with nd.Graph().as_default():
        q = nd.train.string_input_producer(names, num_epochs=epochs, shuffle=True,
                                           seed=shuffle_seed)
        name = q.dequeue()
        with nd.Session() as sess, started(sess):
            got, _ = drain(sess, name)
    return names, [got[i * n_names:(i + 1) * n_names] for i in range(epochs)], got


def test_string_input_producer_shuffle_permutes_each_epoch():
    names, epochs, got = _epochs(5)
    assert len(got) == 24
    for epoch in epochs:
        assert sorted(epoch) == names          # each epoch: every name once
    assert any(epoch != names for epoch in epochs)
    assert len({tuple(e) for e in epochs}) > 1  # reshuffled independently
    # The same seed gives the same order (a fresh graph and session).
    assert _epochs(5)[2] == got


def test_range_input_producer_int32_in_order():
    with nd.Graph().as_default():
        q = nd.train.range_input_producer(5, num_epochs=2, shuffle=False)
        assert isinstance(q, nd.FIFOQueue) and q.name == "input_producer"
        assert q.dtypes == [np.int32]
        x = q.dequeue()
        assert x.dtype == np.int32 and x.shape == nd.TensorShape([])
        with nd.Session() as sess, started(sess):
            got, end = drain(sess, x)
    assert [int(v) for v in got] == [0, 1, 2, 3, 4] * 2
    assert all(type(v) is np.int32 for v in got)
    assert re.match(_closed_message("FIFOQueue", "input_producer", 1, 0), _message(end))


def test_range_input_producer_tensor_limit():
    with nd.Graph().as_default():
        q = nd.train.range_input_producer(nd.constant(np.int64(3)), num_epochs=1, shuffle=False)
        x = q.dequeue()
        with nd.Session() as sess, started(sess):
            got, _ = drain(sess, x)
    assert [int(v) for v in got] == [0, 1, 2]


def test_slice_input_producer_returns_a_list_of_aligned_rows():
    with nd.Graph().as_default():
        rows = nd.train.slice_input_producer(
            [nd.constant(np.array([1, 2, 3], np.int32)),
             nd.constant(np.array([[1, 2], [3, 4], [5, 6]], np.float32))],
            num_epochs=1, shuffle=False)
        assert isinstance(rows, list) and len(rows) == 2
        assert rows[0].shape == nd.TensorShape([]) and rows[1].shape == nd.TensorShape([2])
        with nd.Session() as sess, started(sess):
            got, end = drain(sess, rows)
    assert [(int(a), b.tolist()) for a, b in got] == [(1, [1.0, 2.0]), (2, [3.0, 4.0]),
                                                       (3, [5.0, 6.0])]
    assert re.match(_closed_message("FIFOQueue", "input_producer/input_producer", 1, 0),
                    _message(end))


def test_slice_input_producer_single_tensor_and_shuffled_rows_stay_aligned():
    with nd.Graph().as_default():
        single = nd.train.slice_input_producer([nd.constant([7, 8])])
        assert isinstance(single, list) and len(single) == 1
        a = np.arange(20, dtype=np.int64)
        rows = nd.train.slice_input_producer([nd.constant(a), nd.constant(a * 10),
                                              nd.constant(np.array([str(i) for i in a],
                                                                   dtype=object), dtype=nd.string)],
                                             num_epochs=2, shuffle=True, seed=3)
        with nd.Session() as sess, started(sess):
            got, _ = drain(sess, rows)
    assert len(got) == 40
    assert all(int(y) == 10 * int(x) and s == str(int(x)).encode() for x, y, s in got)
    firsts = [int(x) for x, _, _ in got]
    assert sorted(firsts[:20]) == list(range(20)) and sorted(firsts[20:]) == list(range(20))
    assert firsts[:20] != list(range(20))


def test_slice_input_producer_empty_list():
    with nd.Graph().as_default():
        with pytest.raises(ValueError, match=r"^Expected at least one tensor in "
                                             r"slice_input_producer\(\)\.$"):
            nd.train.slice_input_producer([])


def test_input_producer_element_shape_and_rows():
    with nd.Graph().as_default():
        q = nd.train.input_producer(nd.constant(np.array([[1, 2], [3, 4]], np.int32)),
                                    num_epochs=1, shuffle=False)
        assert isinstance(q, nd.FIFOQueue)
        assert [nd.TensorShape(s) for s in q.shapes] == [nd.TensorShape([2])]
        row = q.dequeue()
        assert row.shape == nd.TensorShape([2])
        with nd.Session() as sess, started(sess):
            got, end = drain(sess, row)
    assert [r.tolist() for r in got] == [[1, 2], [3, 4]]
    assert type(end) is nd.errors.OutOfRangeError


def test_input_producer_unknown_shape_needs_element_shape():
    with nd.Graph().as_default():
        p = nd.placeholder(np.int32, shape=None)
        with pytest.raises(ValueError, match=r"^Either `input_tensor` must have a fully defined "
                                             r"shape or `element_shape` must be specified$"):
            nd.train.input_producer(p)
        with pytest.raises(ValueError, match=r"^Shape \(\) must have rank at least 1$"):
            nd.train.input_producer(nd.constant(np.int32(3)))


def test_input_producer_element_shape_mismatch_at_run():
    with nd.Graph().as_default():
        rows = nd.train.py_func(lambda: np.ones((2, 3), np.int32), [], np.int32)
        q = nd.train.input_producer(rows, element_shape=[2], num_epochs=1, shuffle=False)
        x = q.dequeue()
        with nd.Session() as sess, started(sess) as state:
            state.expect_join_error = True
            with pytest.raises(nd.errors.OutOfRangeError):
                sess.run(x)
    assert type(state.join_error) is nd.errors.InvalidArgumentError


def test_limit_epochs():
    with nd.Graph().as_default():
        c = nd.constant(np.array([1, 2], np.int32))
        assert nd.train.limit_epochs(c, None) is c
        with pytest.raises(ValueError, match=r"^num_epochs must be > 0 not 0\.$"):
            nd.train.limit_epochs(c, 0)
        limited = nd.train.limit_epochs(c, 2)
        with nd.Session() as sess:
            sess.run(nd.local_variables_initializer())
            assert sess.run(limited).tolist() == [1, 2]
            assert sess.run(limited).tolist() == [1, 2]
            for _ in range(2):
                with pytest.raises(nd.errors.OutOfRangeError) as info:
                    sess.run(limited)
                assert _message(info.value) == "Reached limit of 2"


def test_match_filenames_once(tmp_path):
    for n in ["t2.txt", "a.tfrecord", "t1.txt", "b.bin"]:
        (tmp_path / n).write_bytes(b"")
    with nd.Graph().as_default() as g:
        found = nd.train.match_filenames_once(str(tmp_path / "t*.txt"))
        both = nd.train.match_filenames_once([str(tmp_path / "t*.txt"), str(tmp_path / "a*")])
        none = nd.train.match_filenames_once(str(tmp_path / "zzz*"))
        assert len(g.get_collection(nd.GraphKeys.LOCAL_VARIABLES)) == 3
        assert g.get_collection(nd.GraphKeys.GLOBAL_VARIABLES) == []
        assert found.dtype is nd.string
        with nd.Session() as sess:
            with pytest.raises(nd.errors.FailedPreconditionError,
                               match="Attempting to use uninitialized value matching_filenames"):
                sess.run(found)
            sess.run(nd.local_variables_initializer())
            f, b, n = sess.run([found, both, none])
    assert isinstance(f, np.ndarray) and f.dtype == object
    assert f.tolist() == [str(tmp_path / "t1.txt").encode(), str(tmp_path / "t2.txt").encode()]
    assert b.tolist() == [str(tmp_path / n).encode() for n in ["a.tfrecord", "t1.txt", "t2.txt"]]
    assert n.tolist() == []


# ------------------------------------------------------- batcher structures

BATCHERS = {
    "batch": lambda t, **kw: nd.train.batch(t, 4, **kw),
    "maybe_batch": lambda t, **kw: nd.train.maybe_batch(t, True, 4, **kw),
    "shuffle_batch": lambda t, **kw: nd.train.shuffle_batch(t, 4, 20, 4, **kw),
    "maybe_shuffle_batch": lambda t, **kw: nd.train.maybe_shuffle_batch(t, 4, 20, 4, True, **kw),
    "batch_join": lambda t, **kw: nd.train.batch_join([t, t], 4, **kw),
    "maybe_batch_join": lambda t, **kw: nd.train.maybe_batch_join([t, t], True, 4, **kw),
    "shuffle_batch_join": lambda t, **kw: nd.train.shuffle_batch_join([t, t], 4, 20, 4, **kw),
    "maybe_shuffle_batch_join": lambda t, **kw: nd.train.maybe_shuffle_batch_join(
        [t, t], 4, 20, 4, True, **kw),
}


def _ab():
    return nd.constant(np.float32(1.5)), nd.constant(np.array([1, 2, 3], np.int32))


@pytest.mark.parametrize("fn", sorted(BATCHERS))
@pytest.mark.parametrize("asfb", [False, True])
def test_batcher_return_structures_and_static_shapes(fn, asfb):
    batcher = BATCHERS[fn]
    n = None if asfb else 4
    op_type = "QueueDequeueUpToV2" if asfb else "QueueDequeueManyV2"
    with nd.Graph().as_default():
        a, b = _ab()
        one = batcher([a], allow_smaller_final_batch=asfb)
        assert isinstance(one, nd.Tensor)
        assert one.shape == nd.TensorShape([n]) and one.dtype == np.float32
        assert one.op.type == op_type
        for tensors in ([a, b], (a, b)):
            out = batcher(tensors, allow_smaller_final_batch=asfb)
            assert type(out) is list and len(out) == 2
            assert out[0].shape == nd.TensorShape([n])
            assert out[1].shape == nd.TensorShape([n, 3]) and out[1].dtype == np.int32
        d1 = batcher({"x": a}, allow_smaller_final_batch=asfb)
        assert type(d1) is dict and list(d1) == ["x"]
        assert d1["x"].shape == nd.TensorShape([n])
        d2 = batcher({"y": b, "x": a}, allow_smaller_final_batch=asfb)
        assert type(d2) is dict and list(d2) == ["x", "y"]
        assert d2["x"].shape == nd.TensorShape([n]) and d2["x"].dtype == np.float32
        assert d2["y"].shape == nd.TensorShape([n, 3]) and d2["y"].dtype == np.int32


@pytest.mark.parametrize("fn", sorted(BATCHERS))
def test_batcher_rejects_a_bare_tensor_and_nested_lists(fn):
    with nd.Graph().as_default():
        a, b = _ab()
        with pytest.raises(TypeError):
            BATCHERS[fn](a)
        with pytest.raises(TypeError):
            BATCHERS[fn]([a, (b, nd.constant(b"s", dtype=nd.string))])


def test_dict_batch_values_follow_their_keys():
    with nd.Graph().as_default():
        x = nd.train.range_input_producer(6, num_epochs=1, shuffle=False).dequeue()
        out = nd.train.batch({"b": x * 10, "a": x, "c": x * 100}, 3)
        assert list(out) == ["a", "b", "c"]
        with nd.Session() as sess, started(sess):
            got, _ = drain(sess, out)
    assert [{k: v.tolist() for k, v in d.items()} for d in got] == [
        {"a": [0, 1, 2], "b": [0, 10, 20], "c": [0, 100, 200]},
        {"a": [3, 4, 5], "b": [30, 40, 50], "c": [300, 400, 500]}]


# ------------------------------------------------------------ epoch ends

def _range10(batcher, **kw):
    with nd.Graph().as_default():
        x = nd.train.range_input_producer(10, num_epochs=1, shuffle=False).dequeue()
        b = batcher(x, **kw)
        with nd.Session() as sess, started(sess):
            return drain(sess, b)


def test_batch_epoch_end_without_smaller_final_batch():
    got, end = _range10(lambda x: nd.train.batch([x], 3))
    assert _lists(got) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert type(end) is nd.errors.OutOfRangeError


def test_blocked_batch_dequeue_at_epoch_end_reports_what_it_still_needs():
    # The consumer's dequeue_many(3) is blocked (the input still open) when the last
    # element arrives; it takes it, and when the input ends it reports the 2 it still
    # needed (facts section 2: "requested 2, current size 0"; element 9 is never
    # delivered).
    with nd.Graph().as_default():
        source = nd.FIFOQueue(20, [np.int32], shapes=[[]])
        fill = source.enqueue_many([np.arange(10, dtype=np.int32)])
        close = source.close()
        out = nd.train.batch([source.dequeue()], 3)
        with nd.Session() as sess, started(sess):
            sess.run(fill)
            got = [sess.run(out).tolist() for _ in range(3)]
            result = {}

            def consume():
                try:
                    result["value"] = sess.run(out)
                except nd.errors.OpError as e:
                    result["error"] = e
            t = threading.Thread(target=consume)
            t.start()
            time.sleep(0.3)
            assert t.is_alive()          # blocked: the input is still open
            sess.run(close)
            t.join(5)
            assert not t.is_alive()
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert type(result.get("error")) is nd.errors.OutOfRangeError, result
    assert re.match(_closed_message("FIFOQueue", "batch/fifo_queue", 2, 0),
                    _message(result["error"]))


def test_batch_epoch_end_with_smaller_final_batch():
    got, end = _range10(lambda x: nd.train.batch([x], 3, allow_smaller_final_batch=True))
    assert _lists(got) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert all(b.dtype == np.int32 for b in got)
    assert re.match(_closed_message("FIFOQueue", "batch/fifo_queue", 3, 0), _message(end))


def test_shuffle_batch_epoch_end_without_smaller_final_batch():
    got, end = _range10(lambda x: nd.train.shuffle_batch([x], 3, capacity=20,
                                                         min_after_dequeue=4, seed=1))
    assert [len(b) for b in got] == [3, 3, 3]
    flat = [v for b in _lists(got) for v in b]
    assert len(set(flat)) == 9 and set(flat) <= set(range(10))
    assert re.match(_closed_message("RandomShuffleQueue", "shuffle_batch/random_shuffle_queue",
                                    3, 1), _message(end))


def test_shuffle_batch_epoch_end_with_smaller_final_batch():
    got, end = _range10(lambda x: nd.train.shuffle_batch([x], 3, capacity=20, min_after_dequeue=4,
                                                         seed=1, allow_smaller_final_batch=True))
    assert [len(b) for b in got] == [3, 3, 3, 1]
    assert sorted(v for b in _lists(got) for v in b) == list(range(10))
    assert re.match(_closed_message("RandomShuffleQueue", "shuffle_batch/random_shuffle_queue",
                                    3, 0), _message(end))


def test_batch_join_two_producers_share_one_input():
    got, end = _range10(lambda x: nd.train.batch_join([[x], [x + 100]], 3,
                                                      allow_smaller_final_batch=True))
    flat = sorted(v % 100 for b in _lists(got) for v in b)
    assert flat == list(range(10))
    assert [len(b) for b in got] == [3, 3, 3, 1]
    assert re.match(_closed_message("FIFOQueue", "batch_join/fifo_queue", 3, 0), _message(end))


def test_shuffle_batch_join_epoch_end():
    got, end = _range10(lambda x: nd.train.shuffle_batch_join(
        [[x], [x + 100]], 3, capacity=20, min_after_dequeue=4, allow_smaller_final_batch=True))
    assert [len(b) for b in got] == [3, 3, 3, 1]
    assert sorted(v % 100 for b in _lists(got) for v in b) == list(range(10))
    assert re.match(_closed_message("RandomShuffleQueue",
                                    "shuffle_batch_join/random_shuffle_queue", 3, 0),
                    _message(end))


def test_maybe_batch_scalar_keep_input():
    got, end = _range10(lambda x: nd.train.maybe_batch([x, x * 10], x < 7, 3,
                                                       allow_smaller_final_batch=True))
    assert _lists(got) == [[[0, 1, 2], [0, 10, 20]], [[3, 4, 5], [30, 40, 50]], [[6], [60]]]
    assert re.match(_closed_message("FIFOQueue", "batch/fifo_queue", 3, 0), _message(end))
    got, _ = _range10(lambda x: nd.train.maybe_batch([x], x % 2 == 0, 2,
                                                     allow_smaller_final_batch=True))
    assert _lists(got) == [[0, 2], [4, 6], [8]]


# ----------------------------------------------------------- enqueue_many

def _first_batches(out, n):
    with nd.Session() as sess, started(sess):
        return [sess.run(out) for _ in range(n)]


def test_enqueue_many_rows_cycle():
    with nd.Graph().as_default():
        x = nd.constant(np.array([[1, 2], [3, 4], [5, 6]], np.int32))
        y = nd.constant(np.array([b"a", b"b", b"c"], dtype=object), dtype=nd.string)
        out = nd.train.batch([x, y], 2, enqueue_many=True)
        assert out[0].shape == nd.TensorShape([2, 2]) and out[1].shape == nd.TensorShape([2])
        got = _first_batches(out, 3)
    assert _lists(got) == [[[[1, 2], [3, 4]], [b"a", b"b"]], [[[5, 6], [1, 2]], [b"c", b"a"]],
                           [[[3, 4], [5, 6]], [b"b", b"c"]]]


def test_enqueue_many_unknown_first_dim_and_errors():
    with nd.Graph().as_default():
        p = nd.placeholder(np.int32, shape=[None, 2])
        out = nd.train.batch([p], 2, enqueue_many=True)
        assert out.shape == nd.TensorShape([2, 2])
        with pytest.raises(ValueError, match=r"^Shape \(\) must have rank at least 1$"):
            nd.train.batch([nd.constant(np.int32(1))], 2, enqueue_many=True)
        with pytest.raises(ValueError, match=r"^Dimensions 2 and 3 are not compatible$"):
            nd.train.batch([nd.constant(np.zeros(2, np.int32)), nd.constant(np.zeros(3, np.int32))],
                           2, enqueue_many=True)


# ---------------------------------------------------------- unknown shapes

@pytest.mark.parametrize("fn", ["batch", "shuffle_batch", "batch_join", "maybe_batch"])
def test_partially_known_shape_must_be_fully_defined(fn):
    with nd.Graph().as_default():
        p = nd.placeholder(np.int32, shape=[None])
        with pytest.raises(ValueError, match=re.escape(
                "All shapes must be fully defined: [TensorShape([None])]")):
            BATCHERS[fn]([p])
        out = BATCHERS[fn]([p], shapes=[[2]])
        assert out.shape == nd.TensorShape([4, 2])


def test_unknown_rank_cannot_infer_rank():
    with nd.Graph().as_default():
        p = nd.placeholder(np.int32, shape=None)
        for dynamic_pad in (False, True):
            with pytest.raises(ValueError, match="^Cannot infer Tensor's rank: "):
                nd.train.batch([p], 2, dynamic_pad=dynamic_pad)


def test_shuffle_batch_has_no_dynamic_pad():
    with nd.Graph().as_default():
        a, _ = _ab()
        with pytest.raises(TypeError, match="unexpected keyword argument 'dynamic_pad'"):
            nd.train.shuffle_batch([a], 2, 10, 2, dynamic_pad=True)


def test_dynamic_pad_pads_each_batch_to_its_longest():
    lengths = np.array([0, 1, 2, 3, 4, 0], np.int32)
    with nd.Graph().as_default():
        i = nd.train.range_input_producer(6, num_epochs=1, shuffle=False).dequeue()
        n = nd.constant(lengths)[i]
        v = nd.train.py_func(lambda k: np.arange(k, dtype=np.int32), [n], np.int32)
        v.set_shape([None])
        s = nd.train.py_func(lambda k: np.array([str(j).encode() for j in range(k)], object),
                             [n], nd.string)
        s.set_shape([None])
        f = nd.train.py_func(lambda k: np.arange(k, dtype=np.float32) + 0.5, [n], np.float32)
        f.set_shape([None])
        m = nd.train.py_func(lambda k: np.ones((k, 2), np.float32), [n], np.float32)
        m.set_shape([None, 2])
        out = nd.train.batch([v, s, f, m, n], 3, dynamic_pad=True)
        assert [t.shape for t in out] == [nd.TensorShape([3, None]), nd.TensorShape([3, None]),
                                          nd.TensorShape([3, None]),
                                          nd.TensorShape([3, None, 2]), nd.TensorShape([3])]
        with nd.Session() as sess, started(sess):
            got, end = drain(sess, out)
    assert len(got) == 2
    (v1, s1, f1, m1, n1), (v2, s2, f2, m2, n2) = got
    assert v1.tolist() == [[0, 0], [0, 0], [0, 1]]
    assert s1.tolist() == [[b"", b""], [b"0", b""], [b"0", b"1"]]
    assert f1.tolist() == [[0.0, 0.0], [0.5, 0.0], [0.5, 1.5]]
    assert m1.shape == (3, 2, 2) and m1[0].tolist() == [[0, 0], [0, 0]]
    assert n1.tolist() == [0, 1, 2]
    assert v2.tolist() == [[0, 1, 2, 0], [0, 1, 2, 3], [0, 0, 0, 0]]
    assert m2.shape == (3, 4, 2) and m2[2].tolist() == [[0, 0]] * 4
    assert type(end) is nd.errors.OutOfRangeError


# ------------------------------------------------------------- keep_input

def _constant_rows():
    return nd.constant(np.arange(6, dtype=np.int32))


def test_keep_input_vector_with_enqueue_many_filters_rows():
    keep = [True, False, True, True, False, True]
    with nd.Graph().as_default():
        out = nd.train.maybe_batch([_constant_rows()], nd.constant(np.array(keep)), 2,
                                   enqueue_many=True)
        got = _first_batches(out, 3)
    assert _lists(got) == [[0, 2], [3, 5], [0, 2]]
    with nd.Graph().as_default():
        out = nd.train.maybe_shuffle_batch([_constant_rows()], 2, 20, 2,
                                           nd.constant(np.array(keep)), enqueue_many=True, seed=2)
        got = _first_batches(out, 6)
    assert set(v for b in _lists(got) for v in b) == {0, 2, 3, 5}


def test_keep_input_python_true_with_enqueue_many_keeps_all_rows():
    with nd.Graph().as_default():
        out = nd.train.maybe_batch([_constant_rows()], True, 4, enqueue_many=True)
        got = _first_batches(out, 3)
    assert _lists(got) == [[0, 1, 2, 3], [4, 5, 0, 1], [2, 3, 4, 5]]


def test_keep_input_scalar_false_with_enqueue_many_enqueues_nothing():
    with nd.Graph().as_default():
        out = nd.train.maybe_batch([_constant_rows()], nd.constant(False), 2, enqueue_many=True)
        with nd.Session() as sess, started(sess):
            with pytest.raises(nd.errors.DeadlineExceededError):
                sess.run(out, options=nd.RunOptions(timeout_in_ms=300))


def test_keep_input_errors():
    with nd.Graph().as_default():
        x = _constant_rows()
        with pytest.raises(ValueError, match=re.escape(
                "`keep_input` cannot be a vector when `enqueue_many=False`.")):
            nd.train.maybe_batch([x], nd.constant(np.array([True] * 6)), 2)
        with pytest.raises(ValueError, match=re.escape("`keep_input` must be 0 or 1 dimensions.")):
            nd.train.maybe_batch([x], nd.constant(np.ones((2, 3), bool)), 2, enqueue_many=True)
        with pytest.raises(ValueError, match="Dimensions must be equal, but are 6 and 3"):
            nd.train.maybe_batch([x], nd.constant(np.array([True, False, True])), 2,
                                 enqueue_many=True)


# ----------------------------------------------------------- determinism

def _shuffled_once(seed):
    with nd.Graph().as_default() as g:
        x = nd.train.range_input_producer(30, num_epochs=1, shuffle=False).dequeue()
        out = nd.train.shuffle_batch([x, x * 2], 4, capacity=40, min_after_dequeue=10, seed=seed,
                                     allow_smaller_final_batch=True)
        runners = g.get_collection(nd.GraphKeys.QUEUE_RUNNERS)
        queue = [r.queue for r in runners if isinstance(r.queue, nd.RandomShuffleQueue)][0]
        closed = queue.is_closed()
        with nd.Session() as sess, started(sess):
            # Every element in the queue before the first dequeue: the order then
            # depends on the seed only.
            deadline = time.monotonic() + 10
            while not sess.run(closed):
                assert time.monotonic() < deadline
                time.sleep(0.01)
            got, _ = drain(sess, out)
    return [b.tolist() for b, _ in got], [(b * 2).tolist() == c.tolist() for b, c in got]


def test_shuffle_batch_seed_determinism():
    first, aligned = _shuffled_once(7)
    assert all(aligned)
    assert sorted(v for b in first for v in b) == list(range(30))
    assert first != [list(range(i, min(i + 4, 30))) for i in range(0, 30, 4)]
    again, _ = _shuffled_once(7)
    assert again == first
    other, _ = _shuffled_once(8)
    assert other != first


@pytest.mark.parametrize("fn", ["batch", "shuffle_batch"])
def test_num_threads_deliver_every_element_exactly_once(fn):
    with nd.Graph().as_default():
        x = nd.train.range_input_producer(300, num_epochs=1, shuffle=False).dequeue()
        if fn == "batch":
            out = nd.train.batch([x, -x], 7, num_threads=4, allow_smaller_final_batch=True)
        else:
            out = nd.train.shuffle_batch([x, -x], 7, 50, 10, num_threads=4,
                                         allow_smaller_final_batch=True)
        with nd.Session() as sess, started(sess) as state:
            assert len(state.threads) == 2 + 4 + 1   # producer + its closer, 4 + closer
            got, _ = drain(sess, out)
    values = [v for b, _ in got for v in b.tolist()]
    assert sorted(values) == list(range(300))
    assert all((a == -b).all() for a, b in got)


def test_batch_join_with_two_readers(tmp_path):
    files = []
    for f in range(3):
        p = tmp_path / f"part{f}.csv"
        p.write_text("".join(f"{f},{i}\n" for i in range(40)))
        files.append(str(p))
    with nd.Graph().as_default():
        fq = nd.train.string_input_producer(files, num_epochs=1, shuffle=False)
        lists = []
        for _ in range(2):
            key, value = nd.TextLineReader().read(fq)
            a, b = nd.io.decode_csv(value, [[np.int32(0)], [np.int32(0)]])
            lists.append([key, a, b])
        out = nd.train.batch_join(lists, 8, allow_smaller_final_batch=True)
        with nd.Session() as sess, started(sess):
            got, _ = drain(sess, out)
    rows = [(k, int(a), int(b)) for ks, aa, bb in got for k, a, b in zip(ks, aa, bb)]
    assert len(rows) == 120
    assert sorted((a, b) for _, a, b in rows) == [(f, i) for f in range(3) for i in range(40)]
    # The key of each row names its own file and line.
    assert all(k == f"{files[a]}:{b + 1}".encode() for k, a, b in rows)


# ------------------------------------------------------- TF1 differential

def _csv_batches(m, files, asfb, lower=True):
    """people.csv-style guide pipeline in TF1 (``m`` = tf.compat.v1) or nbdata."""
    is_tf = m is not nd
    with (m.Graph().as_default() if is_tf else nd.Graph().as_default()) as g:
        train = m.train
        fq = train.string_input_producer(files, num_epochs=2, shuffle=False)
        key, value = m.TextLineReader(skip_header_lines=1).read(fq)
        defaults = [[np.int32(0)], [""], [np.float32(-1.0)], ["none"]]
        if is_tf:
            cols = m.io.decode_csv(value, [[0], [""], [-1.0], ["none"]])
            feats = m.stack([m.cast(cols[0], m.float32), cols[2]])
        else:
            cols = nd.io.decode_csv(value, defaults)
            feats = np.stack([cols[0].astype(np.float32), cols[2]])
        out = train.batch([key, feats, cols[1], cols[3]], 3, num_threads=1,
                          allow_smaller_final_batch=asfb)
        sess = m.Session(graph=g) if is_tf else nd.Session(
            graph=g, config=nd.ConfigProto(lower_queue_pipelines=lower))
        with sess:
            sess.run(m.local_variables_initializer())
            coord = train.Coordinator()
            threads = train.start_queue_runners(sess, coord)
            got, end = [], None
            try:
                for _ in range(100):
                    try:
                        got.append([x.tolist() for x in sess.run(out)])
                    except (m.errors.OutOfRangeError if is_tf else nd.errors.OutOfRangeError) as e:
                        end = e
                        break
            finally:
                coord.request_stop()
                coord.join(threads, stop_grace_period_secs=5)
            assert not any(t.is_alive() for t in threads)
    text = _message(end)
    core = [line for line in text.split("\n") if "is closed and has insufficient" in line][0]
    return got, type(end).__name__, re.sub(r"'_\d+_", "'_N_", core)


@pytest.mark.parametrize("asfb", [False, True])
def test_csv_batch_same_as_tf1(tf1, asfb):
    files = [str(DATA / "people.csv"), str(DATA / "people.csv")]
    expected = _csv_batches(tf1, files, asfb)
    for lower in (True, False):
        batches, end_class, end_message = _csv_batches(nd, files, asfb, lower)
        assert batches == expected[0]
        assert end_class == expected[1] == "OutOfRangeError"
        if asfb:
            # Without asfb the message depends on whether the last dequeue_many came
            # before or after the queue was closed (racy in TF1 too).
            assert end_message == expected[2]
    # 20 rows in batches of 3: 6 full batches, and the 2 left over only with asfb.
    assert len(expected[0]) == (7 if asfb else 6)


def test_shuffle_batch_join_of_two_readers_with_one_column_csv(tmp_path, graph):
    """Issue 19: ``decode_csv`` with one column (``record_defaults=[np.array([0])]``)
    returns a list of one scalar tensor per record; a lowered reader pipeline kept the
    list as a [1] vector and the enqueue failed with "Expected [64], got [64,1]". TF1
    gives scalars per record and batches of shape [batch_size]."""
    path = tmp_path / "one_column.csv"
    path.write_text("".join(f"{v}\n" for v in range(1, 9)))
    q = nd.train.string_input_producer([str(path)], shuffle=False)
    columns = []
    for _ in range(2):
        _, line = nd.TextLineReader().read(q)
        cols = nd.io.decode_csv(line, record_defaults=[np.array([0])])
        assert cols[0].shape == ()
        columns.append(cols)
    batch = nd.train.shuffle_batch_join(columns, batch_size=16, capacity=64,
                                        min_after_dequeue=8, seed=1)
    assert batch.shape == (16,)
    with nd.Session() as sess:
        coord = nd.train.Coordinator()
        threads = nd.train.start_queue_runners(sess=sess, coord=coord)
        try:
            values = sess.run(batch)
        finally:
            coord.request_stop()
            coord.join(threads)
    assert values.shape == (16,) and values.dtype == np.int64
    assert set(values.tolist()) <= set(range(1, 9))
