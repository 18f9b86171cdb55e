"""``reduce(initial_state, reduce_func, name=None)``: tf.data's ``name`` argument labels
the op in its errors."""
import pytest

import nbdata as nd


def test_reduce_takes_a_name_that_labels_its_errors():
    assert int(nd.Dataset.from_tensors(42).reduce(0, lambda state, value: value, name="last")) == 42
    with pytest.raises(nd.errors.InvalidArgumentError, match=r"^reduce\[total\]: function raised"):
        nd.Dataset.range(3).reduce(0, lambda state, value: state + value["x"], name="total")
    with pytest.raises(TypeError, match="reduce: name must be a string"):
        nd.Dataset.range(3).reduce(0, lambda state, value: state, name=7)
