"""Unit tests of the compiler's parts on their own: the elementwise dtype rules, the
planner's decisions (no kernel is compiled) and the code generator."""

import numba
import numpy as np
import pytest

import nbdata as nd
from nbdata.compiler.lifting import lift_function
from nbdata.primitives.expr import NotElementwise, node_count, output_specs, substitute
from nbdata.trace.graph import TraceError
from nbdata.compiler.codegen import generate
from nbdata.compiler.lowering import PlannedStage, plan
from nbdata.compiler.passes import run_passes
from nbdata.ops.node import NotFusable


class NoCompiler:
    """A typer that compiles nothing: only lifted functions can fuse."""

    calls = 0

    def type_function(self, fn, chain, kind):
        NoCompiler.calls += 1
        raise NotFusable(f"no compiler for {fn.name}")


def planned(ds, min_rows=0):
    """Rewrite passes, then planning with a typer that compiles nothing."""
    o = nd.Options()
    o.fusion_min_rows = min_rows
    optimized, _ = run_passes(ds._node, o)
    return plan(optimized, o, NoCompiler())


def stages(node):
    found, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, PlannedStage):
            found.append(n)
        stack.extend(n.inputs)
    return found


# -------------------------------------------------------- dtype rules

SCALARS = [np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float32, np.float64, np.bool_]


@pytest.mark.parametrize("a", SCALARS)
@pytest.mark.parametrize("b", SCALARS)
def test_lifted_binary_dtypes_are_numpys(a, b):
    for fn in (lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x < y,
               lambda x, y: np.maximum(x, y), lambda x, y: np.where(x > 0, x, y)):
        structure = (nd.TensorSpec((3,), a), nd.TensorSpec((), b))
        try:
            out = lift_function(fn, structure)
        except NotElementwise:
            continue   # NumPy refuses the combination (bool - bool, ...): not lifted
        with np.errstate(all="ignore"):
            expected = np.asarray(fn(np.ones(3, a), b(1))).dtype
        assert out.dtype == expected, (fn, a, b)
        assert output_specs(out) == [nd.TensorSpec((3,), expected)]


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.float32, np.float64])
def test_python_scalars_are_weak(dtype):
    for fn in (lambda x: x * 2, lambda x: x + 2.5, lambda x: (x - 0.5) * 2.0):
        out = lift_function(fn, nd.TensorSpec((), dtype))
        assert out.dtype == np.asarray(fn(np.ones(2, dtype))).dtype


def test_what_stops_lifting():
    spec = nd.TensorSpec((4,), np.float32)
    # one element at a constant index lifts (tests/compiler/test_lift_element.py); a
    # slice, an index out of range or a computed index does not
    for fn in (lambda x: x[1:3], lambda x: x[4], lambda x: x[x[0].astype(np.int64)],
               lambda x: x.sum(), lambda x: x if x > 0 else -x,
               lambda x: np.tanh(x), lambda x: x.shape, lambda x: int(x)):
        with pytest.raises((NotElementwise, TraceError, nd.errors.InvalidArgumentError)):
            lift_function(fn, spec)
    # a list returned at the top is a tuple of components, as tf.data reads it
    (doubled,) = lift_function(lambda x: [x * 2], spec)
    assert output_specs(doubled) == [spec]


def test_arrays_of_different_shapes_lift_separately_but_do_not_combine():
    structure = (nd.TensorSpec((4,), np.int32), nd.TensorSpec((2,), np.float32))
    out = lift_function(lambda x, f: (x * 2, f + 1), structure)
    assert output_specs(out) == [nd.TensorSpec((4,), np.int32),
                                             nd.TensorSpec((2,), np.float32)]
    with pytest.raises(ValueError, match="broadcast"):   # NumPy refuses, when recorded
        lift_function(lambda x, f: x + f, structure)


def test_composition_keeps_the_dag_shared():
    doubled = lift_function(lambda v: v * 2, nd.TensorSpec((), np.float64))
    square = lift_function(lambda v: v * v, nd.TensorSpec((), np.float64))
    composed = substitute(square, [doubled])
    assert composed.args[0] is composed.args[1]          # one node used twice
    assert node_count([composed]) == 4        # input, 2, v*2, (v*2)*(v*2)
    assert substitute(doubled, [doubled.args[0]]) is doubled


# ------------------------------------------------------------ planning

def test_plan_without_compiling_lifted_chain():
    NoCompiler.calls = 0
    ds = nd.Dataset.range(10).map(lambda x: x * 2).filter(lambda x: x > 3).take(3).batch(2)
    physical, notes = planned(ds)
    (stage,) = stages(physical)
    assert physical is stage
    assert [s.node.op for s in stage.plan.steps] == ["map", "filter", "take"]
    assert [s.kind for s in stage.plan.steps] == ["row", "row", "counter"]
    assert stage.plan.terminal.node.op == "batch"
    assert notes == [] and NoCompiler.calls == 0


