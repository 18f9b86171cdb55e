"""A fused stage's two kernels (nbdata/compiler/fused_stage.py): the serial twin it
starts with and the parallel kernel that takes over after ``parallel_kernel_after``
seconds of work, or from the start when it is compiled already (in memory or in the
disk cache). Either runs a chunk to the same rows."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd

REPO = Path(__file__).resolve().parents[2]


def pipeline(after, n=50_000, salt=0):
    o = nd.Options()
    o.fusion_min_rows = 0
    o.chunk_rows = 1000
    o.parallel_kernel_after = after
    x = np.arange(n, dtype=np.int64)
    # ``salt`` makes the kernel one no other test compiled (its own tiers).
    ds = nd.Dataset.from_tensor_slices((x, x.astype(np.float32))).map(
        lambda a, b: (a * 3 + salt, b * np.float32(0.5))).filter(
        lambda a, b: a % 7 != 1).batch(100)
    return ds.with_options(o).compile()


def rows(pipe):
    return [(a.tolist(), b.tolist()) for a, b in pipe]


def reference():
    o = nd.Options()
    o.fusion = False
    x = np.arange(50_000, dtype=np.int64)
    ds = nd.Dataset.from_tensor_slices((x, x.astype(np.float32))).map(
        lambda a, b: (a * 3 + 1, b * np.float32(0.5))).filter(
        lambda a, b: a % 7 != 1).batch(100)
    return rows(ds.with_options(o))


def test_a_stage_starts_serial_and_the_parallel_kernel_takes_over_with_the_same_rows(
        tmp_path, monkeypatch):
    # An empty disk cache: one that holds this parallel kernel would run it at once.
    monkeypatch.setenv("NBDATA_CACHE_DIR", str(tmp_path))
    pipe = pipeline(1e-9, salt=1)
    (stage,) = pipe.fused_stages()
    assert "prange(" in stage.source_text
    assert stage.serial.overloads and not stage.kernel.overloads   # compile() made one
    first = rows(pipe)                           # promotion starts after the first call
    stage.tier["promoting"].join(120)
    assert stage.tier["parallel"] and stage.kernel.overloads
    second = rows(pipe)
    assert first == second == reference()


def test_zero_compiles_the_parallel_kernel_and_infinity_never_does():
    pipe = pipeline(0, salt=2)
    (stage,) = pipe.fused_stages()
    assert stage.serial is None and stage.kernel.overloads and stage.tier["parallel"]
    assert rows(pipe)[:3] == rows(pipeline(float("inf"), salt=2))[:3]
    never = pipeline(float("inf"), salt=2)
    (stage,) = never.fused_stages()
    for _ in range(3):
        rows(never)
    assert stage.tier["promoting"] is None and not stage.tier["parallel"]
    assert stage.tier["serial_seconds"] > 0


SCRIPT = """
import json, sys
import numpy as np
import pytest
import nbdata as nd
o = nd.Options(); o.fusion_min_rows = 0; o.parallel_kernel_after = float(sys.argv[1])
x = np.arange(10_000, dtype=np.int64)
pipe = nd.Dataset.from_tensor_slices(x).map(lambda v: v * 5 - 2).batch(64).with_options(o).compile()
(stage,) = pipe.fused_stages()
total = int(sum(int(b.sum()) for b in pipe))
print(json.dumps({"parallel": bool(stage.tier["parallel"]), "total": total}))
"""


def test_a_parallel_kernel_in_the_disk_cache_runs_from_the_start(tmp_path):
    env = dict(os.environ, NBDATA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(REPO))

    def run(after):
        out = subprocess.run([sys.executable, "-c", SCRIPT, str(after)], env=env, check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    expected = int((np.arange(10_000) * 5 - 2).sum())
    assert run(1000.0) == {"parallel": False, "total": expected}   # serial: nothing cached
    assert run(0) == {"parallel": True, "total": expected}         # compiles, caches it
    assert run(1000.0) == {"parallel": True, "total": expected}    # found in the cache


def test_a_bad_setting_is_refused():
    o = nd.Options()
    for bad in (-1, "1", True):
        try:
            o.parallel_kernel_after = bad
        except ValueError as e:
            assert "parallel_kernel_after must be a number of seconds >= 0" in str(e)
        else:
            raise AssertionError(f"{bad!r} was accepted")


# ------------------------------------------------ library kernels (nbdata/kernels/tiers.py)

KERNEL_MODULE = '''
import numba
import numpy as np
import pytest
from nbdata.kernels.tiers import tiered

@tiered(nogil=True, cache=True)
def scaled_sum(x, out):
    for b in numba.prange(out.shape[0]):
        acc = 0.0
        for q in range(x.shape[1]):
            acc += x[b, q] * (b + 1)
        out[b] = acc
'''


def _kernel_module(tmp_path, monkeypatch, name):
    """A module of its own (its own Numba disk cache beside it) holding a TieredKernel."""
    import importlib
    (tmp_path / f"{name}.py").write_text(KERNEL_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


def _run(kernel):
    x = np.arange(600, dtype=np.float64).reshape(20, 30)
    out = np.empty(20)
    kernel(x, out)
    return out


def test_a_library_kernel_runs_its_serial_twin_then_the_parallel_kernel(tmp_path, monkeypatch):
    from nbdata.kernels import tiers
    module = _kernel_module(tmp_path, monkeypatch, "tiered_a")
    kernel = module.scaled_sum
    want = (np.arange(600, dtype=np.float64).reshape(20, 30).sum(axis=1)
            * np.arange(1, 21))
    monkeypatch.setattr(tiers, "PARALLEL_AFTER", 1e-9)
    np.testing.assert_array_equal(_run(kernel), want)   # the twin, compiled by this call
    (tier,) = kernel._tiers.values()
    assert tier["seconds"] == 0 and tier["promoting"] is None   # compiling is not work
    np.testing.assert_array_equal(_run(kernel), want)   # the twin again; promotion starts
    assert kernel.serial.signatures and not kernel.parallel.signatures
    tier["promoting"].join(timeout=300)
    assert tier["parallel"] and kernel.parallel.signatures
    np.testing.assert_array_equal(_run(kernel), want)   # the parallel kernel, same values
    assert len(kernel.signatures) == 1                   # one signature in either tier

    # A fresh kernel of the same function finds the parallel tier in the disk cache and
    # runs it from the first call, compiling no twin.
    again = tiers.TieredKernel(module.scaled_sum.py_func, {"nogil": True, "cache": True})
    np.testing.assert_array_equal(_run(again), want)
    assert again.parallel.signatures and not again.serial.signatures


def test_library_kernel_tier_settings(tmp_path, monkeypatch):
    from nbdata.kernels import tiers
    from nbdata.options import parallel_kernel_after_default
    module = _kernel_module(tmp_path, monkeypatch, "tiered_b")
    monkeypatch.setattr(tiers, "PARALLEL_AFTER", float("inf"))
    kernel = module.scaled_sum
    for _ in range(3):
        _run(kernel)
    assert kernel.serial.signatures and not kernel.parallel.signatures
    monkeypatch.setattr(tiers, "PARALLEL_AFTER", 0.0)
    fresh = tiers.TieredKernel(module.scaled_sum.py_func, {"nogil": True})
    _run(fresh)
    assert fresh.parallel.signatures and not fresh.serial.signatures
    for bad in ("-1", "soon"):
        monkeypatch.setenv("NBDATA_PARALLEL_KERNEL_AFTER", bad)
        with pytest.raises(ValueError, match="NBDATA_PARALLEL_KERNEL_AFTER"):
            parallel_kernel_after_default()


# ------------------------------------------------ nbdata's own tiered kernels

def _tiered_kernels() -> dict:
    """``{name: TieredKernel}`` of every tiered library kernel in nbdata/kernels."""
    import importlib
    import pkgutil

    from nbdata import kernels
    from nbdata.kernels.tiers import TieredKernel
    found = {}
    for info in pkgutil.iter_modules(kernels.__path__, "nbdata.kernels."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, TieredKernel) and value.py_func.__module__ == info.name:
                found[f"{info.name}.{name}"] = value
    return found


def _library_inputs(tmp_path) -> tuple:
    """A CSV file and a TFRecord file of Examples with VarLen values."""
    csv_path = str(tmp_path / "rows.csv")
    with open(csv_path, "wb") as f:
        f.write(b"".join(b'%d,"q,%d",%d.5,\n' % (i, i, i) for i in range(3000)))
    plain_path = str(tmp_path / "numbers.csv")   # mostly plain numbers: the one-pass kernel
    with open(plain_path, "wb") as f:
        f.write(b"".join((b' %d,"%d.25",\n' if i % 7 == 0 else b"%d,%d.25,-%d\n") % (
            (i, i) if i % 7 == 0 else (i, i, i)) for i in range(3000)))
    tfr_path = str(tmp_path / "rows.tfrecord")
    with nd.io.TFRecordWriter(tfr_path) as writer:
        for i in range(4100):
            writer.write(nd.io.encode_example({"label": i, "v": np.arange(i % 5) + i}))
    return csv_path, tfr_path, plain_path


def _library_pipelines(csv_path, tfr_path, plain_path) -> list:
    """One pipeline per tiered library kernel, on inputs that give each thread of the
    parallel tier many rows: CSV decoding, record parsing with VarLen values (a batch of
    4,096 records or more is parsed in parallel), compaction, shuffle draws, packing."""
    csv = nd.TextLineDataset(csv_path).batch(512).map(
        lambda b: nd.io.decode_csv(b, [np.int64(0), [""], np.float64(0), np.int64(-1)]))
    plain = nd.TextLineDataset(plain_path).batch(512).map(
        lambda b: nd.io.decode_csv(b, [np.int64(0), np.float32(0), np.int32(7)]))
    features = {"label": nd.io.FixedLenFeature([], np.int64),
                "v": nd.io.VarLenFeature(np.int64)}
    records = nd.TFRecordDataset(tfr_path).batch(4100).map(
        lambda r: nd.io.parse_example(r, features))
    x = np.arange(60_000, dtype=np.int64).reshape(20_000, 3)
    compaction = nd.Dataset.from_tensor_slices(x).map(lambda v: v * 2).filter(
        lambda v: v[0] % 9 != 0).batch(1000)
    scalars = nd.Dataset.from_tensor_slices(x[:, 1].copy()).filter(   # rows of one word
        lambda v: v % 9 != 0).batch(1000)
    pairs = nd.Dataset.from_generator(   # rows of two columns: slots drawn, then rows swapped
        lambda: ((i, -i) for i in range(8000)),
        output_signature=(nd.TensorSpec((), np.int64), nd.TensorSpec((), np.int64)))
    shuffled = pairs.shuffle(4000, seed=3).batch(1000)
    seqs = [np.arange(i % 37 + 1, dtype=np.int32) for i in range(2000)]
    packed = nd.Dataset.from_generator(
        lambda: iter(seqs), output_signature=nd.TensorSpec((None,), np.int32)).apply(
        nd.experimental.pack(64)).batch(64)
    return [csv, plain, records, compaction, scalars, shuffled, packed]


def _flat_values(e):
    if isinstance(e, dict):
        return [v for k in sorted(e) for v in _flat_values(e[k])]
    if isinstance(e, (tuple, list)):
        return [v for x in e for v in _flat_values(x)]
    if hasattr(e, "values") and hasattr(e, "indices"):    # a SparseTensor
        return [np.asarray(e.indices), np.asarray(e.values), np.asarray(e.dense_shape)]
    assert isinstance(e, np.ndarray), type(e)
    return [e]


def test_every_library_kernel_s_parallel_tier_gives_its_twin_s_rows(tmp_path, monkeypatch):
    """The parallel tier of each tiered library kernel, threads racing over its rows,
    gives the rows its serial twin gives. Run deliberately: a twin promotes only after a
    second of work, which a test's inputs seldom reach."""
    from nbdata.kernels import tiers
    kernels = _tiered_kernels()
    assert len(kernels) >= 6, sorted(kernels)
    options = nd.Options()
    options.fusion_min_rows = 0
    options.threading.private_threadpool_size = 2
    outputs = {}
    inputs = _library_inputs(tmp_path)
    for after in (float("inf"), 0.0):
        monkeypatch.setattr(tiers, "PARALLEL_AFTER", after)
        for kernel in kernels.values():
            monkeypatch.setattr(kernel, "_tiers", {})
        outputs[after] = [[_flat_values(e) for e in ds.with_options(options)]
                          for ds in _library_pipelines(*inputs)]
        ran = {name for name, k in kernels.items()
               if any(t["parallel"] == (after == 0) for t in k._tiers.values())}
        assert ran == set(kernels), sorted(set(kernels) - ran)
    serial, parallel = outputs[float("inf")], outputs[0.0]
    for s, p in zip(serial, parallel):
        assert len(s) == len(p) > 0
        for a, b in zip(s, p):
            assert len(a) == len(b)
            for u, v in zip(a, b):
                assert u.dtype == v.dtype
                np.testing.assert_array_equal(u, v)


