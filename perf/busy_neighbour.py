"""Busy neighbour (issue 32): the w4 and w1 nbdata rows while another process keeps one
core busy with a one-thread NumPy matmul loop (as a trainer beside the pipeline does),
with nbdata's default settings (every core, its fused kernels' thread counts tuned from
their measured speed) and at each manual count 1..cores; prints the default's rate over
the best manual one's. Target: default >= 0.9x the best.

`python -m perf --workload neighbour` (each cell is one row process of that workload's
nbdata row, the same as `--workload w4`'s: with NUMBA_NUM_THREADS=n, or with no thread
setting for the default).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

NEIGHBOUR = """
import os
import numpy as np
a = np.random.default_rng(0).random((384, 384))
while True:
    a = a @ a
    a /= np.abs(a).max() + 1.0
"""


def _start_neighbour() -> subprocess.Popen:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = "1"   # one thread: keeps exactly one core busy
    return subprocess.Popen([sys.executable, "-c", NEIGHBOUR], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _stop(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait(10)


def _rate(m) -> float:
    if m.skipped or not m.times:
        return float("nan")
    return m.rows / m.best_s


def report(line: str, quick: bool, load, cores: int, repeats: int) -> str:
    from perf.row_process import build, run_row
    counts = list(range(1, cores + 1))
    rows = []
    neighbour = _start_neighbour()
    try:
        time.sleep(0.5)   # the neighbour's NumPy import is done, its loop running
        for workload in ("w4", "w1"):
            impls = build(workload, quick).impls
            index = next(i for i, impl in enumerate(impls) if impl.group == "nbdata")
            print(f"  neighbour: {workload} {impls[index].name} ...", file=sys.stderr, flush=True)
            # threads 0: no NUMBA_NUM_THREADS and no thread option, as a user runs it
            default = _rate(run_row(workload, index, 0, repeats, quick))
            manual = {n: _rate(run_row(workload, index, n, repeats, quick)) for n in counts}
            best_n = max(manual, key=lambda n: manual[n] if manual[n] == manual[n] else -1.0)
            rows.append((workload, impls[index].name, default, manual, best_n))
    finally:
        _stop(neighbour)
    out = [f"== busy neighbour: nbdata with one other process running a one-thread NumPy "
           f"matmul loop ==", f"{line}; {load.describe()}",
           "default = nbdata's defaults (no NUMBA_NUM_THREADS, no thread option: every "
           "core, kernel threads tuned from measured speed); best = the fastest manual "
           "NUMBA_NUM_THREADS; target default/best >= 0.9"]
    head = f"{'workload':<9} {'default':>12} " + " ".join(f"{f'{n} thr':>12}" for n in counts)
    out.append(head + f" {'default/best':>13}")
    for workload, name, default, manual, best_n in rows:
        cells = " ".join(f"{manual[n] / 1e3:>10.0f}K/s" for n in counts)
        ratio = default / manual[best_n] if manual[best_n] else float("nan")
        out.append(f"{workload:<9} {default / 1e3:>10.0f}K/s {cells} {ratio:>12.2f}x"
                   f"   (best: {best_n} thread{'s' if best_n > 1 else ''})")
    out.append("rows/s of the source (w4: images, w1: elements)")
    return "\n".join(out)
