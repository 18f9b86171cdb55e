"""Element structures as tf.data defines them: TF's flatten protocol with a plain
``__tf_unflatten__`` method (tf.nest calls it on an instance, not on the class)."""
import dataclasses

import numpy as np

import nbdata as nd


@dataclasses.dataclass
class Masked:
    mask: bool
    value: object

    def __tf_flatten__(self):
        return (self.mask,), (self.value,)

    def __tf_unflatten__(self, metadata, components):   # an instance method, not a classmethod
        return Masked(mask=metadata[0], value=components[0])


def test_unflatten_as_an_instance_method_rebuilds_elements():
    ds = nd.Dataset.from_tensors(Masked(True, np.array([1, 2])))
    assert ds.element_spec == Masked(True, nd.TensorSpec((2,), np.int64))
    (only,) = list(ds)
    assert isinstance(only, Masked) and only.mask is True and only.value.tolist() == [1, 2]
    zipped = nd.Dataset.zip((nd.Dataset.range(2), nd.Dataset.from_tensor_slices(
        Masked(False, np.array([5, 6])))))
    assert [(int(i), m.mask, int(m.value)) for i, m in zipped] == [(0, False, 5), (1, False, 6)]