def test_argument_types_are_numbas_and_typed_once_per_kind_of_arguments(monkeypatch):
    from collections import namedtuple
    import numba
    from nbdata.kernels import tiers
    Pair = namedtuple("Pair", "a b")
    ro = np.arange(6, dtype=np.int64)
    ro.flags.writeable = False
    calls = [(np.zeros(3), ro, np.zeros((2, 3), np.float32)[:, ::2], 7, True, np.uint8(44)),
             (np.zeros(3), np.arange(6, dtype=np.int64), np.zeros((2, 2), np.float32), 7, True,
              np.uint8(44)),
             (Pair(np.zeros(2), np.zeros(2, np.int32)), (np.zeros(2), np.zeros(2, np.int32))),
             (np.zeros((2, 3), order="F"), np.zeros(3, np.complex64))]
    cache = {}
    for args in calls:
        assert tiers.arg_types(args, cache) == tuple(numba.typeof(a) for a in args)
    typed = []
    real = numba.typeof
    monkeypatch.setattr(numba, "typeof", lambda v, *a: (typed.append(v), real(v, *a))[1])
    for args in calls:   # the same kinds of arguments again: answered from the cache
        fresh = tuple(a.copy(order="K") if isinstance(a, np.ndarray) and a.flags.writeable
                      and (a.flags.c_contiguous or a.flags.f_contiguous) else a for a in args)
        assert tiers.arg_types(fresh, cache) == tuple(real(a) for a in fresh)
    assert typed == []


