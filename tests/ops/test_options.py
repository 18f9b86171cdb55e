"""Tests for nd.Options and Dataset.with_options / options()."""

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_same, fused, values


def pipeline():
    data = {"x": np.arange(40, dtype=np.float32), "k": np.arange(40, dtype=np.int64)}
    return (nd.Dataset.from_tensor_slices(data)
            .map(lambda d: (d["x"] * 2, d["k"] + 1))
            .filter(lambda x, k: k % 3 != 0)
            .map(lambda x, k: (x - 1, k * k))
            .batch(5))


# ---------------------------------------------------------------- Options object

def test_defaults():
    opts = nd.Options()
    assert opts.deterministic is True
    assert opts.fusion is True


def test_keyword_construction():
    opts = nd.Options(fusion=False, deterministic=False)
    assert opts.fusion is False and opts.deterministic is False


def test_nested_groups():
    opts = nd.Options()
    opts.threading.private_threadpool_size = 2
    opts.autotune.enabled = False
    assert opts.threading.private_threadpool_size == 2
    assert opts.autotune.enabled is False


def test_equality():
    assert nd.Options() == nd.Options()
    a, b = nd.Options(), nd.Options()
    a.fusion = False
    assert a != b
    b.fusion = False
    assert a == b


def test_unknown_option_rejected():
    opts = nd.Options()
    with pytest.raises(AttributeError):
        opts.no_such_option = 1
    with pytest.raises(AttributeError):
        opts.no_such_option  # noqa: B018


def test_wrongly_typed_value_rejected():
    opts = nd.Options()
    with pytest.raises(TypeError):
        opts.deterministic = "yes"
    with pytest.raises(TypeError):
        opts.fusion = 3


# ---------------------------------------------------------------- dataset options

def test_options_returns_options():
    ds = nd.Dataset.range(3)
    assert isinstance(ds.options(), nd.Options)
    assert ds.options().fusion is True


def test_with_options_sets_values():
    opts = nd.Options()
    opts.deterministic = False
    ds = nd.Dataset.range(3).with_options(opts)
    assert isinstance(ds, nd.Dataset)
    assert ds.options().deterministic is False
    assert values(ds) == [0, 1, 2]


def test_with_options_does_not_change_input_dataset():
    ds = nd.Dataset.range(3)
    ds.with_options(nd.Options(fusion=False))
    assert ds.options().fusion is True


def test_with_options_merges():
    o1 = nd.Options()
    o1.deterministic = False
    o2 = nd.Options()
    o2.fusion = False
    ds = nd.Dataset.range(3).with_options(o1).with_options(o2)
    assert ds.options().deterministic is False
    assert ds.options().fusion is False


def test_with_options_merges_nested_groups():
    o1 = nd.Options()
    o1.threading.private_threadpool_size = 3
    o2 = nd.Options()
    o2.optimization.map_fusion = False
    ds = nd.Dataset.range(3).with_options(o1).with_options(o2)
    assert ds.options().threading.private_threadpool_size == 3
    assert ds.options().optimization.map_fusion is False


def test_unset_options_do_not_override():
    o1 = nd.Options(fusion=False)
    ds = nd.Dataset.range(3).with_options(o1).with_options(nd.Options())
    assert ds.options().fusion is False


def test_options_carried_through_transformations():
    ds = nd.Dataset.range(10).with_options(nd.Options(fusion=False))
    ds = ds.map(lambda x: x + 1).filter(lambda x: x > 2).batch(2).shuffle(3)
    assert ds.options().fusion is False


def test_options_merged_from_all_inputs_of_zip():
    a = nd.Dataset.range(3).with_options(nd.Options(deterministic=False))
    b = nd.Dataset.range(3).with_options(nd.Options(fusion=False))
    z = nd.Dataset.zip((a, b))
    assert z.options().deterministic is False
    assert z.options().fusion is False


def test_with_options_rejects_non_options():
    with pytest.raises(TypeError):
        nd.Dataset.range(3).with_options({"fusion": False})
    with pytest.raises(TypeError):
        nd.Dataset.range(3).with_options(None)


def test_element_spec_and_cardinality_unchanged():
    ds = pipeline()
    opt = ds.with_options(nd.Options(fusion=False))
    assert opt.element_spec == ds.element_spec
    assert opt.cardinality() == ds.cardinality()


# ---------------------------------------------------------------- same results

def test_fusion_false_gives_same_results():
    ds = pipeline()
    got = fused(ds)
    assert len(got) > 0
    assert got[0][0].dtype == np.float32 and got[0][1].dtype == np.int64
    assert_same(got, values(ds.with_options(nd.Options(fusion=False))))


def test_fusion_false_attribute_style_gives_same_results():
    opts = nd.Options()
    opts.fusion = False
    ds = nd.Dataset.range(30).map(lambda x: x * 0.5).filter(lambda x: x > 3.0)
    assert_same(fused(ds), values(ds.with_options(opts)))


def test_each_optimization_switch_gives_same_results():
    base = values(pipeline())
    for name in ("map_fusion", "filter_fusion", "noop_elimination"):
        opts = nd.Options()
        setattr(opts.optimization, name, False)
        assert_same(base, values(pipeline().with_options(opts)))


def test_threadpool_size_gives_same_results():
    base = values(pipeline())
    for n in (1, 2):
        opts = nd.Options()
        opts.threading.private_threadpool_size = n
        assert_same(base, values(pipeline().with_options(opts)))


def test_autotune_disabled_gives_same_results():
    opts = nd.Options()
    opts.autotune.enabled = False
    ds = nd.Dataset.range(20).map(lambda x: x * 2, num_parallel_calls=nd.AUTOTUNE).prefetch(nd.AUTOTUNE)
    assert values(ds.with_options(opts)) == [2 * i for i in range(20)]


def test_non_deterministic_keeps_multiset():
    opts = nd.Options(deterministic=False)
    ds = nd.Dataset.range(200).map(lambda x: x * 3, num_parallel_calls=4).with_options(opts)
    assert sorted(values(ds)) == [3 * i for i in range(200)]
