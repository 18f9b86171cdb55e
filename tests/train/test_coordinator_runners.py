"""nd.train.Coordinator and nd.train.QueueRunner: stopping threads together, reporting
their exceptions, and shutting input pipelines down without hangs or lost elements.

Expected behaviour is TF1's (``tf.compat.v1.train``), measured with TensorFlow 2.21.
Every thread is joined with a timeout and the tests assert it ended.
"""

import sys
import threading
import time

import numpy as np
import pytest

import nbdata as nd
from queue_helpers import core_message, session, without_counts

OutOfRange = nd.errors.OutOfRangeError


def start(target, name=None):
    t = threading.Thread(target=target, name=name, daemon=True)
    t.start()
    return t


def assert_ended(threads, timeout=5.0):
    end = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    assert not alive, f"threads still running: {alive}"


def raised(exc):
    """``exc`` raised and caught, so that it has a traceback (as request_stop expects)."""
    try:
        raise exc
    except BaseException as e:  # noqa: BLE001
        return e


# ------------------------------------------------------------ Coordinator

def test_request_stop_and_should_stop():
    coord = nd.train.Coordinator()
    assert not coord.should_stop()
    start_t = time.monotonic()
    assert coord.wait_for_stop(0.1) is False
    assert time.monotonic() - start_t >= 0.09
    coord.request_stop()
    assert coord.should_stop()
    assert coord.wait_for_stop(0.1) is True
    assert coord.wait_for_stop() is True
    coord.join([])            # a stop without an exception: join returns
    assert coord.joined


def test_wait_for_stop_wakes_on_request_from_another_thread():
    coord = nd.train.Coordinator()
    t = start(lambda: (time.sleep(0.1), coord.request_stop()))
    start_t = time.monotonic()
    assert coord.wait_for_stop(5) is True
    assert time.monotonic() - start_t < 2
    assert_ended([t])


def test_join_reraises_the_reported_exception():
    coord = nd.train.Coordinator()
    try:
        raise ValueError("first")
    except ValueError as e:
        first = e
        coord.request_stop(e)
    try:
        raise KeyError("second")
    except KeyError as e:
        coord.request_stop(e)
    assert coord.should_stop()
    with pytest.raises(ValueError, match="first") as info:
        coord.join([])
    assert info.value is first
    assert coord.joined
    with pytest.raises(ValueError, match="first"):      # again
        coord.join([])
    with pytest.raises(ValueError, match="first"):
        coord.raise_requested_exception()
    coord.clear_stop()
    assert not coord.should_stop()
    coord.join([])
    coord.raise_requested_exception()     # nothing recorded any more


def test_request_stop_accepts_exc_info():
    coord = nd.train.Coordinator()
    try:
        raise RuntimeError("as tuple")
    except RuntimeError:
        coord.request_stop(sys.exc_info())
    with pytest.raises(RuntimeError, match="as tuple"):
        coord.join([])


def test_out_of_range_is_a_clean_stop():
    coord = nd.train.Coordinator()
    coord.request_stop(raised(OutOfRange("end of input")))
    assert coord.should_stop()
    coord.join([])
    strict = nd.train.Coordinator(clean_stop_exception_types=())
    strict.request_stop(raised(OutOfRange("end of input")))
    with pytest.raises(OutOfRange, match="end of input"):
        strict.join([])


def test_exception_after_a_clean_stop_is_not_reported():
    """TF1 records an exception only with the request that stops the coordinator: one
    reported after request_stop() (e.g. a runner cancelled by the stop) is dropped."""
    coord = nd.train.Coordinator()
    coord.request_stop()
    coord.request_stop(raised(ValueError("late")))
    coord.join([])


def test_stop_on_exception():
    coord = nd.train.Coordinator()
    with coord.stop_on_exception():
        raise OutOfRange("done")
    assert coord.should_stop()
    coord.join([])
    coord = nd.train.Coordinator()
    with coord.stop_on_exception():
        raise KeyError("k")
    assert coord.should_stop()
    with pytest.raises(KeyError, match="'k'"):
        coord.join([])
    coord = nd.train.Coordinator()
    with coord.stop_on_exception():
        pass
    assert not coord.should_stop()