def test_a_large_example_parse_runs_parse_range_until_the_parallel_kernel_takes_over(
        monkeypatch):
    """Until their parallel tiers take over, the Example parser's chunked kernels are
    served by the serial kernels they split (parse_range, fill_varlen_range): a first
    TFRecord pipeline compiles no serial twin of them (1.6-2.1 s of its first epoch),
    and that serial time counts toward the promotion as the twin's would."""
    from nbdata.kernels import protobuf as pb, tiers
    from nbdata.primitives import example
    fresh = {}
    for name in ("parse_parallel", "fill_varlen_parallel"):
        fresh[name] = tiers.TieredKernel(getattr(pb, name).py_func, {"nogil": True})
        monkeypatch.setattr(pb, name, fresh[name])
    promoted = []
    monkeypatch.setattr(tiers, "PARALLEL_AFTER", 1e-9)
    monkeypatch.setattr(tiers.TieredKernel, "_promote",
                        lambda self, sig, tier: promoted.append(self.py_func.__name__))
    n = 5000
    assert example._chunks(n) > 1
    records = [nd.io.encode_example({"x": np.arange(3, dtype=np.float32) + i,
                                     "v": np.arange(i % 4, dtype=np.int64)}) for i in range(n)]
    features = {"x": nd.io.FixedLenFeature([3], np.float32),
                "v": nd.io.VarLenFeature(np.int64)}
    for _ in range(2):   # a first call may compile the serial kernels: not counted
        got = nd.io.parse_example(records, features)
    np.testing.assert_array_equal(
        got["x"], np.arange(3, dtype=np.float32) + np.arange(n, dtype=np.float32)[:, None])
    np.testing.assert_array_equal(got["v"].values,
                                  np.concatenate([np.arange(i % 4) for i in range(n)]))
    for kernel in fresh.values():
        assert not kernel.serial.signatures and not kernel.parallel.signatures
    assert sorted(set(promoted)) == ["fill_varlen_parallel", "parse_parallel"]
    # a bad record among many is still the lowest one, named as TF names it
    bad = records[:3000] + [b"\x0a\x03abc"] + records[3000:]
    with pytest.raises(nd.errors.InvalidArgumentError, match="3000"):
        nd.io.parse_example(bad, features)


