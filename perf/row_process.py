"""Runs one table row in a fresh process, so no engine's threads or state leak into another row.

`python -m perf.row_process WORKLOAD INDEX THREADS REPEATS [--quick]`
prints the row's Measurement as one JSON line; `run_row()` is the parent side.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOAD_MODULES = {
    "w1": "perf.w1_map_filter_batch",
    "w2": "perf.w2_tfrecord_parse",
    "w2_gzip": "perf.w2_tfrecord_parse:build_gzip",
    "w3": "perf.w3_csv_decode",
    "parquet": "perf.parquet_table",
    "pack": "perf.pack_table",
    "jpeg": "perf.jpeg_decode",
    "w4": "perf.w4_image_augment",
    "w5": "perf.w5_shuffle_batch",
    "w6": "perf.w6_shuffle_map_batch",
    "mix": "perf.mix_sample",
    "pymap": "perf.pymap_python_map",
    "pymap_nogil": "perf.pymap_python_map:build_nogil",
    "tf1_csv": "perf.tf1_queue_input:build_csv",
    "tf1_tfrecord": "perf.tf1_queue_input:build_tfrecord",
    "tf1_map": "perf.tf1_normalize",
    "distribute": "perf.distribute_scaling",
    "distribute_w1": "perf.distribute_scaling:build_w1",
}
ROW_TIMEOUT_S = 300


def build(workload: str, quick: bool):
    """The Workload named `workload` (a WORKLOAD_MODULES key); cheap, its data is made on first use."""
    import importlib
    module, _, function = WORKLOAD_MODULES[workload].partition(":")
    return getattr(importlib.import_module(module), function or "build")(quick)


def run_row(workload: str, index: int, threads: int, repeats: int, quick: bool):
    """Measure row `index` of `workload` in a child process and return its Measurement."""
    from perf.environment import missing
    from perf.measure import skipped
    impl = build(workload, quick).impls[index]
    why = missing(impl.requires)
    if why:
        return skipped(impl, why)
    command = [sys.executable, "-m", "perf.row_process", workload, str(index),
               str(threads), str(repeats)] + (["--quick"] if quick else [])
    return measure_in_child(command, impl, ROW_TIMEOUT_S)


def measure_in_child(command: list, impl, timeout_s: float):
    """Run a row's child process (its last stdout line is a Measurement as JSON) and
    return that Measurement, or a skipped row saying why it failed."""
    from perf.measure import Measurement, skipped
    # Own process group, so a row that times out is killed with its workers.
    child = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        return skipped(impl, f"failed: no result in {timeout_s} s")
    finally:
        if child.poll() is None:  # interrupted: take the row's processes down too
            _kill_group(child)
    lines = stdout.strip().splitlines()
    if child.returncode != 0 or not lines:
        last = (stderr.strip().splitlines() or [f"exit status {child.returncode}"])[-1]
        return skipped(impl, f"failed: {last[:120]}")
    try:
        return Measurement(**json.loads(lines[-1]))
    except (ValueError, TypeError):
        return skipped(impl, f"failed: unreadable result {lines[-1][:80]!r}")


def _kill_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.communicate()


def _child(workload: str, index: int, threads: int, repeats: int, quick: bool) -> dict:
    from perf.environment import configure_peer, set_thread_env
    set_thread_env(threads)
    # nbdata first: it loads Intel TBB, so that every row's Numba kernels (the hand
    # kernels' too) run on the threading layer nbdata's rows run on.
    import nbdata  # noqa: F401
    from perf.measure import StageError, measure, skipped
    table = build(workload, quick)
    impl = table.impls[index]
    configure_peer(impl.requires, threads)
    try:
        result = measure(impl, table, repeats)
    except Exception as exc:  # reported in the row's note, the table goes on
        text = str(exc) if isinstance(exc, StageError) else f"{type(exc).__name__}: {exc}"
        message = (text.splitlines() or [""])[0][:120]
        result = skipped(impl, f"failed: {message}")
    return dataclasses.asdict(result)


if __name__ == "__main__":
    sys.path.insert(0, REPO_ROOT)
    args = sys.argv[1:]
    quick = "--quick" in args
    args = [a for a in args if a != "--quick"]
    if len(args) != 4 or args[0] not in WORKLOAD_MODULES:
        sys.exit(f"usage: python -m perf.row_process {{{','.join(WORKLOAD_MODULES)}}} "
                 "INDEX THREADS REPEATS [--quick]")
    print(json.dumps(_child(args[0], int(args[1]), int(args[2]), int(args[3]), quick)))
