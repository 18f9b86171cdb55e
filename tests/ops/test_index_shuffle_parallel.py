"""index_shuffle(num_parallel_calls=): a chunk's positions are gathered in that many
parts at once on nbdata's shared pool, joined in order: the elements and their order
are those of one call; the value is checked as tf.data's (AUTOTUNE or >= 1)."""

import concurrent.futures
import threading

import numpy as np
import pytest

import nbdata as nd
import nbdata.ops.index_gather as index_gather
from nbdata.kernels import threads

INFOS = [{"path": "a", "num_elements": 3000},
         {"path": "b", "num_elements": 3000, "skip": 100, "take": 2500},
         {"path": "c", "num_elements": 1000, "skip": -1}]
WORDS = np.array([b"w%d" % i for i in range(7000)], dtype=object)


def reader(paths):
    assert [bytes(p) for p in paths] == [b"a", b"b", b"c"]
    return nd.Dataset.from_tensor_slices((np.arange(7000) * 3, WORDS,
                                          np.arange(14000, dtype=np.float32).reshape(7000, 2)))


def read(calls, **kw):
    ds = nd.experimental.index_shuffle(INFOS, reader, seed=11, num_parallel_calls=calls, **kw)
    return [(int(a), bytes(b), c.tolist()) for a, b, c in ds]


def test_same_elements_and_order_whatever_the_calls(monkeypatch):
    one = read(1)
    assert len(one) == 5500
    assert sorted(a // 3 for a, _, _ in one) == list(range(3000)) + list(range(3100, 5600))
    seen = set()
    submit = threads.shared_pool().submit

    def watch(fn, *args, **kwargs):
        seen.add(fn.__qualname__)
        return submit(fn, *args, **kwargs)

    monkeypatch.setattr(threads.shared_pool(), "submit", watch)
    assert read(4) == one
    assert read(nd.AUTOTUNE) == one or threads.core_count() == 1
    assert read(None) == one
    assert any("gather" in name for name in seen)      # the parts ran on the shared pool
    monkeypatch.setattr(index_gather, "MIN_ROWS_PER_CALL", 1)   # every chunk split
    assert read(4) == one
    assert read(64) == one


def test_restore_with_another_count():
    ds4 = nd.experimental.index_shuffle(INFOS, reader, seed=3, num_parallel_calls=4)
    ds1 = nd.experimental.index_shuffle(INFOS, reader, seed=3, num_parallel_calls=1)
    it = iter(ds4)
    first = [int(next(it)[0]) for _ in range(1234)]
    state = it.save()
    again = iter(ds1)
    again.restore(state)
    assert first + [int(e[0]) for e in again] == [int(e[0]) for e in ds1]


def test_invalid_num_parallel_calls():
    for bad in (0, -2, -5):
        with pytest.raises(nd.errors.InvalidArgumentError, match="num_parallel_calls"):
            nd.experimental.index_shuffle(INFOS, reader, num_parallel_calls=bad)
    for bad in (1.5, "4", True):
        with pytest.raises(TypeError, match="num_parallel_calls"):
            nd.experimental.index_shuffle(INFOS, reader, num_parallel_calls=bad)


def test_shared_pool_tasks_never_wait_for_queued_tasks():
    """A task of the shared pool that submits to the pool (a gather whose source splits
    its own work there) runs that work itself: every pool thread waiting on work queued
    behind it cannot happen."""
    pool = threads.shared_pool()
    n = threads.core_count() * 2 + 1
    gate = threading.Barrier(min(n, threads.core_count()), timeout=10)

    def outer(i):
        if i < gate.parties:
            gate.wait()   # every pool thread busy in an outer task at once
        inner = [pool.submit(lambda j=j: (threading.current_thread().name, i * 10 + j))
                 for j in range(3)]
        return [f.result(timeout=10)[1] for f in inner]

    futures = [pool.submit(outer, i) for i in range(n)]
    done = [f.result(timeout=30) for f in concurrent.futures.as_completed(futures)]
    assert sorted(x for d in done for x in d) == sorted(i * 10 + j for i in range(n)
                                                       for j in range(3))
    assert not threads.in_shared_pool()
