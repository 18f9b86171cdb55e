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
    with _serial if serialises_kernels() else contextlib.nullcontext():
        previous = numba.get_num_threads()
        if previous != threads:
            numba.set_num_threads(threads)
        try:
            yield
        finally:
            if previous != threads:
                numba.set_num_threads(previous)


_allocator_tuned = False


def tune_allocator() -> None:
    """Keep freed large blocks in glibc's heap instead of unmapping them (once per
    process, at the first ``compile()``; ``NBDATA_MALLOC_TUNING=0`` turns it off).

    A pipeline allocates large short-lived buffers for every chunk (decoded images,
    kernel outputs, batches). By default glibc maps each block above a dynamic
    threshold afresh and unmaps it when freed, so every chunk pays page faults and
    zero-filling on memory it just gave back; on the ImageNet-style pipeline that was
    about a tenth of the CPU time per image. Raising the mmap threshold to its maximum
    (32 MiB) and the trim threshold keeps those blocks for reuse. Elsewhere than glibc
    this does nothing."""
    global _allocator_tuned
    if _allocator_tuned or os.environ.get("NBDATA_MALLOC_TUNING", "1") == "0":
        return
    _allocator_tuned = True
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    mallopt(m_mmap_threshold, 32 * 1024 * 1024)
    mallopt(m_trim_threshold, 1024 * 1024 * 1024)
    mallopt(m_top_pad, 64 * 1024 * 1024)


class ThreadBudget:
    """One budget for compiled kernels and executor threads (prefetch producers, map
    and interleave workers): ``threading.private_threadpool_size`` threads (0: all
    cores), at most ``autotune.cpu_budget`` when that is set. A kernel call gets the
    budget less the executor threads busy elsewhere at that moment, at least one and
    at most ``threading.max_intra_op_parallelism``, so the two never oversubscribe
    the cores."""

    def __init__(self, options):
        total = options.threading.private_threadpool_size or core_count()
        if options.autotune.cpu_budget:
            total = min(total, options.autotune.cpu_budget)
        self.total = max(1, total)
        self.cap = options.threading.max_intra_op_parallelism or self.total
        self._busy = 0
        self._lock = threading.Lock()
        self._local = threading.local()

    @contextlib.contextmanager
    def worker(self):
        """Marks the calling executor thread busy while the block runs."""
        with self._lock:
            self._busy += 1
        self._local.working = True
        try:
            yield
        finally:
            self._local.working = False
            with self._lock:
                self._busy -= 1

    @property
    def busy(self) -> int:
        return self._busy

    def kernel_threads(self) -> int:
        others = self._busy - (1 if getattr(self._local, "working", False) else 0)
        return max(1, min(self.cap, self.total - others, numba.config.NUMBA_NUM_THREADS))
