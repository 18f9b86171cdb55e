"""Regression tests for engine defects found in review, one or more per defect."""

import gc
import linecache
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import nbdata as nd
from nbdata.kernels import threads as nd_threads
from nbdata.compiler.lifting import lift_function
from nbdata.primitives.expr import node_count
from nbdata.ops.from_tensor_slices import FromTensorSlices
from nbdata.compiler.executor import ExecContext


def fused_options(**kw):
    o = nd.Options()
    o.fusion_min_rows = 0
    for k, v in kw.items():
        setattr(o, k, v)
    return o


def reference_options():
    o = nd.Options()
    o.fusion = False
    return o


def run_both(ds):
    pipe = ds.with_options(fused_options()).compile()
    got = list(pipe)
    want = list(ds.with_options(reference_options()))
    return pipe, got, want


# ------------------------------------------------- exponential code size

def _nested_maximum(depth):
    ds = nd.Dataset.from_tensor_slices(np.linspace(-2, 2, 64, dtype=np.float32).reshape(16, 4))
    for _ in range(depth):
        ds = ds.map(lambda v: np.maximum(v * 1.5 - 0.1, v))
    return ds


def test_nested_maximum_maps_generate_linear_code():
    sizes = {}
    for depth in (2, 4, 8):
        pipe = _nested_maximum(depth).with_options(fused_options()).compile()
        (stage,) = pipe.fused_stages()
        sizes[depth] = len(stage.source_text)
        assert len(stage.plan.steps) == depth
    # one temporary per expression node: each map adds the same amount of code
    assert sizes[8] - sizes[4] <= 2.2 * (sizes[4] - sizes[2])
    assert sizes[8] < 3 * sizes[2]


def test_nested_maximum_maps_compute_numpy_values():
    pipe, got, want = run_both(_nested_maximum(8))
    np.testing.assert_array_equal(np.stack(got), np.stack(want))
    assert pipe.stats().fallback_rows == 0


def test_shared_subexpressions_render_once():
    lifted = lift_function(lambda v: (v * 2 + 1) * (v * 2 + 1) + np.maximum(v * 2, 0),
                   nd.TensorSpec((), np.float64))
    ds = nd.Dataset.from_tensor_slices(np.arange(10.0)).map(
        lambda v: (v * 2 + 1) * (v * 2 + 1) + np.maximum(v * 2, 0))
    pipe, got, want = run_both(ds)
    assert got == want
    text = pipe.fused_stages()[0].source_text
    # the DAG has this many nodes (inputs and constants among them); no node twice
    assert text.count(" = dt_float64(") <= node_count([lifted])


# --------------------------------------------------------------- dtypes

def test_float16_source_falls_back_with_an_explain_note():
    x = np.linspace(0, 1, 40, dtype=np.float16).reshape(10, 4)
    ds = nd.Dataset.from_tensor_slices(x).map(lambda v: v * 2)
    pipe = ds.with_options(fused_options()).compile()
    assert not pipe.fused_stages()
    assert "float16" in pipe.explain() and "Numba does not support" in pipe.explain()
    got = list(pipe)
    want = list(ds.with_options(reference_options()))
    assert all(a.dtype == np.float16 and np.array_equal(a, b) for a, b in zip(got, want))


def test_float16_map_output_ends_the_fused_chain():
    ds = nd.Dataset.range(50).map(lambda v: v * 2).map(lambda v: v.astype(np.float16)).batch(8)
    pipe = ds.with_options(fused_options()).compile()
    assert "float16" in pipe.explain()
    got = list(pipe)
    want = list(ds.with_options(reference_options()))
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert got[0].dtype == np.float16