def test_worker_threads_with_stop_on_exception():
    coord = nd.train.Coordinator()
    steps = []

    def worker(i):
        with coord.stop_on_exception():
            while not coord.should_stop():
                steps.append(i)
                if len(steps) > 20 and i == 1:
                    raise ValueError("worker 1 failed")
                time.sleep(0.005)
    threads = [start(lambda i=i: worker(i), f"w{i}") for i in range(3)]
    with pytest.raises(ValueError, match="worker 1 failed"):
        coord.join(threads, stop_grace_period_secs=5)
    assert_ended(threads, 0.1)


def test_join_waits_for_threads_without_a_stop():
    coord = nd.train.Coordinator()
    done = []
    threads = [start(lambda i=i: (time.sleep(0.1 + 0.05 * i), done.append(i))) for i in range(2)]
    coord.join(threads)
    assert sorted(done) == [0, 1]
    assert not coord.should_stop()


def test_join_also_joins_registered_threads():
    coord = nd.train.Coordinator()
    done = []
    t = threading.Thread(target=lambda: (time.sleep(0.15), done.append(1)), daemon=True)
    coord.register_thread(t)
    t.start()
    coord.join()
    assert done == [1] and not t.is_alive()


def test_join_names_stragglers_after_the_grace_period():
    coord = nd.train.Coordinator()
    release = threading.Event()
    threads = [start(lambda: release.wait(10), name) for name in ("t1", "t2")]
    quick = start(lambda: None, "quick")
    try:
        coord.request_stop()
        start_t = time.monotonic()
        with pytest.raises(RuntimeError) as info:
            coord.join(threads + [quick], stop_grace_period_secs=0.2)
        elapsed = time.monotonic() - start_t
        assert 0.15 <= elapsed < 2
        message = str(info.value)
        prefix = "Coordinator stopped with threads still running: "
        assert message.startswith(prefix)
        assert sorted(message[len(prefix):].split(" ")) == ["t1", "t2"]
        coord.clear_stop()
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=0.1, ignore_live_threads=True)
    finally:
        release.set()
    assert_ended(threads)


def _stop_with(coord, exc):
    """request_stop(exc) from the handler of exc (where TF1 requires it)."""
    try:
        raise exc
    except BaseException as e:  # noqa: BLE001
        coord.request_stop(e)


def test_coordinator_sequence_matches_tensorflow(tf):
    """request_stop/join/clear_stop sequences give the same outcome as TF1's Coordinator."""
    def outcome(train, out_of_range):
        out = []
        for script in range(5):
            c = train.Coordinator()
            if script == 0:
                c.request_stop()
                _stop_with(c, ValueError("late"))
            elif script == 1:
                _stop_with(c, ValueError("first"))
                _stop_with(c, KeyError("second"))
            elif script == 2:
                _stop_with(c, out_of_range)
            elif script == 3:
                _stop_with(c, TypeError("t"))
                try:
                    c.join([])
                except TypeError:
                    pass
                c.clear_stop()
            else:
                _stop_with(c, out_of_range)
                _stop_with(c, KeyError("after a clean stop"))
            try:
                c.join([])
                out.append((script, None, c.should_stop(), c.joined))
            except Exception as e:  # noqa: BLE001
                out.append((script, type(e).__name__, c.should_stop(), c.joined))
        return out
    expected = outcome(tf.train, tf.errors.OutOfRangeError(None, None, "end"))
    assert outcome(nd.train, OutOfRange("end")) == expected
    assert [e[1] for e in expected] == [None, "ValueError", None, None, None]


# ------------------------------------------------------------ QueueRunner

