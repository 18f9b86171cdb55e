"""A namedtuple element reaches a function that takes one argument whole (tf.data
passes namedtuples as one value); a function of several arguments still gets its
fields unpacked (nbdata's rule), and so does a plain tuple."""
import collections

import numpy as np
import pytest

import nbdata as nd

Example = collections.namedtuple("Example", ["label", "image"])


def _examples():
    pairs = nd.Dataset.zip((nd.Dataset.range(4), nd.Dataset.range(4).map(lambda v: -v)))
    return pairs.map(Example)


def test_a_one_argument_function_gets_the_namedtuple():
    ds = _examples().map(lambda e: e._replace(image=2 * e.image))
    got = list(ds)
    assert all(type(e) is Example for e in got)
    assert [(int(e.label), int(e.image)) for e in got] == [(0, 0), (1, -2), (2, -4), (3, -6)]
    assert [int(v) for v in _examples().filter(lambda e: e.label % 2 == 0).map(lambda e: e.label)] == [0, 2]


def test_a_function_of_the_fields_still_gets_them_unpacked():
    assert [int(v) for v in _examples().map(lambda label, image: label - image)] == [0, 2, 4, 6]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'c'"):
        list(_examples().map(lambda a, b, c: a, output_signature=nd.TensorSpec((), np.int64)))


@pytest.mark.parametrize("fusion", [True, False])
def test_whole_namedtuples_in_a_compiled_chain(fusion):
    o = nd.Options()
    o.fusion = fusion
    src = nd.Dataset.from_tensor_slices(Example(np.arange(6), np.arange(6) * 10))
    ds = src.map(lambda e: e.image + e.label).with_options(o)
    assert [int(v) for v in ds] == [0, 11, 22, 33, 44, 55]
