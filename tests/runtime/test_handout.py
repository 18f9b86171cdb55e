"""How a compiled pipeline hands out its elements and sizes its pulls (issue 32).

An element is one ``next()`` of a C iterator over the current chunk (a column's own
iterator, zip over the columns, or map of a packing function), called straight from
``Iterator.__next__``: a ``for`` loop runs no other Python function of nbdata per
element, only per chunk. The top-level demand grows to about half a millisecond of work
per pull (:func:`nbdata.compiler.executor.next_demand`), and a fused stage whose steps
drop rows reads as many more rows as the share they kept says.
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

import nbdata as nd
from nbdata.compiler.executor import PULL_TARGET_S, next_demand

PACKAGE = os.path.dirname(os.path.abspath(nd.__file__))


def _nbdata_calls(iterable) -> tuple[int, int, list]:
    """(elements, calls of nbdata's Python functions other than Iterator.__next__ while
    iterating, the elements)."""
    it = iter(iterable)
    counted = {"calls": 0}

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code.co_filename.startswith(PACKAGE) and not (
                    code.co_name == "__next__" and code.co_filename.endswith("iterator.py")):
                counted["calls"] += 1

    out = []
    sys.setprofile(profile)
    try:
        for element in it:
            out.append(element)
    finally:
        sys.setprofile(None)
    return len(out), counted["calls"], out


@pytest.mark.parametrize("kind", ["batches", "rows", "tuples", "dicts"])
def test_a_for_loop_runs_nbdata_python_per_chunk_not_per_element(kind):
    x = np.arange(40_000, dtype=np.int64)
    if kind == "batches":
        ds = nd.Dataset.from_tensor_slices(x).map(lambda v: v * 2).batch(4)
        expected = [list(range(i * 2, i * 2 + 8, 2)) for i in range(0, 40_000, 4)]
    elif kind == "rows":
        ds = nd.Dataset.from_tensor_slices(x).map(lambda v: v * 2)
        expected = list(range(0, 80_000, 2))
    elif kind == "tuples":
        ds = nd.Dataset.from_tensor_slices((x, x + 1))
        expected = [(i, i + 1) for i in range(40_000)]
    else:
        ds = nd.Dataset.from_tensor_slices({"a": x, "b": x * 3})
        expected = [{"a": i, "b": i * 3} for i in range(40_000)]
    pipe = ds.compile()
    list(pipe)   # compiled, and its first chunks behind it
    n, calls, got = _nbdata_calls(pipe)
    assert n == len(expected)
    if kind == "batches":
        assert [b.tolist() for b in got] == expected
    elif kind == "rows":
        assert [int(v) for v in got] == expected
    elif kind == "tuples":
        assert [(int(a), int(b)) for a, b in got] == expected
    else:
        assert [{k: int(v) for k, v in e.items()} for e in got] == expected
    # Per chunk: a pull and its kernel call, a few dozen functions. Per element: none
    # (a dict element is packed by one function per element: the structure's packer).
    per_element = 1 if kind == "dicts" else 0
    assert calls <= per_element * n + 2_000, (calls, n)
    assert calls < n // 4 or kind == "dicts"


def test_threads_sharing_an_iterator_get_every_element_once():
    pipe = nd.Dataset.from_tensor_slices(np.arange(200_000, dtype=np.int64)).map(
        lambda v: v + 1).compile()
    it = iter(pipe)
    got: list[list] = [[] for _ in range(4)]

    def consume(out):
        for v in it:
            out.append(int(v))

    threads = [threading.Thread(target=consume, args=(out,)) for out in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(v for out in got for v in out) == list(range(1, 200_001))
    for out in got:   # each thread's elements in the pipeline's order
        assert out == sorted(out)


def test_save_mid_chunk_resumes_at_the_next_element():
    ds = nd.Dataset.from_tensor_slices((np.arange(5000), np.arange(5000) * 2)).batch(3)
    it = iter(ds)
    first = [next(it) for _ in range(700)]
    state = it.save()
    again = iter(ds)
    again.restore(state)
    rest = [(a.tolist(), b.tolist()) for a, b in again]
    whole = [(a.tolist(), b.tolist()) for a, b in ds]
    assert [(a.tolist(), b.tolist()) for a, b in first] + rest == whole


def test_next_demand_grows_to_the_target_work_per_pull():
    limit = 10_000
    # A slow pull (more than half the target): the demand doubles.
    assert next_demand(1, PULL_TARGET_S, limit) == 2
    assert next_demand(8, 1.0, limit) == 16
    # A cheap pull: as many rows as about the target's work, at most 64 times more.
    assert next_demand(1, PULL_TARGET_S / 10, limit) == 10
    assert next_demand(4, PULL_TARGET_S / 16, limit) == 64
    assert next_demand(1, 0.0, limit) == 64
    # Never beyond the limit, and never less than double.
    assert next_demand(500, 0.0, limit) == limit
    assert next_demand(3, PULL_TARGET_S * 0.49, limit) == 6


def test_a_filtered_first_batch_takes_few_kernel_calls():
    """Steps that drop rows: the stage reads as many more rows as the share they kept
    says, so a filter keeping one row in three fills its first batch in a few kernel
    calls (it took one call per missing third: 128, 86, 57, ... rows)."""
    x = np.arange(100_000, dtype=np.int64)
    pipe = nd.Dataset.from_tensor_slices(x).filter(lambda v: v % 3 == 0).batch(128).compile()
    it = iter(pipe)
    first = next(it)
    assert first.tolist() == list(range(0, 128 * 3, 3))
    (stage,) = [s for s in pipe.stats().stages if s.kernel_chunks]
    assert stage.kernel_chunks <= 3, stage.line()
    rest = [b for b in it]
    assert np.concatenate([first] + rest).tolist() == list(range(0, 100_000, 3))
