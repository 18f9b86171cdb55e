"""A dataset's options are read-only (ValueError on change, also in nested groups),
tf.data's dataset_name / framework_type options, and the experimental_* aliases."""
import pytest

import nbdata as nd


def test_dataset_options_are_read_only():
    a = nd.Options()
    a.experimental_slack = True
    ds = nd.Dataset.range(3).with_options(a).map(lambda x: 2 * x)
    opts = ds.options()
    with pytest.raises(ValueError, match="cannot be changed"):
        opts.deterministic = False
    with pytest.raises(ValueError, match="cannot be changed"):
        opts.threading.private_threadpool_size = 2
    # the Options given stay the caller's, and still mutable
    a.slack = False
    assert ds.options().slack is True and [int(x) for x in ds] == [0, 2, 4]


def test_with_options_on_frozen_options_makes_new_ones():
    b = nd.Options()
    b.deterministic = False
    ds = nd.Dataset.range(1).with_options(nd.Options()).with_options(b)
    assert ds.options().deterministic is False


def test_framework_type_lists_join_and_dataset_name():
    a, b = nd.Options(), nd.Options()
    a.framework_type, b.framework_type = ["seqio"], ["tfgrain"]
    b.dataset_name = "train"
    ds = nd.Dataset.range(2).with_options(a).map(lambda x: x + 1).with_options(b)
    assert ds.options().framework_type == ["seqio", "tfgrain"]
    assert ds.options().dataset_name == "train"


def test_experimental_aliases():
    o = nd.Options()
    o.experimental_deterministic = False
    o.experimental_threading.max_intra_op_parallelism = 3
    o.experimental_optimization.map_parallelization = False
    assert o.deterministic is False and o.threading.max_intra_op_parallelism == 3
    assert o.optimization.map_parallelization is False
    assert o.experimental_threading == o.threading