def test_create_threads_counts_and_names(graph):
    q = nd.FIFOQueue(4, np.int64, shapes=[[]])
    ops = [q.enqueue(np.int64(1)), q.enqueue(np.int64(2))]
    qr = nd.train.QueueRunner(q, ops)
    sess = session(graph)
    coord = nd.train.Coordinator()
    threads = qr.create_threads(sess, coord=coord, start=False)
    assert len(threads) == 3       # one per enqueue op + the close-on-stop thread
    assert not any(t.is_alive() for t in threads)
    assert [t.name for t in threads] == [
        "QueueRunnerThread-fifo_queue-fifo_queue_enqueue",
        "QueueRunnerThread-fifo_queue-fifo_queue_enqueue_1",
        "QueueRunnerThread-fifo_queue-close_on_stop"]
    assert qr.create_threads(sess, coord=coord) == []     # already running in this session
    other = session(graph)
    plain = qr.create_threads(other, start=False)
    assert len(plain) == 2          # no coordinator: no close-on-stop thread
    sess.close()
    other.close()


def test_start_queue_runners_starts_daemon_threads(graph):
    q = nd.train.range_input_producer(5, shuffle=False, capacity=4)
    x = q.dequeue()
    b = nd.train.batch([x], batch_size=2, capacity=4)
    runners = graph.get_collection(nd.GraphKeys.QUEUE_RUNNERS)
    assert [r.name for r in runners] == ["input_producer", "batch/fifo_queue"]
    with session(graph) as sess:
        coord = nd.train.Coordinator()
        threads = nd.train.start_queue_runners(sess, coord)
        assert len(threads) == 4
        assert all(t.daemon and t.is_alive() for t in threads)
        assert nd.train.start_queue_runners(sess, coord) == []
        assert sess.run(b).tolist() == [0, 1]
        assert sess.run(b).tolist() == [2, 3]
        assert sess.run(b).tolist() == [4, 0]
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=3)
    assert_ended(threads, 0.1)


def test_start_queue_runners_uses_the_default_session(graph):
    q = nd.train.range_input_producer(3, shuffle=False, capacity=4)
    x = q.dequeue()
    with pytest.raises(ValueError):
        nd.train.start_queue_runners()
    with session(graph) as sess:
        coord = nd.train.Coordinator()
        threads = nd.train.start_queue_runners(coord=coord)
        assert len(threads) == 2
        assert [int(sess.run(x)) for _ in range(4)] == [0, 1, 2, 0]
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=3)


def _failing_pipeline():
    i = nd.train.range_input_producer(10, shuffle=False, capacity=4).dequeue()

    def check(v):
        if v == 3:
            raise ValueError("boom at 3")
        return v
    y = nd.train.py_func(check, [i], np.int32)
    y.set_shape([])
    return nd.train.batch([y], batch_size=2, capacity=4)


def test_runner_exception_goes_to_the_coordinator(graph):
    b = _failing_pipeline()
    with session(graph) as sess:
        coord = nd.train.Coordinator()
        threads = nd.train.start_queue_runners(sess, coord)
        assert sess.run(b).tolist() == [0, 1]
        with pytest.raises(OutOfRange):
            sess.run(b)
        assert coord.wait_for_stop(3)
        with pytest.raises(nd.errors.InvalidArgumentError) as info:
            coord.join(threads, stop_grace_period_secs=3)
        assert "ValueError: boom at 3" in info.value.message
    assert_ended(threads, 0.1)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_runner_exception_without_coordinator(graph):
    q = nd.FIFOQueue(4, np.int64, shapes=[[]])

    def fail():
        raise ValueError("no coord")
    op = q.enqueue(nd.train.py_func(fail, [], np.int64))
    qr = nd.train.QueueRunner(q, [op])
    with session(graph) as sess:
        threads = qr.create_threads(sess, start=True)
        assert len(threads) == 1
        assert_ended(threads)
        assert len(qr.exceptions_raised) == 1
        assert isinstance(qr.exceptions_raised[0], nd.errors.InvalidArgumentError)
        assert "no coord" in str(qr.exceptions_raised[0])


