"""Rewrite passes, one enabled at a time: each checked by the plan shape it produces."""

import numpy as np
import pytest

import nbdata as nd
from nbdata.compiler.passes import PASSES, run_passes
from nbdata.compiler.plan import list_ops

PASS_NAMES = [p.name for p in PASSES]


def only(name):
    o = nd.Options()
    for p in PASS_NAMES:
        setattr(o.optimization, p, p == name)
    return o


def optimized_ops(ds, options):
    plan, runs = run_passes(ds._node, ds.options().merge(options))
    assert all(run.seconds >= 0 for run in runs)
    return list_ops(plan), [run.name for run in runs if run.changed]


def reference(ds):
    o = nd.Options()
    o.fusion = False
    return [np.asarray(v).tolist() for v in ds.with_options(o)]


def test_pass_names_are_options():
    assert PASS_NAMES == ["noop_elimination", "decode_lifting", "decode_vectorization",
                          "batch_map_fusion", "map_fusion", "gpu_map_fusion", "filter_fusion",
                          "shuffle_indices"]
    for name in PASS_NAMES:
        assert getattr(nd.Options().optimization, name) is True


def test_noop_elimination_alone():
    ds = nd.Dataset.range(10).take(-1).skip(0).repeat(1).map(lambda x: x + 1).take(3)
    ops, applied = optimized_ops(ds, only("noop_elimination"))
    assert ops == ["range", "map", "take"]
    assert applied == ["noop_elimination"]
    for other in ("map_fusion", "filter_fusion"):
        assert optimized_ops(ds, only(other))[0] == ["range", "take", "skip", "repeat", "map", "take"]


def test_noop_elimination_keeps_real_counts():
    ds = nd.Dataset.range(10).take(5).skip(1).repeat(2)
    assert optimized_ops(ds, only("noop_elimination")) == (["range", "take", "skip", "repeat"], [])


def test_map_fusion_alone():
    ds = nd.Dataset.range(10).map(lambda x: x + 1).map(lambda x: x * 2).map(lambda x: x - 3)
    ops, applied = optimized_ops(ds, only("map_fusion"))
    assert ops == ["range", "map"]
    assert applied == ["map_fusion"]
    assert optimized_ops(ds, only("filter_fusion"))[0] == ["range", "map", "map", "map"]
    fused = ds.with_options(only("map_fusion"))
    assert [int(v) for v in fused] == [(x + 1) * 2 - 3 for x in range(10)]


def test_map_fusion_keeps_tuple_unpacking_between_functions():
    ds = nd.Dataset.range(6).map(lambda x: (x, x * 10)).map(lambda a, b: a + b)
    assert optimized_ops(ds, only("map_fusion"))[0] == ["range", "map"]
    assert [int(v) for v in ds.with_options(only("map_fusion"))] == reference(ds)


def test_filter_fusion_alone():
    ds = nd.Dataset.range(30).filter(lambda x: x % 2 == 0).filter(lambda x: x % 3 == 0)
    ops, applied = optimized_ops(ds, only("filter_fusion"))
    assert ops == ["range", "filter"]
    assert applied == ["filter_fusion"]
    assert optimized_ops(ds, only("map_fusion"))[0] == ["range", "filter", "filter"]
    assert [int(v) for v in ds.with_options(only("filter_fusion"))] == [0, 6, 12, 18, 24]


def test_filter_fusion_short_circuits():
    seen = []

    def second(x):
        seen.append(int(x))
        return x > 0

    ds = nd.Dataset.range(10).filter(lambda x: x % 5 == 0).filter(second)
    del seen[:]  # tracing calls
    assert [int(v) for v in ds.with_options(only("filter_fusion"))] == [5]
    assert seen == [0, 5]


def test_no_pass_runs_on_the_reference_path():
    ds = nd.Dataset.range(10).map(lambda x: x + 1).map(lambda x: x * 2).take(-1)
    o = nd.Options()
    o.fusion = False
    assert optimized_ops(ds, o) == (["range", "map", "map", "take"], [])


def test_explain_lists_passes_with_their_changes_and_times():
    ds = nd.Dataset.range(10).map(lambda x: x + 1).map(lambda x: x * 2).skip(0)
    text = ds.compile().explain()
    assert "map_fusion: changed the plan (" in text
    assert "noop_elimination: changed the plan (" in text
    assert "filter_fusion: no change (" in text and " ms)" in text


def test_failing_pass_is_named():
    from nbdata.compiler import passes

    class Broken:
        name = "map_fusion"

        def run(self, plan):
            raise RuntimeError("boom")

    original = passes.PASSES
    passes.PASSES = (Broken(),)
    try:
        with pytest.raises(passes.PassError, match="step: map_fusion"):
            run_passes(nd.Dataset.range(3)._node, nd.Options())
    finally:
        passes.PASSES = original


def test_explain_shows_fused_stage_ops_and_source():
    o = nd.Options()
    o.fusion_min_rows = 0
    ds = (nd.Dataset.range(100).map(lambda x: x * 2).filter(lambda x: x % 3 == 0).batch(8)
          .with_options(o))
    text = ds.compile().explain()
    assert "fused stage: range -> map -> filter -> batch" in text
    assert "def fused_stage(" in text and "prange" in text
    assert "op 0: map(" in text and "op 1: filter(" in text


def test_small_sources_stay_on_the_reference_path_by_default():
    text = nd.Dataset.range(100).map(lambda x: x * 2).batch(8).compile().explain()
    assert "fused_stage" not in text
    text = nd.Dataset.range(100_000).map(lambda x: x * 2).batch(8).compile().explain()
    assert "fused_stage" in text
