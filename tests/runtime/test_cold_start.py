"""Cold start: ``import nbdata`` compiles nothing and leaves the Numba kernel modules of
the file formats and the optional libraries unimported until a pipeline uses them; the
package's compiled kernels are cached by the content of their sources, so a reinstall of
the same sources (another path, new file times) compiles nothing again, while a changed
source file recompiles the kernels that call into it.

The timing targets themselves are perf's (``python -m perf --workload compile``); the
bound here only catches an import that became grossly slow."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd

REPO = Path(__file__).resolve().parents[2]

# Imported by the first pipeline that needs them, never by ``import nbdata``.
LAZY = [
    "nbdata.kernels.crc32c", "nbdata.kernels.records", "nbdata.kernels.protobuf",
    "nbdata.kernels.csv", "nbdata.primitives.example", "nbdata.primitives.csv",
    "simplejpeg", "isal", "ray", "PIL", "pyarrow", "tensorflow", "torch",
]

IMPORT = textwrap.dedent("""
    import json, sys, time
    started = time.perf_counter()
    from numba.core import event
    compiled = []

    class Listener(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__qualname__)

        def on_end(self, ev):
            pass

    event.register("numba:compile", Listener())
    import nbdata
    elapsed = time.perf_counter() - started
    loaded = sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)
    # The lazy attributes still resolve (here, after the check).
    from nbdata.kernels import files
    inflate = files.INFLATE.__name__
    print(json.dumps({"elapsed": elapsed, "compiled": compiled, "loaded": loaded,
                      "inflate": inflate, "errors": len(files.INFLATE_ERRORS),
                      "file": nbdata.__file__}))
""")


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NBDATA_INFLATE")}
    env.update(extra)
    return env


def test_import_compiles_nothing_and_leaves_kernels_and_optional_libraries_unloaded(tmp_path):
    env = _env(PYTHONPATH=str(REPO), NBDATA_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", IMPORT, json.dumps(LAZY)], env=env,
                          check=True, capture_output=True, text=True, cwd=tmp_path)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(out["file"]).resolve() == REPO / "nbdata" / "__init__.py"
    assert out["compiled"] == []           # no kernel compiled or loaded from a cache
    assert out["loaded"] == []
    assert out["inflate"] in ("isal.isal_zlib", "zlib")
    assert out["errors"] == (1 if out["inflate"] == "zlib" else 2)
    # numba alone takes about 0.3 s, nbdata about 0.1 s more; a loaded CI machine may
    # take several times that.
    assert out["elapsed"] < 2.0


def test_crc_shift_tables_computed_with_numpy_equal_the_kernels_result():
    from nbdata.kernels import crc32c as c
    if not c.HARDWARE:
        pytest.skip("the three-lane kernel (and its tables) needs SSE4.2")
    zeros = np.zeros(c.LANE, np.uint8)
    for k in range(4):
        for b in (0, 1, 2, 0x80, 0xA5, 0xFF):
            register = np.uint32(b << (8 * k))
            assert c._SHIFT[k, b] == c.crc32c_update_table(register, zeros, 0, c.LANE)
    # The tables are what the three lanes use: the kernel agrees with the table one on
    # data longer than three lanes.
    data = np.random.default_rng(5).integers(0, 256, 3 * c.LANE + 77, np.uint8)
    assert c.crc32c(data, 0, len(data)) == (
        c.crc32c_update_table(np.uint32(0xFFFFFFFF), data, 0, len(data)) ^ np.uint32(0xFFFFFFFF))


def test_the_scanners_length_checksum_equals_the_general_one():
    import numba

    from nbdata.kernels import crc32c as c

    @numba.njit
    def length_crc(data, start):
        return c.masked_crc32c_u64(data, start)

    rng = np.random.default_rng(7)
    for _ in range(50):
        data = rng.integers(0, 256, 11, np.uint8)
        start = int(rng.integers(0, 4))
        assert length_crc(data, start) == c.masked_crc32c(data, start, start + 8)


PIPELINES = textwrap.dedent("""
    import gc, json, sys
    import numpy as np
    import nbdata as nd
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher
    lines = sum(1 for _ in nd.TextLineDataset(sys.argv[1]))
    ds = (nd.Dataset.from_tensor_slices(np.arange(20_000.0)).map(lambda x: np.sqrt(x) + 0.5)
          .filter(lambda x: x > 3.0).batch(1000))
    total = float(sum(b.sum() for b in ds.compile()))
    compiled = sorted({d.py_func.__qualname__ for d in gc.get_objects()
                       if isinstance(d, Dispatcher) and not isinstance(d._cache, NullCache)
                       and sum(d._cache_misses.values())})
    print(json.dumps({"file": nd.__file__, "lines": lines, "total": total,
                      "compiled": compiled}))
""")


def _run_pipelines(package_root: Path, cache: Path, text: Path) -> dict:
    env = _env(PYTHONPATH=str(package_root), NBDATA_CACHE_DIR=str(cache),
               NUMBA_CACHE_DIR=str(cache / "user"))
    done = subprocess.run([sys.executable, "-c", PIPELINES, str(text)], env=env, check=True,
                          capture_output=True, text=True, cwd=text.parent)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(out["file"]).resolve() == (package_root / "nbdata" / "__init__.py").resolve()
    assert out["lines"] == 3
    values = np.sqrt(np.arange(20_000.0)) + 0.5
    assert out["total"] == pytest.approx(values[values > 3.0].sum(), rel=1e-12)
    return out


def test_a_reinstall_of_the_same_sources_compiles_nothing_and_a_changed_one_recompiles(tmp_path):
    text = tmp_path / "lines.txt"
    text.write_text("a\nbb\nccc\n")
    cache = tmp_path / "cache"
    first = _run_pipelines(REPO, cache, text)
    assert "scan_lines" in first["compiled"]
    stages = sorted((cache / "kernels").glob("stage_*.py"))
    assert len(stages) == 2         # one stage: its parallel source and its serial twin

    # The same sources at another path, every file written anew (a reinstall).
    copy = tmp_path / "reinstalled"
    shutil.copytree(REPO / "nbdata", copy / "nbdata",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    second = _run_pipelines(copy, cache, text)
    assert second["compiled"] == []
    assert sorted((cache / "kernels").glob("stage_*.py")) == stages

    # A change to a file that scan_lines calls into (its word loads and stores live in
    # crc32c.py) recompiles it, although records.py itself is unchanged; the generated
    # kernel (which may inline any of the package's code) is a new one.
    crc = copy / "nbdata" / "kernels" / "crc32c.py"
    crc.write_text(crc.read_text() + "\n# changed\n")
    third = _run_pipelines(copy, cache, text)
    assert "scan_lines" in third["compiled"]
    assert len(list((cache / "kernels").glob("stage_*.py"))) == 4


def test_kernel_sources_follow_calls_into_other_files():
    from nbdata.kernels import csv, records
    from nbdata.options import kernel_sources
    package = Path(nd.__file__).resolve().parent
    names = {str(Path(p).relative_to(package)) for p in kernel_sources(records.scan_tfrecords.py_func)}
    assert names == {"kernels/records.py", "kernels/crc32c.py", "kernels/protobuf.py"}
    names = {str(Path(p).relative_to(package)) for p in kernel_sources(csv.decode_rows_parallel.py_func)}
    assert names == {"kernels/csv.py"}