def test_runner_closes_the_queue_when_its_input_ends(graph):
    """OutOfRangeError in the enqueue op (the input ended) closes the queue after the last
    thread; a consumer drains it and sees OutOfRangeError; join does not raise."""
    src = nd.FIFOQueue(10, np.int64, shapes=[[]])
    fill, close_src = src.enqueue_many([np.arange(5)]), src.close()
    dst = nd.FIFOQueue(3, np.int64, shapes=[[]])
    qr = nd.train.QueueRunner(dst, [dst.enqueue(src.dequeue())] * 2)
    nd.train.add_queue_runner(qr)
    out = dst.dequeue()
    with session(graph) as sess:
        sess.run(fill)
        sess.run(close_src)
        coord = nd.train.Coordinator()
        threads = nd.train.start_queue_runners(sess, coord)
        assert len(threads) == 3
        got = []
        with pytest.raises(OutOfRange):
            while True:
                got.append(int(sess.run(out)))
        assert sorted(got) == [0, 1, 2, 3, 4]
        assert sess.run(dst.is_closed())
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=3)
    assert_ended(threads, 0.1)


def test_dequeue_without_started_runners_fails(graph):
    b = nd.train.batch([nd.train.range_input_producer(4, shuffle=False).dequeue()], batch_size=2)
    with session(graph, timeout_ms=0, queue_runner_start_timeout_in_ms=300) as sess:
        start_t = time.monotonic()
        with pytest.raises(nd.errors.FailedPreconditionError, match="queue runner"):
            sess.run(b)
        assert time.monotonic() - start_t < 3


# ------------------------------------------------------------ shutdown

def _counter(lock, counter):
    def next_value():
        with lock:
            counter[0] += 1
            return np.int64(counter[0] - 1)
    return next_value


def test_stop_with_blocked_runners_and_consumer_loses_nothing(graph):
    """Runner threads blocked on a full queue and a consumer blocked on an empty one:
    request_stop makes join return at once, the consumer's dequeue fails, and every
    element enqueued before the stop is still there (dequeued + left in the queue)."""
    lock, counter = threading.Lock(), [0]
    full = nd.FIFOQueue(4, np.int64, shapes=[[]])
    value = nd.train.py_func(_counter(lock, counter), [], np.int64)
    nd.train.add_queue_runner(nd.train.QueueRunner(full, [full.enqueue(value)] * 2))

    stop_flag = threading.Event()

    def slow_input():
        stop_flag.wait(10)
        raise StopIteration      # an input that produces nothing until the stop
    empty = nd.FIFOQueue(4, np.int64, shapes=[[]])
    nd.train.add_queue_runner(nd.train.QueueRunner(
        empty, [empty.enqueue(nd.train.py_func(slow_input, [], np.int64))]))
    take, rest, size = full.dequeue(), full.dequeue_up_to(100), full.size()
    wait_empty = empty.dequeue()

    with session(graph, timeout_ms=0) as sess:
        coord = nd.train.Coordinator()
        threads = nd.train.start_queue_runners(sess, coord)
        assert len(threads) == 5
        got = [int(sess.run(take)) for _ in range(6)]
        deadline = time.monotonic() + 3
        while sess.run(size) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sess.run(size) == 4               # the runners are blocked on the full queue
        consumer_result = []

        def consume():
            try:
                sess.run(wait_empty)
                consumer_result.append("value")
            except Exception as e:  # noqa: BLE001
                consumer_result.append(e)
        consumer = start(consume, "consumer")
        time.sleep(0.2)
        assert consumer.is_alive()
        coord.request_stop()
        stop_flag.set()
        start_t = time.monotonic()
        coord.join(threads, stop_grace_period_secs=5)
        assert time.monotonic() - start_t < 3
        assert_ended([consumer], 3)
        assert isinstance(consumer_result[0], OutOfRange)
        left = int(sess.run(size))
        drained = sess.run(rest).tolist() if left else []
    enqueued = got + drained
    assert len(enqueued) == len(set(enqueued)) == 6 + left
    assert left == 4
    # every value made before the stop is somewhere, except the (at most 2) values whose
    # blocked enqueues were cancelled by the stop
    missing = set(range(counter[0])) - set(enqueued)
    assert len(missing) <= 2


