"""Thread settings applied before any engine is imported, optional peers, and the version header."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import platform
import sys
import time
from typing import Optional

# Distribution names to ask for each module's version without importing it.
_DISTRIBUTIONS = {
    "numpy": ("numpy",),
    "numba": ("numba",),
    "tensorflow": ("tensorflow-cpu", "tensorflow"),
    "torch": ("torch",),
}


def core_count() -> int:
    """Cores this process may run on (the affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def thread_budget() -> int:
    """The --threads of this run, as `set_thread_env` exported it (else all cores)."""
    try:
        return int(os.environ["NUMBA_NUM_THREADS"])
    except (KeyError, ValueError):
        return core_count()


def set_thread_env(threads: int) -> None:
    """Give every engine the same thread budget; must run before numba/tf/torch import.
    0: leave every engine at its defaults (the busy-neighbour table's default column)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMBA_NUM_THREADS"):
        if threads > 0:
            os.environ[var] = str(threads)
        else:
            os.environ.pop(var, None)
    # The tables measure steady throughput: nbdata's parallel kernels from the first call
    # (a pipeline otherwise runs serial twins for its first second of work; the compile
    # table measures that start, with the default).
    os.environ.setdefault("NBDATA_PARALLEL_KERNEL_AFTER", "0")
    # TensorFlow's C++ start-up chatter would otherwise land in the output.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _import_quietly(name: str):
    """Import with fd 2 silenced (TensorFlow logs from C++, past sys.stderr); None on failure."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            return importlib.import_module(name)
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def configure_peer(module: Optional[str], threads: int) -> None:
    """Import the peer a row needs and pin its intra/inter-op threads to `threads`
    (0: its defaults)."""
    if threads <= 0:
        return
    if module == "tensorflow":
        tf = _import_quietly("tensorflow")
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        import absl.logging
        absl.logging.set_verbosity(absl.logging.ERROR)
    elif module == "torch":
        import torch
        torch.set_num_threads(threads)


def missing(module: Optional[str]) -> Optional[str]:
    """Why a row needing `module` cannot run, or None when it can be tried (without importing it)."""
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return f"{module} not installed (see perf/README.md)"


def _version(module: str) -> str:
    for distribution in _DISTRIBUTIONS.get(module, (module,)):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "missing"


def _numba_threading_layer() -> str:
    import nbdata  # noqa: F401 - loads Intel TBB first: the layer nbdata's rows run on
    import numba

    @numba.njit(parallel=True)
    def touch(a):
        for i in numba.prange(a.shape[0]):
            a[i] = i

    import numpy as np
    touch(np.empty(4))
    return numba.threading_layer()


def header(threads: int) -> str:
    """One line naming the cores, thread budget and every engine's version."""
    return "; ".join([
        f"{core_count()} cores, {threads} threads per engine",
        f"Python {platform.python_version()}",
        f"numpy {_version('numpy')}",
        f"numba {_version('numba')} ({_numba_threading_layer()} layer)",
        f"nbdata {_version('nbdata') if _version('nbdata') != 'missing' else 'from repo'}",
        f"tensorflow {_version('tensorflow')}",
        f"torch {_version('torch')}",
        f"pyarrow {_version('pyarrow')}",
        f"simplejpeg {_version('simplejpeg')}",
    ])


class OtherLoad:
    """How many cores other processes kept busy while we measured (Linux /proc/stat).

    Rows run on all cores; a test suite or build running beside them steals
    a core and makes parallel rows wait for a descheduled thread, so the
    table says how busy the machine was apart from us.
    """

    def __init__(self):
        self._start = self._sample()

    @staticmethod
    def _sample():
        try:
            with open("/proc/stat") as stat:
                fields = [int(v) for v in stat.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        # user nice system idle iowait irq softirq steal ...: all but idle/iowait
        busy = sum(fields) - fields[3] - fields[4]
        own = os.times()
        return (busy / os.sysconf("SC_CLK_TCK"),
                own.user + own.system + own.children_user + own.children_system,
                time.monotonic())

    def cores(self) -> Optional[float]:
        """Average cores used by other processes since construction, or None if unknown."""
        end = self._sample()
        if self._start is None or end is None or end[2] <= self._start[2]:
            return None
        other = (end[0] - self._start[0]) - (end[1] - self._start[1])
        return max(0.0, other / (end[2] - self._start[2]))

    def describe(self) -> str:
        cores = self.cores()
        if cores is None:
            return ""
        text = f"other processes used {cores:.2f} cores meanwhile"
        return text + " -- NOISY, rerun on a quiet machine" if cores > 0.2 else text
