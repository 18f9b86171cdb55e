"""Compile time in fresh processes: empty Numba cache, then the same cache warm.

Three pipelines: w1 (`from_tensor_slices.map.filter.batch`), and the first batch of a
fresh process's first TFRecord pipeline (w2's `TFRecordDataset.map(parse_single_example)
.batch(256)`) and first CSV pipeline (w3's `TextLineDataset.batch(256).map(decode_csv)`).

`python -m perf.compile_time --child ROWS` (w1) and `--child tfrecord|csv` are the
measured processes; each prints one JSON line of timings. `report()` runs each twice
against one temporary cache directory (a new one per pipeline) and renders the table.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Clock:
    """Wall seconds of each timed section, and the CPU seconds of all of them (which a
    busy machine disturbs less)."""

    def __init__(self):
        self.timings = {"cpu": 0.0}

    @contextlib.contextmanager
    def section(self, name: str):
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        self.timings[name] = time.perf_counter() - wall
        self.timings["cpu"] += time.process_time() - cpu


def _child(rows: int) -> dict:
    """Time importing nbdata, ds.compile(), the first batch, and the hand kernel's first call."""
    clock = _Clock()
    timings = clock.timings
    with clock.section("import"):
        import nbdata as nd

    from perf import w1_map_filter_batch as w1
    x, y = w1.make_data(rows)
    with clock.section("compile"):
        pipe = w1.nbdata_dataset(nd, x, y).compile()
    with clock.section("first_batch"):
        next(iter(pipe))

    # The hand kernel recompiled with cache=True, for scale: what Numba itself
    # costs for the same loop, against the same cache directory.
    import numba
    from numba.core.registry import CPUDispatcher
    for name, kernel in list(vars(w1).items()):
        if isinstance(kernel, CPUDispatcher):
            options = dict(kernel.targetoptions, cache=True)
            setattr(w1, name, numba.njit(**options)(kernel.py_func))
    start = time.perf_counter()
    next(w1._kernel_batches(x, y))
    timings["kernel_first_batch"] = time.perf_counter() - start
    return timings


def _first_batch_child(kind: str) -> dict:
    """Time importing nbdata, building and `ds.compile()` of the w2 (`tfrecord`) or w3
    (`csv`) pipeline, and its first batch."""
    clock = _Clock()
    with clock.section("import"):
        import nbdata as nd
    from perf import w2_tfrecord_parse as w2
    from perf import w3_csv_decode as w3
    if kind == "tfrecord":
        path = w2.data_file(w2.QUICK_ROWS, "")
        build = lambda: w2.nbdata_dataset(nd, path, "")
    else:
        path = w3.data_file(w3.QUICK_ROWS)
        build = lambda: w3.nbdata_dataset(nd, path)
    with clock.section("compile"):
        pipe = build().compile()
    with clock.section("first_batch"):
        next(iter(pipe))
    return clock.timings


def _child_env(cache_dir: str, pycache: str) -> dict:
    # Both caches start empty: Numba's (hand kernel, nbdata's own njit functions) and
    # nbdata's generated-kernel cache. Python's byte code is read from `pycache`, where
    # an untimed process wrote it, as it is from an installed package.
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir,
               NBDATA_CACHE_DIR=os.path.join(cache_dir, "nbdata"), PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("NBDATA_PARALLEL_KERNEL_AFTER", None)   # a user's start: the default tiers
    return env


def _prepare(pycache: str) -> None:
    """In a process of its own (with a throwaway cache): write nbdata's and perf's byte
    code into `pycache`, and the w2/w3 input files if they are not there yet."""
    code = ("import nbdata\n"
            "from perf import w2_tfrecord_parse as w2, w3_csv_decode as w3\n"
            "w2.data_file(w2.QUICK_ROWS, '')\n"
            "w3.data_file(w3.QUICK_ROWS)\n")
    with tempfile.TemporaryDirectory(prefix="nbdata-perf-setup-") as scratch:
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT,
                              env=_child_env(scratch, pycache), capture_output=True, text=True,
                              timeout=600, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"setup exited {done.returncode}: {last[:160]}")