def test_session_close_mid_run(graph):
    x = nd.train.range_input_producer(1000, shuffle=False, capacity=8).dequeue()
    b = nd.train.batch([x * 2], batch_size=4, capacity=8, num_threads=2)
    with session(graph, timeout_ms=0) as sess:
        coord = nd.train.Coordinator()
        threads = nd.train.start_queue_runners(sess, coord)
        errors = []
        batches = []

        def consume():
            try:
                while True:
                    batches.append(sess.run(b))
                    time.sleep(0.01)
            except Exception as e:  # noqa: BLE001
                errors.append(e)
        consumer = start(consume, "consumer")
        deadline = time.monotonic() + 3
        while len(batches) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(batches) >= 3
        sess.close()
        assert_ended([consumer], 3)
        assert isinstance(errors[0], (nd.errors.CancelledError, RuntimeError))
        # The producer's runner counts only OutOfRangeError as the end of its input (as
        # input_producer's does in TF1): the cancelled enqueue reaches the coordinator,
        # which stops on it. (Asking it to stop first would race with that report: as
        # in TF1, an exception reported after a stop request is not raised by join.)
        deadline = time.monotonic() + 3
        while not coord.should_stop() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert coord.should_stop()
        coord.request_stop()
        start_t = time.monotonic()
        with pytest.raises(nd.errors.CancelledError):
            coord.join(threads, stop_grace_period_secs=3)
        assert time.monotonic() - start_t < 3
    assert_ended(threads, 0.1)
    assert all(np.all(v % 2 == 0) and v.shape == (4,) for v in batches)


# ------------------------------------------------------------ against TensorFlow

def _pipeline_run(m, graph_cls, asfb, failing=False):
    """range_input_producer -> (py_func) -> batch(3): the batches, their static shape and
    how the epoch ends, run through queue runners."""
    with graph_cls().as_default() as g:
        x = m.train.range_input_producer(10, num_epochs=1, shuffle=False, capacity=4).dequeue()
        if failing:
            def check(v):
                if v == 3:
                    raise ValueError("boom at 3")
                return v
            x = m.py_func(check, [x], np.int32)
            x.set_shape([])
        b = m.train.batch([x * 2], batch_size=3 if not failing else 2, capacity=4,
                          allow_smaller_final_batch=asfb)
        out = {"shape": b.shape.as_list(), "dtype": np.dtype(getattr(b.dtype, "as_numpy_dtype",
                                                                      b.dtype)).name}
        sess = m.Session(graph=g)
        try:
            sess.run(m.local_variables_initializer())
            coord = m.train.Coordinator()
            threads = m.train.start_queue_runners(sess, coord)
            out["n_threads"] = len(threads)
            batches = []
            for _ in range(10):
                try:
                    batches.append(sess.run(b).tolist())
                except Exception as e:  # noqa: BLE001
                    out["end"] = (type(e).__name__, without_counts(core_message(e)))
                    break
            out["batches"] = batches
            coord.request_stop()
            try:
                coord.join(threads, stop_grace_period_secs=5)
                out["join"] = None
            except Exception as e:  # noqa: BLE001
                out["join"] = type(e).__name__
        finally:
            sess.close()
    return out


@pytest.mark.parametrize("asfb", [False, True])
def test_batch_pipeline_matches_tensorflow(tf, asfb):
    expected = _pipeline_run(tf, tf.Graph, asfb)
    got = _pipeline_run(nd, nd.Graph, asfb)
    assert got == expected
    assert expected["batches"][:3] == [[0, 2, 4], [6, 8, 10], [12, 14, 16]]
    assert expected["end"][0] == "OutOfRangeError"


def test_failing_pipeline_matches_tensorflow(tf):
    expected = _pipeline_run(tf, tf.Graph, False, failing=True)
    got = _pipeline_run(nd, nd.Graph, False, failing=True)
    assert got == expected
    assert expected["batches"] == [[0, 2]] and expected["join"] == "InvalidArgumentError"
