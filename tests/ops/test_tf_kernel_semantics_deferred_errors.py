"""Making an iterator runs no user function's error into the caller: when a function
whose output spec comes from its first elements fails on every one of them, ``iter()``
succeeds and the function's error comes at the first ``next`` (tf.data's order)."""
import pytest

import nbdata as nd


def _fails(x):
    raise StopIteration()   # a Python-only function: its spec comes from real elements


def test_the_error_comes_at_next_not_at_iter():
    ds = nd.Dataset.from_tensors(0).map(_fails)
    it = iter(ds)   # no error here
    with pytest.raises(nd.errors.InvalidArgumentError, match="map: function _fails raised StopIteration"):
        next(it)
    with pytest.raises(nd.errors.InvalidArgumentError, match="raised StopIteration"):
        it.get_next()   # the pipeline still cannot be built


def test_a_function_that_recovers_goes_on_after_the_error():
    calls = []

    def flaky(x):
        calls.append(int(x))
        if len(calls) == 1:
            raise KeyError("first call")
        return x * 2

    it = iter(nd.Dataset.from_tensors(21).map(flaky))
    with pytest.raises(nd.errors.InvalidArgumentError, match="KeyError"):
        next(it)
    assert [int(v) for v in it] == [42]


def test_errors_of_building_the_pipeline_itself_still_raise_at_iter():
    ds = nd.Dataset.range(0).map(_fails)   # no element to take the spec from
    with pytest.raises(nd.errors.InvalidArgumentError, match="the input has none"):
        iter(ds)


def test_as_numpy_iterator_defers_the_error_too():
    calls = []

    def flaky(x):
        calls.append(int(x))   # int() of a symbolic value: recorded it is not
        if len(calls) == 1:
            raise KeyError("first call")
        return x + 1

    it = nd.Dataset.from_tensors(1).map(flaky).as_numpy_iterator()
    with pytest.raises(nd.errors.InvalidArgumentError, match="KeyError"):
        next(it)
    assert [int(v) for v in it] == [2]
