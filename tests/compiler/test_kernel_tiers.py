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
