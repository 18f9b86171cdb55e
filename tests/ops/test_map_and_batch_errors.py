"""map_and_batch: an element's error fails its whole batch (the batch's other input
elements are consumed with it) and iteration goes on with the next batch; a plain
map().batch() keeps failing per element."""
import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import InvalidArgumentError


def _raising(threshold):
    def f(i):
        if i >= threshold:
            raise StopIteration()
        return i
    return f


def _drain(ds):
    out, it = [], iter(ds)
    while True:
        try:
            out.append(next(it).tolist())
        except StopIteration:
            return out
        except InvalidArgumentError:
            out.append("error")


@pytest.mark.parametrize("threshold", [5, 25, 29])
def test_error_fails_the_whole_batch(threshold):
    ds = nd.Dataset.range(30).apply(nd.experimental.map_and_batch(_raising(threshold), 10))
    full = threshold // 10
    expected = [list(range(10 * i, 10 * i + 10)) for i in range(full)] + ["error"] * (3 - full)
    assert _drain(ds) == expected


def test_ignore_errors_drops_the_failed_batches_only():
    def g(i):
        if i in (12, 13):
            raise ValueError("bad row")
        return i
    ds = nd.Dataset.range(30).apply(nd.experimental.map_and_batch(g, 10)).ignore_errors()
    assert [b.tolist() for b in ds] == [list(range(10)), list(range(20, 30))]


def test_map_then_batch_fails_per_element():
    ds = nd.Dataset.range(30).map(_raising(25)).batch(10)
    assert _drain(ds) == [list(range(10)), list(range(10, 20)), "error", "error", "error",
                          "error", "error"]


def test_restore_after_a_failed_batch():
    def f(i):
        if i == 13:
            raise ValueError("row 13")
        return i
    make = lambda: nd.Dataset.range(40).apply(nd.experimental.map_and_batch(f, 10))  # noqa: E731
    it = iter(make())
    assert next(it).tolist() == list(range(10))
    with pytest.raises(InvalidArgumentError):
        next(it)
    state = it.save()
    it2 = iter(make())
    it2.restore(state)
    assert [b.tolist() for b in it2] == [list(range(20, 30)), list(range(30, 40))]