def test_plan_splits_a_fused_map_chain_at_the_function_that_cannot_compile():
    ds = (nd.Dataset.range(10).map(lambda x: x + 1).map(lambda x: x * 3)
          .map(lambda x: np.int64(int(x))).map(lambda x: x - 1).batch(4))
    physical, notes = planned(ds)
    # map fusion made one chained map; its first two functions fuse, the rest runs in
    # Python on top of the stage, then the batch
    assert physical.op == "batch"
    rest = physical.inputs[0]
    assert rest.op == "map" and " then " in rest.fn.name
    (stage,) = stages(physical)
    assert rest.inputs[0] is stage
    assert [(s.node.op, s.plan.how) for s in stage.plan.steps] == [("map", "elementwise, inlined")] * 2
    assert stage.plan.terminal is None
    (note,) = notes
    assert "no compiler" in note.reason and "fed by the fused stage" in note.consequence


def test_plan_notes_sources_that_do_not_fuse():
    ds = nd.Dataset.from_tensor_slices(np.array(["a", "b"])).map(lambda s: s)
    physical, notes = planned(ds)
    assert not stages(physical)
    assert notes and "string" in notes[0].reason


def test_plan_keeps_small_sources_on_the_reference_path():
    physical, notes = planned(nd.Dataset.range(10).map(lambda x: x + 1), min_rows=100)
    assert not stages(physical)
    assert "fewer than Options().fusion_min_rows" in notes[0].reason


def test_plan_of_counters_alone_builds_no_stage():
    physical, notes = planned(nd.Dataset.range(10).skip(2).take(3))
    assert not stages(physical) and physical.op == "take"


def test_plan_zip_and_dict_sources():
    ds = nd.Dataset.zip({"a": nd.Dataset.range(8), "b": nd.Dataset.from_tensor_slices(np.ones((8, 2)))})
    physical, _ = planned(ds.map(lambda d: {"a": d["a"] + 1, "b": d["b"] * 2}).batch(3))
    (stage,) = stages(physical)
    assert [leaf.spec for leaf in stage.plan.source.leaves] == [
        nd.TensorSpec((), np.int64), nd.TensorSpec((2,), np.float64)]


def test_plan_of_a_placeholder_count_stops_at_the_take():
    n = nd.placeholder(np.int64, [])
    physical, notes = planned(nd.Dataset.range(10).map(lambda x: x + 1).take(n))
    assert physical.op == "take" and stages(physical)
    assert "placeholder" in notes[0].reason


# ------------------------------------------------------------- codegen

def test_generated_kernel_runs_on_its_own():
    ds = nd.Dataset.range(10).map(lambda x: x * 3).filter(lambda x: x % 2 == 0).enumerate(5)
    physical, _ = planned(ds)
    (stage,) = stages(physical)
    p = stage.plan
    code = generate("k", p.source.leaves, p.source.node.spec, list(p.steps))
    assert code.text.count("prange") == 1          # one parallel loop: map and filter
    assert "c = state[0]" in code.text               # the enumerate counter pass
    assert code.counters == [5] and code.compacts
    glb = dict(code.globals, np=np, prange=numba.prange)
    exec(code.text, glb)
    kernel = numba.njit(glb["k"])
    status = np.empty(10, np.uint8)
    scratch = [np.empty((10,) + s.shape, s.dtype) for s in code.scratch_specs]
    outs = [np.empty((10,) + s.shape, s.dtype) for s in code.out_specs]
    state = np.array(code.counters, np.int64)
    kept_at = np.empty(10, np.int64)
    bad, done, n = kernel(np.int64(0), np.int64(10), np.array([0, 1], np.int64), status, kept_at,
                          *scratch, *outs, state)
    assert (bad, done, n) == (-1, False, 5)
    assert kept_at[:n].tolist() == np.flatnonzero(status == 1).tolist()
    kept = status == 1
    index, value = [(scratch + outs)[i] for i in code.results]  # enumerate's index first
    assert index[kept].tolist() == [5, 6, 7, 8, 9]
    assert value[kept].tolist() == [0, 6, 12, 18, 24]
    assert state.tolist() == [10]


def test_take_reports_done_and_skip_counts_across_calls():
    ds = nd.Dataset.range(100).map(lambda x: x + 0).skip(3).take(4)
    physical, _ = planned(ds)
    (stage,) = stages(physical)
    p = stage.plan
    code = generate("k", p.source.leaves, p.source.node.spec, list(p.steps))
    glb = dict(code.globals, np=np, prange=numba.prange)
    exec(code.text, glb)
    kernel = numba.njit(glb["k"])
    state = np.array(code.counters, np.int64)
    seen = []
    for lo in range(0, 100, 2):
        status = np.empty(2, np.uint8)
        outs = [np.empty((2,) + s.shape, s.dtype) for s in code.out_specs]
        scratch = [np.empty((2,) + s.shape, s.dtype) for s in code.scratch_specs]
        bad, done, n = kernel(np.int64(lo), np.int64(2), np.array([0, 1], np.int64), status,
                              np.empty(2, np.int64), *scratch, *outs, state)
        seen += (scratch + outs)[code.results[0]][status == 1].tolist()
        if done:
            break
    assert seen == [3, 4, 5, 6] and lo == 6
