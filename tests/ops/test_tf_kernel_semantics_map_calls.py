"""How ``map`` calls a function that runs in Python, as tf.data's arguments define it:
``synchronous`` (one call at a time, refused with ``num_parallel_calls``) and
``use_unbounded_threadpool`` (threads for waiting functions, outside the thread budget)."""
import threading
import time

import numpy as np
import pytest

import nbdata as nd


class Concurrency:
    """A Python-only function that records how many of its calls overlapped."""

    def __init__(self, sleep: float = 0.002):
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.sleep = sleep

    def __call__(self, x):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.sleep)
        with self.lock:
            self.now -= 1
        return x


SIG = nd.TensorSpec((), np.int64)


def test_synchronous_with_num_parallel_calls_is_refused():
    with pytest.raises(ValueError, match="map: synchronous=True .*num_parallel_calls=4"):
        nd.Dataset.range(3).map(lambda x: x, num_parallel_calls=4, synchronous=True)
    with pytest.raises(TypeError, match="map: synchronous must be a bool"):
        nd.Dataset.range(3).map(lambda x: x, synchronous="yes")
    # synchronous=False is TF's default and goes with any parallelism
    assert [int(v) for v in nd.Dataset.range(3).map(lambda x: x + 1, num_parallel_calls=2,
                                                    synchronous=False)] == [1, 2, 3]


def test_a_synchronous_map_is_not_fused_into_a_later_parallel_one():
    plain, sync = Concurrency(), Concurrency()
    expected = list(range(40))
    # Without synchronous, map fusion runs the first function on the second's 4 threads.
    ds = nd.Dataset.range(40).map(plain, output_signature=SIG)
    assert [int(v) for v in ds.map(lambda x: x, num_parallel_calls=4)] == expected
    assert plain.most > 1
    ds = nd.Dataset.range(40).map(sync, output_signature=SIG, synchronous=True)
    assert [int(v) for v in ds.map(lambda x: x, num_parallel_calls=4)] == expected
    assert sync.most == 1


def test_unbounded_threadpool_autotunes_beyond_the_thread_budget():
    o = nd.Options()
    o.threading.private_threadpool_size = 2

    def parallelism(unbounded):
        # calls that sleep 10 ms: each added thread raises the rate by a clear margin
        # even on a machine whose cores are busy with other work
        pipe = nd.Dataset.range(400).map(Concurrency(0.01), output_signature=SIG,
                                         num_parallel_calls=nd.AUTOTUNE,
                                         use_unbounded_threadpool=unbounded).with_options(o).compile()
        assert [int(v) for v in pipe] == list(range(400))
        (chosen,) = [s.chosen["parallelism"] for s in pipe.stats().stages if "parallelism" in s.chosen]
        return chosen

    assert parallelism(False) <= 2
    assert parallelism(True) > 2      # sleeping calls: each added thread raises the rate


def test_unbounded_threads_leave_the_budget_to_kernels():
    from nbdata.kernels.threads import ThreadBudget
    from nbdata.ops.runtime import PerElement
    o = nd.Options()
    o.threading.private_threadpool_size = 2
    seen = []

    class Ctx:   # only what PerElement's calls touch
        budget = ThreadBudget(o)

    def call(x):
        seen.append(Ctx.budget.busy)
        return x

    for in_budget in (True, False):
        runner = PerElement.__new__(PerElement)
        runner.ctx, runner.call, runner.in_budget = Ctx, call, in_budget
        runner.cancelled = threading.Event()
        runner._run((1,))
    assert seen == [1, 0]


def test_deterministic_must_be_a_bool_or_none():
    for build in (lambda: nd.Dataset.range(3).map(lambda x: x, deterministic="no"),
                  lambda: nd.Dataset.range(3).batch(2, deterministic=1),
                  lambda: nd.Dataset.range(3).interleave(nd.Dataset.from_tensors, deterministic=[])):
        with pytest.raises(TypeError, match="deterministic must be a bool"):
            build()
    ds = nd.Dataset.range(6).map(lambda x: x + 1, num_parallel_calls=2, deterministic=False)
    assert sorted(int(v) for v in ds) == [1, 2, 3, 4, 5, 6]