def _run_child(cache_dir: str, what: str, pycache: str) -> dict:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "perf.compile_time", "--child", what],
                          cwd=REPO_ROOT, env=_child_env(cache_dir, pycache),
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"child exited {done.returncode}: {last[:160]}")
    timings = json.loads(done.stdout.strip().splitlines()[-1])
    # The whole process, its start and exit included: a first process whose record
    # kernels ran their Python source (tier 0) waits at its exit for their compile.
    timings["process"] = time.perf_counter() - started
    return timings


def _cache_files(cache_dir: str) -> int:
    return sum(name.endswith(".nbi") for _, _, names in os.walk(cache_dir) for name in names)


def report(header: str, quick: bool, load) -> str:
    """Run the cold and the warm process and render their timings as a table.

    `load` is the perf.environment.OtherLoad started before, for the header.
    """
    from perf.w1_map_filter_batch import FULL_ROWS, QUICK_ROWS
    rows = QUICK_ROWS if quick else FULL_ROWS
    title = (f"== compile time: the w1 pipeline over {rows:,} rows and the first TFRecord "
             "and CSV pipelines, each run a fresh process ==")
    names = {str(rows): "w1", "tfrecord": "w2 TFRecord", "csv": "w3 CSV"}
    runs = {}
    with tempfile.TemporaryDirectory(prefix="nbdata-perf-pyc-") as pycache:
        try:
            _prepare(pycache)
            for what in names:
                with tempfile.TemporaryDirectory(prefix="nbdata-perf-cache-") as cache_dir:
                    cold = _run_child(cache_dir, what, pycache)
                    files = _cache_files(cache_dir)
                    runs[what] = (cold, _run_child(cache_dir, what, pycache), files)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            return "\n".join([title, f"{header}; {load.describe()}", f"skipped: {exc}"])
    cols = ("pipeline", "process", "import nbdata", "ds.compile()", "first batch",
            "compile+first", "import+compile+first", "(its CPU time)", "whole process",
            "hand kernel 1st batch")
    body = []
    for what, (cold, warm, _) in runs.items():
        for label, t in (("1st: empty caches", cold), ("2nd: same caches, warm", warm)):
            hand = t.get("kernel_first_batch")
            body.append((names[what], label, f"{t['import']:.2f} s", f"{t['compile']:.2f} s",
                         f"{t['first_batch']:.2f} s", f"{t['compile'] + t['first_batch']:.2f} s",
                         f"{t['import'] + t['compile'] + t['first_batch']:.2f} s",
                         f"{t['cpu']:.2f} s", f"{t['process']:.2f} s",
                         "-" if hand is None else f"{hand:.2f} s"))
    widths = [max(len(c), *(len(row[i]) for row in body)) for i, c in enumerate(cols)]

    def render(row):
        return "  ".join(f"{v:{'<' if i < 2 else '>'}{w}}"
                         for i, (v, w) in enumerate(zip(row, widths)))

    lines = [title, f"{header}; {load.describe()}", render(cols), "  ".join("-" * w for w in widths)]
    lines.extend(render(row) for row in body)
    files = ", ".join(f"{names[what]} {n}" for what, (_, _, n) in runs.items())
    lines.append(f"cache index files (.nbi) written by the 1st process: {files}; "
                 "hand kernel = the w1 kernel recompiled with cache=True, for scale; whole "
                 "process = the child's wall time, start to exit (a first TFRecord or CSV "
                 "process gets its first batches from the kernels' Python source and waits "
                 "for their compile at its exit)")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        sys.path.insert(0, REPO_ROOT)
        what = sys.argv[2]
        print(json.dumps(_first_batch_child(what) if what in ("tfrecord", "csv")
                         else _child(int(what))))
    else:
        sys.exit("usage: python -m perf.compile_time --child ROWS|tfrecord|csv "
                 "(run by `python -m perf`)")
