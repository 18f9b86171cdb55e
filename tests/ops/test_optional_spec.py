"""nd.experimental.OptionalSpec: the spec of an Optional's value, nested Optionals,
compatibility."""
import numpy as np
import pytest

import nbdata as nd
from nbdata.experimental import Optional, OptionalSpec


def test_spec_of_an_optional_and_compatibility():
    spec = OptionalSpec.from_value(Optional.from_value(np.float32(37.0)))
    assert spec.element_spec == nd.TensorSpec([], np.float32)
    assert spec.value_type is Optional
    assert spec.is_compatible_with(OptionalSpec(nd.TensorSpec([], np.float32)))
    assert not spec.is_compatible_with(OptionalSpec(nd.TensorSpec([], np.int32)))
    assert not spec.is_compatible_with(nd.TensorSpec([], np.float32))
    assert spec == OptionalSpec(nd.TensorSpec([], np.float32))


def test_nested_optional_value():
    inner = Optional.from_value(np.int64(4))
    outer = Optional.from_value((np.float32(1.0), inner))
    assert outer.element_spec[1] == OptionalSpec(nd.TensorSpec([], np.int64))
    assert int(outer.get_value()[1].get_value()) == 4


def test_empty_optional_keeps_its_spec():
    spec = nd.TensorSpec([2], np.int32)
    o = Optional.empty(spec)
    assert OptionalSpec.from_value(o).element_spec == spec and not o.has_value()
    with pytest.raises(TypeError, match="expected an Optional"):
        OptionalSpec.from_value(3)