def test_short_csv_decodes_do_not_count_toward_compiling_the_parallel_decoder(monkeypatch):
    """CSV decode runs one kernel at every size; a call of one block (under 4,096 rows on
    two threads) gains nothing from the parallel tier, so only longer calls count."""
    from nbdata.kernels import csv as kc, python_tier, tiers
    # (tier 0 off: the twin compiles at its first call, as where the disk cache has it;
    # tests/io/test_python_tier.py checks that tier 0's calls do not count either)
    monkeypatch.setattr(python_tier, "ENABLED", False)
    fresh = tiers.TieredKernel(kc.decode_rows_parallel.py_func, {"nogil": True})
    monkeypatch.setattr(kc, "decode_rows_parallel", fresh)
    # (numeric records: the one-pass kernel, with the general kernel's twin until then)
    monkeypatch.setattr(kc, "decode_plain_rows_parallel", tiers.TieredKernel(
        kc.decode_plain_rows_parallel.py_func, {"nogil": True}))
    promoted = []
    monkeypatch.setattr(tiers, "PARALLEL_AFTER", 1e-9)
    monkeypatch.setattr(tiers.TieredKernel, "_promote",
                        lambda self, sig, tier: promoted.append(self.py_func.__name__))
    lines = np.array([f"{i},{i / 4}".encode() for i in range(5000)], dtype=object)
    for _ in range(3):
        ints, halves = nd.io.decode_csv(lines[:300], [[0], [0.0]])
    np.testing.assert_array_equal(ints, np.arange(300))
    assert promoted == [] and fresh.serial.signatures
    for _ in range(2):
        ints, halves = nd.io.decode_csv(lines, [[0], [0.0]])
    np.testing.assert_array_equal(halves, np.arange(5000, dtype=np.float32) / 4)
    assert set(promoted) == {"decode_plain_rows_parallel"}
    promoted.clear()   # a string column: the general kernel's own parallel tier
    words = np.array([f"{i},w{i}".encode() for i in range(5000)], dtype=object)
    for _ in range(2):
        ints, text = nd.io.decode_csv(words, [[0], [""]])
    assert set(promoted) == {"decode_rows_parallel"} and text[4999] == b"w4999"
    with pytest.raises(nd.errors.InvalidArgumentError, match="4321"):
        bad = lines.copy()
        bad[4321] = b"1,x"
        nd.io.decode_csv(bad, [[0], [0.0]])
