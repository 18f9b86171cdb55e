"""global_shuffle needs a non-empty finite length (InvalidArgumentError otherwise);
an assert_cardinality that promises more rows than its input has fails when global
shuffle reads a position past them (FailedPreconditionError)."""
import pytest

import nbdata as nd
from nbdata.errors import FailedPreconditionError, InvalidArgumentError


@pytest.mark.parametrize("make", [lambda: nd.Dataset.range(0),
                                  lambda: nd.Dataset.range(10).apply(
                                      nd.experimental.assert_cardinality(nd.INFINITE))])
def test_empty_or_infinite_is_invalid_argument(make):
    with pytest.raises(InvalidArgumentError, match="non-empty finite cardinality"):
        nd.experimental.global_shuffle(make())


def test_unknown_length_is_failed_precondition():
    with pytest.raises(FailedPreconditionError, match="random access"):
        nd.experimental.global_shuffle(nd.Dataset.range(5).filter(lambda x: x > 1))


def test_asserted_cardinality_larger_than_the_input():
    ds = nd.Dataset.range(10).apply(nd.experimental.assert_cardinality(100))
    with pytest.raises(FailedPreconditionError, match="expected to contain 100 elements"):
        list(nd.experimental.global_shuffle(ds, seed=3))
    ok = nd.Dataset.range(10).apply(nd.experimental.assert_cardinality(10))
    assert sorted(int(x) for x in nd.experimental.global_shuffle(ok, seed=3)) == list(range(10))




@pytest.mark.parametrize("skip, take", [(0, 0), (10, 5), (3, 0)])
def test_index_shuffle_of_no_rows_is_empty(skip, take):
    infos = [{"path": "unused", "num_elements": 10, "skip": skip, "take": take}]
    ds = nd.experimental.index_shuffle(infos, lambda _: nd.Dataset.range(10), seed=1)
    assert list(ds) == []
