"""pad_to_cardinality: nested dict elements padded with zeros/empty strings, and the
errors for non-dict elements and unknown, infinite or too large cardinalities."""
import numpy as np
import pytest

import nbdata as nd
from nbdata.experimental import pad_to_cardinality


def test_nested_components_pad_with_zeros_and_empty_strings():
    ds = nd.Dataset.from_tensor_slices(
        {"a": np.arange(2), "b": (np.array([b"x", b"y"], dtype=object), np.array([-1, -2]))})
    out = list(ds.apply(pad_to_cardinality(3)))
    assert [int(e["a"]) for e in out] == [0, 1, 0]
    assert [bytes(e["b"][0]) for e in out] == [b"x", b"y", b""]
    assert [int(e["b"][1]) for e in out] == [-1, -2, 0]
    assert [bool(e["valid"]) for e in out] == [True, True, False]


def test_non_dict_elements_are_a_value_error():
    with pytest.raises(ValueError, match="requires its input dataset to be a dictionary"):
        nd.Dataset.from_tensors(1).apply(pad_to_cardinality(5))


@pytest.mark.parametrize("make, n", [
    (lambda: nd.Dataset.from_tensors({"a": 1}).filter(lambda x: True), -2),
    (lambda: nd.Dataset.from_tensors({"a": 1}).repeat(), -1),
])
def test_unknown_or_infinite_cardinality_is_refused(make, n):
    with pytest.raises(ValueError, match=f"known cardinalty, but has cardinality {n}"):
        make().apply(pad_to_cardinality(5))


def test_more_elements_than_the_target():
    ds = nd.Dataset.from_tensors({"a": 1}).repeat(5)
    with pytest.raises(ValueError, match=r"target cardinality \(3\), but has cardinality 5"):
        ds.apply(pad_to_cardinality(3))
