"""Error classes and wording that follow tf.data's (so code matching TF's messages works),
with nbdata's own detail kept after TF's words."""

import numpy as np
import pytest

import nbdata as nd
from nbdata import errors


def test_zip_without_datasets_uses_tf_wording():
    with pytest.raises(TypeError, match=r"Must pass at least one dataset to `zip`\."):
        nd.Dataset.zip()
    with pytest.raises(TypeError, match=r"Must pass at least one dataset to `zip`\."):
        nd.Dataset.zip(())


def test_zip_with_both_args_and_datasets_uses_tf_wording():
    a, b = nd.Dataset.range(2), nd.Dataset.range(3)
    with pytest.raises(TypeError, match=r"Both `\*args` and `datasets` cannot be set\."):
        nd.Dataset.zip(a, datasets=(a, b))


@pytest.mark.parametrize("other", [
    nd.Dataset.from_tensors((np.int64(1), np.int64(2), np.int64(3))),   # other structure
    nd.Dataset.from_tensors((np.float64(1), np.int64(2))),              # other dtype
    nd.Dataset.from_tensors({"a": np.int64(1), "c": np.int64(2)}),      # other keys
])
def test_concatenate_incompatible_uses_tf_wording(other):
    if isinstance(other.element_spec, dict):
        first = nd.Dataset.from_tensors({"a": np.int64(1), "b": np.int64(2)})
    else:
        first = nd.Dataset.from_tensors((np.int64(1), np.int64(2)))
    with pytest.raises(TypeError, match="Incompatible dataset elements") as info:
        first.concatenate(other)
    assert "vs" in str(info.value)   # nbdata's detail: both element specs


def test_padded_batch_of_datasets_uses_tf_wording():
    ds = nd.Dataset.range(4).map(lambda x: nd.Dataset.range(2))
    with pytest.raises(TypeError, match="`padded_batch` is not supported for datasets of "
                                        "datasets"):
        ds.padded_batch(2)


def test_padded_batch_unknown_rank_names_padded_shapes():
    ds = nd.Dataset.from_generator(lambda: iter([1, 2]), output_types=np.int32)
    with pytest.raises(ValueError, match=r"`padded_shapes`.*unknown rank"):
        ds.padded_batch(2)


def test_padded_batch_shape_too_small_uses_tf_wording():
    ds = nd.Dataset.from_tensors(np.arange(4))
    with pytest.raises(ValueError, match=r"The padded shape \(2,\) is not compatible with the "
                                         r"shape \(4,\) of the corresponding input component\."):
        ds.padded_batch(2, padded_shapes=[2])


def test_padded_batch_shape_must_be_an_integer_vector():
    ds = nd.Dataset.from_tensors(np.arange(4))
    with pytest.raises(ValueError, match=r"must be a `tf.int64` vector tensor, but its shape "
                                         r"was \(1, 2\)\."):
        ds.padded_batch(2, padded_shapes=np.array([[5, 5]]))
    with pytest.raises(TypeError, match=r"must be a `tf.int64` vector tensor, but its element "
                                        r"type was float64\."):
        ds.padded_batch(2, padded_shapes=np.array([6.0]))
    # shapes with unknown dimensions are still fine
    assert tuple(ds.padded_batch(2, padded_shapes=[None]).element_spec.shape) == (None, None)


@pytest.mark.parametrize("make", [nd.TextLineDataset, nd.TFRecordDataset])
def test_reader_filenames_must_be_strings_uses_tf_wording(make):
    msg = r"The `filenames` argument must contain `tf.string` elements\. Got `tf.int32` elements\."
    with pytest.raises(TypeError, match=msg):
        make(7)
    with pytest.raises(TypeError, match=msg):
        make([4, 5])
    with pytest.raises(TypeError, match=msg):
        make(np.array([4, 5], np.int32))
    with pytest.raises(TypeError, match=r"Got a dataset of `tf.int64` elements\."):
        make(nd.Dataset.from_tensors(np.int64(3)))
    with pytest.raises(TypeError, match=r"elements of shape \[\] \(i\.e\. scalars\)\."):
        make(nd.Dataset.from_tensors(np.array([["a", "b"]])))


def test_map_unsupported_return_value_uses_tf_wording():
    class Thing:
        pass

    with pytest.raises(TypeError, match=r"Unsupported return value from function passed to "
                                        r"Dataset\.map\(\)"):
        nd.Dataset.range(3).map(lambda x: Thing)


@pytest.mark.parametrize("count", [-1, -3])
def test_global_shuffle_refuses_negative_skip(count):
    ds = nd.Dataset.range(8).skip(count)
    assert list(ds) == []
    with pytest.raises(errors.FailedPreconditionError, match=r"skip\(-"):
        nd.experimental.global_shuffle(ds)
    # a non-negative skip still shuffles globally
    out = sorted(int(x) for x in nd.experimental.global_shuffle(nd.Dataset.range(8).skip(3),
                                                                seed=2))
    assert out == [3, 4, 5, 6, 7]
