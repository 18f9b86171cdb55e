"""from_generator: Python ints yielded for an unsigned dtype convert when they fit."""
import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import InvalidArgumentError


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_python_ints_take_the_unsigned_dtype(dtype):
    def gen():
        yield 42
        yield 7
    out = list(nd.Dataset.from_generator(gen, dtype).repeat(2).batch(2))
    assert [b.dtype for b in out] == [np.dtype(dtype)] * 2
    assert [b.tolist() for b in out] == [[42, 7], [42, 7]]


@pytest.mark.parametrize("value", [-1, 256])
def test_out_of_range_ints_are_refused(value):
    def gen():
        yield value
    with pytest.raises(InvalidArgumentError, match="expected dtype uint8"):
        list(nd.Dataset.from_generator(gen, np.uint8))


def test_a_list_as_a_dimension_is_a_type_error():
    with pytest.raises(TypeError, match="Dimension value must be integer or None"):
        nd.Dataset.from_generator(lambda: iter([[20]]), np.int64, output_shapes=[[1]])
    with pytest.raises(ValueError, match="invalid dimension -2"):
        nd.TensorSpec([-2], np.int64)
