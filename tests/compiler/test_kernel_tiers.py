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
