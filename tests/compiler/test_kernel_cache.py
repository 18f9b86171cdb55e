"""The on-disk kernel cache: keys follow the functions' code and data, a second process reuses it."""

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd
from nbdata.compiler.kernel_cache import Unfingerprintable, fingerprint, stage_hash

REPO = Path(__file__).resolve().parents[2]


def digest(obj):
    h = hashlib.sha1()
    fingerprint(obj, h)
    return h.hexdigest()


def make_scaler(factor):
    return lambda x: x * factor


WEIGHTS = np.arange(4.0)


def uses_weights(x):
    return x * WEIGHTS


def test_fingerprint_follows_code_closures_and_globals():
    assert digest(make_scaler(2)) == digest(make_scaler(2))
    assert digest(make_scaler(2)) != digest(make_scaler(3))
    assert digest(lambda x: x + 1) != digest(lambda x: x + 2)
    before = digest(uses_weights)
    WEIGHTS[0] = 100.0
    try:
        assert digest(uses_weights) != before  # arrays are hashed by content
    finally:
        WEIGHTS[0] = 0.0
    assert digest(uses_weights) == before


def test_unknown_objects_disable_the_disk_cache():
    table = {1: 2}
    fn = lambda x: table[x]  # noqa: E731
    try:
        digest(fn)
        raise AssertionError("a dict closure must not be fingerprinted")
    except Unfingerprintable:
        pass
    assert stage_hash("def f(): pass\n", [fn]) is None
    assert stage_hash("def f(): pass\n", [make_scaler(2)]) is not None


SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    import nbdata as nd
    OFFSET = float(sys.argv[1])
    x = np.arange(20_000, dtype=np.float64)
    ds = nd.Dataset.from_tensor_slices(x).map(lambda v: np.sqrt(v) + OFFSET).filter(
        lambda v: v > 3.0).batch(1000)
    started = time.perf_counter()
    pipe = ds.compile()
    print(time.perf_counter() - started)
    print(float(sum(b.sum() for b in pipe)))
""")


def run_script(tmp_path, offset):
    # Without NUMBA_CACHE_DIR, which would move Numba's files out of kernels/__pycache__.
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(NBDATA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(offset)], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def expected_total(offset):
    v = np.sqrt(np.arange(20_000, dtype=np.float64)) + offset
    kept = v[v > 3.0]
    return float(sum(kept[i:i + 1000].sum() for i in range(0, len(kept), 1000)))


def test_second_process_loads_the_kernel_and_changed_data_recompiles(tmp_path):
    first_time, first = run_script(tmp_path, 0.5)
    # One stage: its parallel source and its serial twin (FusedStage's two tiers).
    stages = sorted((tmp_path / "kernels").glob("stage_*.py"))
    assert len(stages) == 2
    assert sum("prange(" in p.read_text() for p in stages) == 1
    assert list((tmp_path / "kernels" / "__pycache__").glob("*.nbi"))
    second_time, second = run_script(tmp_path, 0.5)
    assert first == second == expected_total(0.5)
    assert second_time < first_time
    # A different global value is a different kernel: no stale constant is reused.
    _, third = run_script(tmp_path, 1.5)
    assert third == expected_total(1.5)
    assert len(list((tmp_path / "kernels").glob("stage_*.py"))) == 4


PACKAGE_KERNELS = textwrap.dedent("""
    import os
    import numpy as np
    import nbdata as nd
    from nbdata.primitives.image import color
    color.adjust_brightness(np.zeros((2, 2, 3), np.uint8), 0.1)
    print(color._adjust_brightness._cache._cache_path)
""")


@pytest.mark.parametrize("setting", ["dir", "off"])
def test_the_packages_own_kernels_cache_under_nbdata_cache_dir(tmp_path, setting):
    """Module-level @njit(cache=True) kernels of nbdata write their machine code under
    NBDATA_CACHE_DIR (a directory of the process only when it is ""), never into the
    installed package."""
    where = str(tmp_path / "cache") if setting == "dir" else ""
    env = dict(os.environ, NBDATA_CACHE_DIR=where, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", PACKAGE_KERNELS], env=env, check=True,
                         capture_output=True, text=True).stdout.split("\n")
    path = Path(out[0])
    package = Path(nd.__file__).resolve().parent
    assert package not in path.resolve().parents
    if setting == "dir":
        assert (tmp_path / "cache" / "numba") in path.parents
        assert path.name == "image"
        assert list(path.glob("color._adjust_brightness-*.nbi"))
        assert list(path.glob("color._adjust_brightness-*.nbc"))
    else:
        assert not path.exists()   # removed when the process ended


def test_a_cache_entry_naming_a_missing_module_compiles_instead(tmp_path, monkeypatch):
    """A disk-cache entry whose code refers to a module this process cannot import
    (Numba's ``<dynamic>``: met in a Ray host's cache entry) is compiled anew, not
    raised as ModuleNotFoundError to the pipeline."""
    from nbdata.compiler import kernel_cache
    monkeypatch.setenv("NBDATA_CACHE_DIR", str(tmp_path))
    o = nd.Options()
    o.fusion_min_rows = 0
    o.parallel_kernel_after = 0
    x = np.arange(100, dtype=np.int64)
    pipe = nd.Dataset.from_tensor_slices(x).map(lambda v: v * 9 + 4).batch(10).with_options(o)
    calls = []
    real = kernel_cache.compile_kernel

    def broken_cache(kernel, signature):
        if hasattr(kernel.py_func, "_nbdata_module") and kernel._cache.__class__.__name__ != "NullCache":
            def load(*args):
                calls.append(1)
                raise ModuleNotFoundError("No module named '<dynamic>'")
            monkeypatch.setattr(kernel._cache, "load_overload", load)
        return real(kernel, signature)

    monkeypatch.setattr("nbdata.compiler.fused_stage.compile_kernel", broken_cache)
    got = np.concatenate(list(pipe.compile()))
    assert calls and got.tolist() == (x * 9 + 4).tolist()


@pytest.mark.parametrize("fn", [
    lambda x: nd.image.normalize(nd.image.random_flip_left_right(x, (1, 2)),
                                 np.array([120.0, 110.0, 100.0]), np.array([60.0, 50.0, 40.0])),
    nd.image.rgb_to_grayscale,   # compiled through the twin of its recorded graph
])
def test_kernels_of_image_ops_are_cached_on_disk(tmp_path, monkeypatch, fn):
    """nbdata's own functions count in a kernel's cache key by the package's source stamp
    and what they read, however deep they call: a map through image ops (helpers a dozen
    calls deep, op-table entries) gets a key and its kernel a file, where such kernels
    were compiled in memory only ("nested too deeply") and again in every process."""
    monkeypatch.setenv("NBDATA_CACHE_DIR", str(tmp_path))
    images = np.random.default_rng(0).integers(0, 256, (8, 6, 5, 3), dtype=np.uint8)
    options = nd.Options()
    options.fusion_min_rows = 0
    ds = nd.Dataset.from_tensor_slices(images).map(fn).batch(4).with_options(options)
    pipe = ds.compile()
    assert "fused" in pipe.explain()
    got = np.concatenate(list(pipe))
    reference = nd.Options()
    reference.fusion = False
    np.testing.assert_allclose(got, np.concatenate(list(ds.with_options(reference))), rtol=1e-6)
    assert list((tmp_path / "kernels").glob("stage_*.py"))