def test_int64_min_floor_divided_by_minus_one_is_numpy():
    lo = np.iinfo(np.int64).min
    x = np.array([lo, lo, 7, -7, 5, lo + 1] * 700, np.int64)
    d = np.array([-1, 1, -1, 2, 0, -1] * 700, np.int64)
    ds = nd.Dataset.from_tensor_slices((x, d)).map(lambda a, b: (a // b, a % b))
    pipe, got, want = run_both(ds)
    with np.errstate(all="ignore"):
        assert [(int(a), int(b)) for a, b in got] == [(int(q), int(r)) for q, r in zip(x // d, x % d)]
    assert [(int(a), int(b)) for a, b in got] == [(int(a), int(b)) for a, b in want]
    assert pipe.fused_stages() and pipe.stats().fallback_rows == 0


# ---------------------------------------------------- error order / tracing

def test_parallel_map_delivers_results_in_flight_before_an_upstream_error():
    def gen():
        for i in range(10):
            if i == 5:
                raise RuntimeError("generator failed")
            yield i

    ds = nd.Dataset.from_generator(gen, output_signature=nd.TensorSpec((), np.int64)).map(
        lambda x: x * 10, num_parallel_calls=2)
    got = []
    with pytest.raises(nd.errors.InvalidArgumentError, match="generator failed"):
        for v in ds:
            got.append(int(v))
    assert got == [0, 10, 20, 30, 40]


def test_a_function_raising_typeerror_is_reported_with_the_op_and_function():
    def f(x):
        raise TypeError("returned None")  # only its message looks like an output mistake

    # It cannot be recorded, so its spec comes from the first element, where it raises.
    ds = nd.Dataset.range(3).map(f)
    with pytest.raises(nd.errors.InvalidArgumentError, match="map: function .*f raised TypeError"):
        ds.element_spec


def test_a_function_returning_a_list_gives_a_tuple_as_in_tf_data():
    # tf.data: a list at the top is a tuple of components, a nested list one tensor.
    ds = nd.Dataset.range(3).map(lambda x: [x, x * 2])
    assert ds.element_spec == (nd.TensorSpec((), np.int64), nd.TensorSpec((), np.int64))
    assert [tuple(int(v) for v in e) for e in ds] == [(0, 0), (1, 2), (2, 4)]
    nested = nd.Dataset.range(2).map(lambda x: ([x, x], x))
    assert nested.element_spec[0] == nd.TensorSpec((2,), np.int64)


def test_from_generator_empty_list_is_an_empty_string_vector():
    def gen():
        yield []
        yield ["a", "bc"]

    ds = nd.Dataset.from_generator(gen, output_signature=nd.TensorSpec((None,), nd.string))
    first, second = list(ds)
    assert first.dtype == object and first.shape == (0,)
    assert second.tolist() == [b"a", b"bc"]
    empty_float = list(nd.Dataset.from_generator(lambda: iter([[]]), output_types=np.float32,
                                                 output_shapes=(None,)))[0]
    assert empty_float.dtype == np.float32 and empty_float.shape == (0,)


# ------------------------------------------------------ silent fallbacks

def test_a_source_that_cannot_fuse_gets_an_explain_line():
    ds = nd.Dataset.from_tensor_slices(np.array(["a", "b"])).map(lambda s: s + b"!")
    text = ds.with_options(fused_options()).compile().explain()
    assert "from_tensor_slices" in text.split("== not fused ==")[1]
    assert "strings run in Python" in text


def test_a_stream_that_fuses_says_so():
    ds = nd.Dataset.from_generator(lambda: iter(range(3)), output_types=np.int64,
                                   output_shapes=()).map(lambda x: x + 1)
    text = ds.with_options(fused_options()).compile().explain()
    assert "source: the chunks of from_generator" in text


def test_small_sources_say_why_they_are_not_compiled():
    text = nd.Dataset.range(10).map(lambda x: x + 1).compile().explain()
    assert "fewer than Options().fusion_min_rows" in text


def test_dict_elements_fuse():
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    ds = (nd.Dataset.from_tensor_slices({"image": x, "label": np.arange(10)})
          .map(lambda d: {"image": d["image"] * 2, "label": d["label"] + 1, "w": d["label"] * 0.5})
          .filter(lambda d: d["label"] % 3 != 0).batch(3))
    pipe, got, want = run_both(ds)
    assert len(pipe.fused_stages()) == 1 and pipe.stats().fallback_rows == 0
    assert [sorted(b) for b in got] == [["image", "label", "w"]] * len(got)
    for a, b in zip(got, want):
        for k in a:
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k])


def test_dict_elements_fuse_through_compiled_functions():
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    ds = nd.Dataset.from_tensor_slices({"x": x, "n": np.arange(10)}).map(
        lambda d: {"first": d["x"][0], "rev": d["x"][::-1].copy(), "n": d["n"]})
    pipe, got, want = run_both(ds)
    assert pipe.fused_stages() and "Numba-compiled call" in pipe.explain()
    assert pipe.stats().fallback_rows == 0
    for a, b in zip(got, want):
        assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_namedtuple_elements_fuse():
    import collections
    Pair = collections.namedtuple("Pair", ["a", "b"])
    for fn, how in ((lambda a, b: Pair(a * 2, b + 1.0), "elementwise, inlined"),
                    (lambda a, b: Pair(a * 2, b + 1.0 if a > 3 else b), "Numba-compiled call")):
        ds = nd.Dataset.from_tensor_slices(Pair(np.arange(10), np.arange(10.0))).map(fn).batch(4)
        pipe, got, want = run_both(ds)
        assert pipe.fused_stages() and pipe.stats().fallback_rows == 0
        assert how in pipe.explain()
        assert [type(g).__name__ for g in got] == ["Pair"] * 3
        assert all(np.array_equal(x, y) for g, w in zip(got, want) for x, y in zip(g, w))


# ------------------------------------------------------ non-contiguous data

def test_column_slices_are_read_in_place():
    big = np.arange(4000 * 16, dtype=np.float32).reshape(4000, 16)
    x = big[:, :8]                       # rows are contiguous, the column is not
    node = FromTensorSlices(x)
    reader = node.fusion_source(None).open(ExecContext(nd.Options()))
    assert reader.args is not None
    assert all(np.shares_memory(a, big) for a in reader.args)
    pipe, got, want = run_both(nd.Dataset.from_tensor_slices(x).map(lambda v: v + 1))
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_strided_rows_copy_only_a_chunk_at_a_time():
    big = np.arange(300 * 4 * 4 * 3, dtype=np.int32).reshape(300, 4, 4, 3)
    x = big[:, :, :, :2]                 # each row's elements are not evenly spaced
    reader = FromTensorSlices(x).fusion_source(None).open(ExecContext(nd.Options()))
    assert reader.args is None          # not readable in place ...
    part = reader.chunk(100, 50)        # ... so each chunk copies its own rows only
    assert part[0].shape == (50, 4, 4, 2) and np.array_equal(part[0], x[100:150])
    ds = nd.Dataset.from_tensor_slices(x).map(lambda v: v * 2).batch(64)
    pipe = ds.with_options(fused_options(chunk_rows=64)).compile()
    got = list(pipe)
    assert np.array_equal(np.concatenate(got), x * 2) and pipe.stats().fallback_rows == 0


# -------------------------------------------------------------- leaks

class Holder:
    pass


def _pipeline_with_closure(scale):
    holder = Holder()
    fn = lambda v: v * scale  # noqa: E731
    fn.holder = holder
    ds = nd.Dataset.from_tensor_slices(np.arange(20.0)).map(fn).with_options(fused_options())
    pipe = ds.compile()
    assert [float(v) for v in pipe][:3] == [0.0, scale, 2 * scale]
    return weakref.ref(holder)


@pytest.mark.parametrize("disk_cache", [False, True])
def test_kernels_do_not_keep_user_closures_alive(disk_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("NBDATA_CACHE_DIR", str(tmp_path) if disk_cache else "")
    # Only this test's kernels: an earlier test's pipeline may still be alive in this
    # process (a module fixture's, or one whose parallel kernel compiles in the background).
    gc.collect()
    modules_before = {m for m in sys.modules if m.startswith("nbdata_stage_")}
    lines_before = {k for k in linecache.cache if str(k).startswith("<nbdata-fused-stage")}
    ref = _pipeline_with_closure(3.0 if disk_cache else 5.0)
    gc.collect()
    assert ref() is None
    assert not [m for m in sys.modules if m.startswith("nbdata_stage_")
                and m not in modules_before]
    assert not [k for k in linecache.cache if str(k).startswith("<nbdata-fused-stage")
                and k not in lines_before]


# --------------------------------------------------------- file cache

def _make_cache(tmp_path, name="c"):
    path = str(tmp_path / name)
    ds = nd.Dataset.range(6).map(lambda x: (x, np.full(int(x) % 3, 1.5), b"s" * int(x))).cache(path)
    return path, ds


def test_file_cache_is_data_only(tmp_path):
    path, ds = _make_cache(tmp_path)
    first = list(ds)
    data = open(path + ".nbcache", "rb").read()
    assert data.startswith(b"NBCOLS") and b"\x80\x04" not in data[:16]  # not a pickle stream
    again = list(nd.Dataset.range(6).map(lambda x: (x, np.full(int(x) % 3, 1.5), b"s" * int(x)))
                 .cache(path))
    for a, b in zip(first, again):
        assert a[0] == b[0] and np.array_equal(a[1], b[1]) and a[2] == b[2]


def test_a_pickle_in_the_cache_file_is_rejected_not_run(tmp_path):
    import pickle
    path = str(tmp_path / "evil")

    class Boom:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    with open(path + ".nbcache", "wb") as f:
        f.write(pickle.dumps(Boom()))
    with pytest.raises(nd.errors.DataLossError, match="evil"):
        list(nd.Dataset.range(3).cache(path))
    assert not (tmp_path / "pwned").exists()


def test_corrupt_cache_file_names_file_and_offset(tmp_path):
    path, ds = _make_cache(tmp_path)
    list(ds)
    raw = bytearray(open(path + ".nbcache", "rb").read())
    raw[20:40] = b"\xff" * 20
    open(path + ".nbcache", "wb").write(bytes(raw))
    with pytest.raises(nd.errors.DataLossError, match=r"corrupt at offset \d+"):
        list(_make_cache(tmp_path)[1])
    open(path + ".nbcache", "wb").write(bytes(raw[:-30]))
    with pytest.raises(nd.errors.DataLossError, match="c.nbcache"):
        list(_make_cache(tmp_path)[1])


def test_a_lock_left_by_a_crashed_writer_does_not_block(tmp_path):
    path, ds = _make_cache(tmp_path)
    # a writer that crashed mid-write leaves its lock file and temporary file behind
    script = (f"import os, nbdata as nd, numpy as np\n"
              f"it = iter(nd.Dataset.range(100).cache({path!r}))\n"
              f"next(it)\n"
              f"os._exit(1)\n")
    subprocess.run([sys.executable, "-c", script], check=False, timeout=120)
    assert os.path.exists(path + ".nbcache.lock") and not os.path.exists(path + ".nbcache")
    assert [int(v[0]) for v in ds] == list(range(6))
    assert os.path.exists(path + ".nbcache")
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_a_live_writer_makes_a_second_writer_fail(tmp_path):
    path = str(tmp_path / "busy")
    ds = nd.Dataset.range(10).cache(path)
    first = iter(ds)
    next(first)
    with pytest.raises(nd.errors.AlreadyExistsError, match="busy"):
        list(nd.Dataset.range(10).cache(path))
    assert [int(v) for v in first] == list(range(1, 10))
    assert [int(v) for v in nd.Dataset.range(10).cache(path)] == list(range(10))


# ------------------------------------------------------------- threads

def test_workqueue_layer_serialises_kernel_calls(monkeypatch):
    monkeypatch.setattr(nd_threads, "_layer", "workqueue")
    assert nd_threads.serialises_kernels()
    with nd_threads.kernel_section(1):
        assert nd_threads._serial.locked()
    assert not nd_threads._serial.locked()
    ds = nd.Dataset.range(100).map(lambda x: x + 1).with_options(fused_options())
    assert "workqueue threading layer" in ds.compile().explain()


def test_max_intra_op_parallelism_caps_kernel_threads():
    o = nd.Options()
    o.threading.private_threadpool_size = 8
    o.threading.max_intra_op_parallelism = 1
    assert nd_threads.ThreadBudget(o).kernel_threads() == 1


# ---------------------------------------------------------- parameters

def test_name_appears_in_plans_and_errors():
    ds = nd.Dataset.range(5).map(lambda x: x // (x - 2), name="risky")
    assert "map[risky]" in ds.compile().explain()
    bad = nd.Dataset.range(5).map(lambda x: np.int64(1) if x < 3 else None, name="picky",
                                  output_signature=nd.TensorSpec((), np.int64))
    with pytest.raises(TypeError, match=r"map\[picky\]"):
        list(bad)
    with pytest.raises(TypeError, match="name must be a string"):
        nd.Dataset.range(3).map(lambda x: x, name=3)


# ------------------------------------------------------ inner datasets

def test_inner_datasets_are_compiled_with_their_own_options():
    calls = []

    def f(v):
        calls.append(1)
        return v * 2

    inner_options = fused_options()

    def inner(x):
        return nd.Dataset.range(1000).map(f).with_options(inner_options)

    calls.clear()
    got = [int(v) for v in nd.Dataset.range(3).flat_map(inner)]
    assert got == [v * 2 for v in range(1000)] * 3
    # f was lifted into the inner fused kernel: traced, never called per element
    assert len(calls) < 50
    calls.clear()
    reference = [int(v) for v in nd.Dataset.range(3).flat_map(
        lambda x: nd.Dataset.range(1000).map(f).with_options(reference_options()))]
    assert reference == got and len(calls) >= 3000


# ------------------------------------------------- strict mode

def _broken_lift(graph):
    from nbdata.compiler import lifting
    return lifting.lift(None)   # an internal bug: AttributeError raised in nbdata's code


@pytest.mark.parametrize("strict", [True, False])
def test_an_internal_error_while_lifting_fails_in_strict_mode_only(monkeypatch, strict):
    from nbdata.compiler import lowering
    from nbdata.trace import function
    monkeypatch.setattr(lowering, "lift", _broken_lift)
    monkeypatch.setattr(function, "STRICT", strict)
    ds = nd.Dataset.from_tensor_slices(np.arange(10.0)).map(lambda x: x * 2.0)
    if strict:
        with pytest.raises(AttributeError, match="NoneType"):
            ds.with_options(fused_options()).compile()
    else:   # users fall back: the function runs as a Numba call, with the same values
        pipe, got, want = run_both(ds)
        assert "[Numba-compiled call]" in pipe.explain()
        assert [float(v) for v in got] == [float(v) for v in want] == [2.0 * k for k in range(10)]


@pytest.mark.parametrize("strict", [True, False])
def test_an_internal_error_while_recording_fails_in_strict_mode_only(monkeypatch, strict):
    from nbdata.ops import function as ops_function
    from nbdata.trace import function
    monkeypatch.setattr(ops_function, "record_function", lambda fn, spec: _broken_lift(None))
    monkeypatch.setattr(function, "STRICT", strict)
    source = nd.Dataset.from_tensor_slices(np.arange(10.0))
    if strict:
        with pytest.raises(AttributeError, match="NoneType"):
            source.map(lambda x: x * 2.0)
    else:
        pipe, got, want = run_both(source.map(lambda x: x * 2.0))
        assert [float(v) for v in got] == [float(v) for v in want]


def test_a_function_that_cannot_be_recorded_is_not_an_internal_error():
    # Python control flow on a value refuses recording (TraceError.refusal): strict mode
    # (on in this suite) falls back to Numba, as users do.
    ds = nd.Dataset.from_tensor_slices(np.arange(-5.0, 5.0)).map(lambda x: x if x > 0 else -x)
    pipe, got, want = run_both(ds)
    assert "[Numba-compiled call]" in pipe.explain()
    assert [float(v) for v in got] == [float(v) for v in want] == [abs(k) for k in range(-5, 5)]


@pytest.mark.parametrize("source", ["stream", "read-only array", "writable array"])
def test_a_compiled_function_is_compiled_once_for_the_rows_the_kernel_hands_it(source):
    """The planner types a function with the row types the kernel then calls it with:
    a stage's input chunks are passed read-only, and so is a source array's column (a
    source holds a read-only view of the user's array, writable or not; planned as
    writable, every function over them was compiled twice)."""
    x = np.arange(6000, dtype=np.float64).reshape(2000, 3)
    if source == "stream":   # a stage over the chunks of a generator: a stream source
        ds = nd.Dataset.from_generator(lambda: iter(x), output_signature=nd.TensorSpec(
            (3,), np.float64))
    else:
        if source == "read-only array":
            x = x.copy()
            x.flags.writeable = False
        ds = nd.Dataset.from_tensor_slices(x)
    def scale(row):   # a branch on a value: not lifted, a compiled call
        return row * np.float64(2) if row[0] >= 0 else row

    ds = ds.map(scale).batch(500)
    pipe = ds.with_options(fused_options()).compile()
    got = list(pipe)
    assert "Numba-compiled call" in pipe.explain() and pipe.fused_stages()
    compiled = scale._nbdata_dispatcher.signatures   # nbdata's dispatcher of the function
    assert [sig[0].mutable for sig in compiled] == [False]
    want = list(ds.with_options(reference_options()))   # (calls it from Python)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
