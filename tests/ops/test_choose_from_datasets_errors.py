"""choose_from_datasets' argument errors: a choice_dataset that is no dataset, or holds
no scalar int64, is a TypeError naming what it should be."""
import numpy as np
import pytest

import nbdata as nd


def _two():
    return [nd.Dataset.from_tensors(np.int64(0)), nd.Dataset.from_tensors(np.int64(1))]


def test_choice_dataset_must_be_a_dataset():
    with pytest.raises(TypeError, match="`choice_dataset` should be a `tf.data.Dataset`"):
        nd.Dataset.choose_from_datasets(_two(), choice_dataset=None)


@pytest.mark.parametrize("value, word", [(1.0, "tf.int64"), ([np.int64(1)], "scalar")])
def test_choice_dataset_must_hold_scalar_int64(value, word):
    with pytest.raises(TypeError, match=word):
        nd.Dataset.choose_from_datasets(_two(), choice_dataset=nd.Dataset.from_tensors(value))
