"""One thread budget for compiled kernels, and safe kernel calls under every Numba
threading layer."""

from __future__ import annotations

import contextlib
import os
import threading

import numba

_layer: str | None = None
_layer_lock = threading.Lock()
_serial = threading.Lock()


def core_count() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def kernel_threads(options) -> int:
    """Threads one kernel call may use: ``threading.private_threadpool_size`` (0: all
    cores), capped by ``threading.max_intra_op_parallelism`` (0: no cap) and by the
    threads Numba started (``NUMBA_NUM_THREADS``)."""
    threading_options = options.threading
    budget = threading_options.private_threadpool_size or core_count()
    cap = threading_options.max_intra_op_parallelism
    if cap:
        budget = min(budget, cap)
    return max(1, min(budget, numba.config.NUMBA_NUM_THREADS))


def threading_layer() -> str:
    """Numba's threading layer, started if it was not yet."""
    global _layer
    if _layer is None:
        with _layer_lock:
            if _layer is None:
                try:
                    from numba.np.ufunc.parallel import _launch_threads
                    _launch_threads()
                    _layer = numba.threading_layer()
                except Exception:  # noqa: BLE001 - unknown layer: assume the restrictive one
                    _layer = "workqueue"
    return _layer


def serialises_kernels() -> bool:
    """True under Numba's ``workqueue`` layer, which aborts the process when two threads
    launch parallel kernels at once: nbdata then runs one kernel at a time (install
    ``tbb`` or use the OpenMP layer, ``NUMBA_THREADING_LAYER=omp``, to overlap them)."""
    return threading_layer() == "workqueue"


@contextlib.contextmanager
def kernel_section(threads: int):
    """Parallel kernels called inside run on ``threads`` threads (a per-thread Numba
    setting), one section at a time under the workqueue layer."""
    guard = _serial if serialises_kernels() else contextlib.nullcontext()
    with guard:
        previous = numba.get_num_threads()
        if previous != threads:
            numba.set_num_threads(threads)
        try:
            yield
        finally:
            if previous != threads:
                numba.set_num_threads(previous)
