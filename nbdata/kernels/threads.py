"""One thread budget for compiled kernels, and safe kernel calls under every Numba
threading layer."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time

import numba

_layer: str | None = None
_layer_lock = threading.Lock()
_serial = threading.Lock()
# The pid that launched Numba's GNU OpenMP layer when this process is a fork() of it:
# GNU OpenMP cannot run in a forked child (Numba's layer terminates the process at the
# child's first parallel kernel), so nbdata refuses at once with a clear error instead.
_omp_forked_from: int | None = None


def _layer_admits_tbb() -> bool:
    """Whether the configured layer (``NUMBA_THREADING_LAYER``) lets Numba pick tbb."""
    return str(numba.config.THREADING_LAYER).lower() in ("default", "tbb", "safe", "threadsafe")


def _load_pip_tbb() -> bool:
    """Make Intel TBB loadable for Numba's ``tbb`` threading layer.

    The ``tbb`` wheel from PyPI (a dependency of nbdata) puts ``libtbb.so.12`` in the
    environment's ``lib/`` folder, which the dynamic loader does not search, so Numba
    would silently fall back to GNU OpenMP, whose threads spin while cores are taken
    and which dies in fork()-started children (PyTorch DataLoader workers). Loading the
    library by its path first (RTLD_GLOBAL) lets Numba's tbbpool module find it. Does
    nothing when Numba's threads already started or a layer other than the default
    (or ``tbb``) was asked for with ``NUMBA_THREADING_LAYER``."""
    import sys
    if not sys.platform.startswith("linux"):
        return False
    try:
        from numba.np.ufunc import parallel
        if parallel._is_initialized:
            return False
        if not _layer_admits_tbb():
            return False
    except Exception:  # noqa: BLE001 - an unfamiliar Numba: leave it as it is
        return False
    import ctypes
    try:
        ctypes.CDLL("libtbb.so.12", mode=ctypes.RTLD_GLOBAL)
        return True
    except OSError:
        pass
    def candidates():
        yield os.path.join(sys.prefix, "lib", "libtbb.so.12")
        try:   # elsewhere (a --user install): where the tbb distribution put it
            from importlib import metadata
            for f in metadata.files("tbb") or ():
                if f.name == "libtbb.so.12":
                    yield str(f.locate())
        except Exception:  # noqa: BLE001 - tbb not installed as a distribution
            return

    for path in candidates():
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return True
            except OSError:
                continue
    return False


_tbb_loadable = _load_pip_tbb()


_shared = None
_shared_lock = threading.Lock()
_in_shared = threading.local()


def _mark_shared_thread() -> None:
    _in_shared.active = True


def in_shared_pool() -> bool:
    """Whether the calling thread is one of :func:`shared_pool`'s."""
    return getattr(_in_shared, "active", False)


def _shared_pool_class():
    import concurrent.futures

    class SharedPool(concurrent.futures.ThreadPoolExecutor):
        """A pool whose tasks never wait for its other tasks: ``submit`` from one of
        its own threads runs the function there and then (a completed future), so
        a task that splits its work (a gather whose source decodes columns on the
        pool) cannot block every thread on work queued behind it."""

        def submit(self, fn, /, *args, **kwargs):
            if not in_shared_pool():
                return super().submit(fn, *args, **kwargs)
            future = concurrent.futures.Future()
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - handed to the waiter, as the pool does
                future.set_exception(e)
            return future

    return SharedPool


def shared_pool():
    """nbdata's one process-wide pool for short leaf tasks: the parts of one call that
    its caller waits for (JPEG decode spans, large host copies, the gathers of
    ``index_shuffle``), :func:`core_count` threads, started lazily. A task never waits
    for another task of the pool: what a task submits runs in the task's own thread.
    A fork()ed child makes its own (the parent's threads do not exist there)."""
    global _shared
    pool = _shared
    if pool is None:
        with _shared_lock:
            if _shared is None:
                _shared = _shared_pool_class()(core_count(),
                                               thread_name_prefix="nbdata-shared-pool",
                                               initializer=_mark_shared_thread)
            pool = _shared
    return pool


def _after_fork_in_child() -> None:
    """A fork()ed child has only the forking thread: locks another thread held at the
    fork would never be released, so every module lock is made anew, the shared pool
    is dropped (its threads are the parent's), and a parent's GNU OpenMP layer is
    noted (see :func:`check_fork_safe`)."""
    global _layer_lock, _serial, _omp_forked_from, _shared, _shared_lock, _in_shared
    _layer_lock = threading.Lock()
    _serial = threading.Lock()
    _shared_lock = threading.Lock()
    _shared = None
    _in_shared = threading.local()
    if _layer == "omp" and _omp_forked_from is None:
        _omp_forked_from = os.getppid()
    elif _layer is None:
        try:
            from numba.np.ufunc import parallel
            if parallel._is_initialized and numba.threading_layer() == "omp":
                _omp_forked_from = os.getppid()
        except Exception:  # noqa: BLE001
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def check_fork_safe() -> None:
    """Raises :class:`nbdata.errors.FailedPreconditionError` in a fork()ed child of a
    process that ran Numba's GNU OpenMP layer, where a parallel kernel would kill the
    process ("fork() called from a process already using GNU OpenMP")."""
    if _omp_forked_from is not None:
        from nbdata.errors import FailedPreconditionError
        raise FailedPreconditionError(
            f"this process was fork()ed from process {_omp_forked_from} after it ran "
            "nbdata's kernels on Numba's GNU OpenMP threading layer, which cannot run in "
            "a forked child. Install Intel TBB (`pip install tbb`; nbdata then uses "
            "Numba's fork-safe tbb layer) or start the workers with spawn: "
            "torch.utils.data.DataLoader(..., multiprocessing_context=\"spawn\"), "
            "multiprocessing.get_context(\"spawn\")")


_CPU_MAX = "/sys/fs/cgroup/cpu.max"
_QUOTA_SECONDS = 1.0    # how long the process's own quota, once read, is taken as it is
_quota_read = [None, -math.inf]   # (value, _clock() of the read)
_clock = time.monotonic


def cgroup_cpu_limit(path: str | None = None) -> float | None:
    """The CPUs a cgroup v2 quota grants (``quota / period`` of ``cpu.max``), or None
    without a quota (``max``) or cgroup v2. Falls back to cgroup v1's
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``. Without ``path``, the process's own
    quota, read at most once a second (every iteration of a pipeline asks for it)."""
    if path is None:
        value, when = _quota_read
        now = _clock()
        if now - when < _QUOTA_SECONDS:
            return value
        value = _read_cpu_limit(_CPU_MAX)
        _quota_read[:] = [value, now]
        return value
    return _read_cpu_limit(path)


def _read_cpu_limit(path: str) -> float | None:
    try:
        with open(path) as f:
            fields = f.read().split()
        if fields and fields[0] != "max":
            period = float(fields[1]) if len(fields) > 1 else 100000.0
            if period > 0 and float(fields[0]) > 0:
                return float(fields[0]) / period
        return None
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota = float(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period = float(f.read())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def core_count() -> int:
    """The cores this process may use: its CPU affinity (``os.sched_getaffinity``),
    at most the cgroup CPU quota rounded up (a container limited to 1.5 CPUs gets 2
    threads, not the host's 64)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_limit()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


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


def _launch_on_main_thread() -> None:
    """Start Numba's threading layer now when this is the main thread (importing nbdata
    does, about 6 ms: the layer starts no worker thread until a kernel runs).

    The layer remembers the thread that started it. Under ``tbb`` a fork() from any
    other thread leaves the child with the parent's task scheduler, whose workers do
    not exist there ("Numba: Attempted to fork from a non-main thread, the TBB library
    may be in an invalid state in the child process"), and a parallel kernel in the
    child can wait for them forever. Left to the first kernel, the layer would start on
    whichever thread ran it: a prefetch or interleave thread, then a DataLoader's fork()
    from the main thread is such a fork. Only where Numba will pick ``tbb``: started
    early, GNU OpenMP would make a forked child of a process that never ran a kernel
    refuse to run one (:func:`check_fork_safe`). Imported on another thread, nbdata
    leaves the start to the first kernel, as before."""
    if threading.current_thread() is not threading.main_thread() or not _tbb_loadable:
        return
    try:
        from numba.np.ufunc import parallel
        if parallel._is_initialized:
            return
        # Numba's own choice of tbb: the configured layer admits it and its tbbpool
        # module loads against this TBB (else Numba would fall back to OpenMP)
        if not _layer_admits_tbb():
            return
        parallel._check_tbb_version_compatible()
        from numba.np.ufunc import tbbpool  # noqa: F401
    except Exception:  # noqa: BLE001 - no usable tbb: the first kernel starts the layer
        return
    threading_layer()


def serialises_kernels() -> bool:
    """True under Numba's ``workqueue`` layer, which aborts the process when two threads
    launch parallel kernels at once: nbdata then runs one kernel at a time (install
    ``tbb`` or use the OpenMP layer, ``NUMBA_THREADING_LAYER=omp``, to overlap them)."""
    return (_layer or threading_layer()) == "workqueue"


class kernel_section:
    """``with kernel_section(threads):`` parallel kernels called inside run on
    ``threads`` threads (a per-thread Numba setting), one section at a time under the
    workqueue layer. (A class, not a generator: a fused stage enters one per kernel
    call.)"""

    __slots__ = ("threads", "previous", "put", "lock")

    def __init__(self, threads: int):
        self.threads = threads

    def __enter__(self):
        if _omp_forked_from is not None:
            check_fork_safe()
        get, put = _count_calls or _thread_count_calls()
        threads = self.threads
        if not 1 <= threads <= numba.config.NUMBA_NUM_THREADS:
            put = numba.set_num_threads   # raises Numba's error for the count
        self.lock = _serial if serialises_kernels() else None
        if self.lock is not None:
            self.lock.acquire()
        try:
            previous = self.previous = get()
            if previous != threads:
                put(threads)
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise
        self.put = put
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.previous != self.threads:
                self.put(self.previous)
        finally:
            if self.lock is not None:
                self.lock.release()


_count_calls = None


def _thread_count_calls():
    """(get, set) of the calling thread's Numba thread count. Numba's public
    ``get_num_threads``/``set_num_threads`` take its process-wide start-up locks and
    check their argument with a compiled call each time (8-10 us a kernel section);
    once the layer is started, its own C entry points do the same for a tenth of that
    (the counts given are within 1..NUMBA_NUM_THREADS: ThreadBudget.kernel_threads)."""
    global _count_calls
    if _count_calls is None:
        threading_layer()
        try:
            from numba.np.ufunc import parallel
            get, put = parallel._get_num_threads, parallel._set_num_threads
            if get() < 1:
                raise RuntimeError("no thread count")
            _count_calls = (get, put)
        except Exception:  # noqa: BLE001 - an unfamiliar Numba: its public functions
            _count_calls = (numba.get_num_threads, numba.set_num_threads)
    return _count_calls


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


class _Working(threading.local):
    working = False     # the thread is one of the executor's, marked busy (worker())


class ThreadBudget:
    """One budget for compiled kernels and executor threads (prefetch producers, map
    and interleave workers): ``threading.private_threadpool_size`` threads (0: all
    cores), at most ``autotune.cpu_budget`` when that is set. A kernel call gets the
    budget less the executor threads busy elsewhere at that moment, at least one and
    at most ``threading.max_intra_op_parallelism``, so the two never oversubscribe
    the cores; with none of those set (nor ``NUMBA_NUM_THREADS``), a fused stage or a
    record decoder may run its kernel on fewer threads where it measured them faster
    (:class:`KernelThreadTuner`)."""

    def __init__(self, options):
        self.options = options
        self._busy = 0
        self._lock = threading.Lock()
        self._local = _Working()
        self.refresh()

    # Seconds a refresh stands for: iterations of a pipeline opened within this time of
    # each other share its count (a short in-memory epoch opens every millisecond).
    REFRESH_S = 0.25

    def refresh(self) -> None:
        """Size the budget from the CPUs the process may use now (a pipeline's budget is
        refreshed as each of its iterations starts, at most once per REFRESH_S)."""
        check_fork_safe()
        now = _clock()
        if now - getattr(self, "_refreshed", -math.inf) < self.REFRESH_S:
            return
        self._refreshed = now
        options = self.options
        total = options.threading.private_threadpool_size or core_count()
        if options.autotune.cpu_budget:
            total = min(total, options.autotune.cpu_budget)
        self.total = max(1, total)
        self.cap = options.threading.max_intra_op_parallelism or self.total
        # Kernel sites tune their thread counts (KernelThreadTuner) unless the user fixed
        # them: a thread pool size, an intra-op cap, NUMBA_NUM_THREADS, or autotuning off.
        self.tunes = (bool(options.autotune.enabled)
                      and not options.threading.private_threadpool_size
                      and not options.threading.max_intra_op_parallelism
                      and "NUMBA_NUM_THREADS" not in os.environ)

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
        busy = self._busy
        if busy:
            busy -= 1 if self._local.working else 0
        return max(1, min(self.cap, self.total - busy, numba.config.NUMBA_NUM_THREADS))


class KernelThreadTuner:
    """The thread count of one kernel site (a fused stage's parallel kernel, a record
    decoder's kernels), chosen from
    its own measured speed, so that a pipeline beside other busy processes (a trainer,
    DataLoader workers) stops using threads that only take turns with them.

    Every call at the current count records its seconds per row. After ``interval``
    calls, the next :data:`PROBE_CALLS` calls run at one thread fewer (or one more, the
    two directions alternating, within the budget's limit of the moment); if the probe
    beats the current count's recent calls by :data:`MARGIN`, it becomes the count and
    probing starts over quickly, else the interval doubles (up to :data:`MAX_INTERVAL`
    calls), so a settled count costs a probe every few hundred calls. Only the time of
    rows differs between counts: every count gives the same rows (nbdata's kernels are
    deterministic at any thread count). Calls of fewer than half the usual rows (an
    epoch's tail) are not measured."""

    FIRST_INTERVAL = 4
    MAX_INTERVAL = 256
    PROBE_CALLS = 2
    MARGIN = 0.05

    def __init__(self):
        self._lock = threading.Lock()
        self.current: int | None = None
        self.limit = 0
        self.probe: int | None = None
        self._probe_times: list = []
        self._recent: list = []
        self._calls = 0
        self._interval = self.FIRST_INTERVAL
        self._down = True
        self._rows = 0
        self.why = "measuring"

    def threads(self, limit: int) -> int:
        """The count the next call runs with, at most ``limit`` (the budget's now)."""
        limit = max(1, limit)
        self.limit = limit
        if limit == 1:
            return 1
        if self.probe is not None and self.probe <= limit:
            return self.probe
        return limit if self.current is None else min(self.current, limit)

    def publish(self, stats) -> None:
        """Puts the chosen count and why in a stage's stats (the autotune lines of
        ``stats().summary()``), once there is one."""
        if self.current is not None:
            stats.chosen["kernel threads"] = self.current
            stats.why["kernel threads"] = self.why

    def record(self, threads: int, rows: int, seconds: float) -> None:
        """A call at ``threads`` threads ran ``rows`` rows in ``seconds``."""
        if rows <= 0 or seconds <= 0:
            return
        with self._lock:
            if rows < self._rows // 2:
                return
            self._rows = max(self._rows, rows)
            per_row = seconds / rows
            if self.probe is not None:
                if threads == self.probe:
                    self._probe_times.append(per_row)
                    if len(self._probe_times) >= self.PROBE_CALLS:
                        self._decide()
                    return
                self.probe, self._probe_times = None, []   # the limit moved under it
            if threads != self.current:
                # A new count (the first call, or the budget's limit moved): its first
                # call pays for waking threads, so measuring starts with the next one.
                self.current, self._recent, self._calls = threads, [], 0
                return
            self._recent = (self._recent + [per_row])[-4:]
            self._calls += 1
            if self._calls >= self._interval and len(self._recent) >= 2:
                self._start_probe()

    def _start_probe(self) -> None:
        cur = self.current
        down, up = cur - 1, cur + 1
        options = [down] if self._down else [up]
        options.append(up if self._down else down)
        self._down = not self._down
        for n in options:
            if 1 <= n <= self.limit:
                self.probe, self._probe_times = n, []
                return
        self._calls = 0

    def _decide(self) -> None:
        probe = sorted(self._probe_times)[len(self._probe_times) // 2]
        here = sorted(self._recent)[len(self._recent) // 2]
        n, cur = self.probe, self.current
        self.probe, self._probe_times = None, []
        if probe < here * (1.0 - self.MARGIN):
            self.why = (f"{n} thread{'s' if n > 1 else ''} ran a row in {probe * 1e9:,.0f} ns, "
                        f"{cur} in {here * 1e9:,.0f} ns")
            self.current, self._recent = n, [probe]
            self._calls, self._interval = 0, self.FIRST_INTERVAL
            self._down = n < cur   # go on in the direction that paid
        else:
            self.why = (f"{cur} thread{'s' if cur > 1 else ''} ran a row in "
                        f"{here * 1e9:,.0f} ns, {n} in {probe * 1e9:,.0f} ns")
            self._calls = 0
            self._interval = min(self.MAX_INTERVAL, self._interval * 2)


def sched_sample() -> dict | None:
    """Per thread of this process: (seconds run on a CPU, seconds waited runnable on a
    run queue) from Linux's ``/proc/self/task/*/schedstat``; None where it is missing."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    sample = {}
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                fields = f.read().split()
            sample[tid] = (int(fields[0]) / 1e9, int(fields[1]) / 1e9)
        except (OSError, ValueError, IndexError):
            continue
    return sample or None


def sched_delta(start: dict | None, end: dict | None) -> tuple[float, float] | None:
    """Seconds run and seconds waited for a CPU between two :func:`sched_sample`s, over
    the threads alive at the end (a thread started since counts from its start)."""
    if start is None or end is None:
        return None
    run = wait = 0.0
    for tid, (r, w) in end.items():
        r0, w0 = start.get(tid, (0.0, 0.0))
        run += max(0.0, r - r0)
        wait += max(0.0, w - w0)
    return run, wait


def oversubscription(run_s: float, wait_s: float, cores: int,
                     load: float | None = None, threshold: float = 0.25) -> str | None:
    """The summary's oversubscription line, or None: the process's threads were ready to
    run but waited for a CPU (Linux's run-queue wait) ``threshold`` or more of the time
    they wanted one: more runnable threads than free cores, so spinning or extra
    threads only take turns."""
    total = run_s + wait_s
    if total < 0.05 or wait_s / total < threshold:
        return None
    share = wait_s / total
    load_text = f", load average {load:.1f}" if load is not None else ""
    return (f"oversubscribed: this process's threads waited for a CPU {share:.0%} of the "
            f"time they were ready to run ({wait_s:.3f} s waiting, {run_s:.3f} s running; "
            f"{cores} usable CPUs{load_text}) -> other processes or threads (a trainer, "
            "DataLoader workers, BLAS threads) hold the cores: set "
            "options.threading.private_threadpool_size to the cores left free (1 inside "
            "each DataLoader worker), or give this process cores of its own")


def oversubscription_line(start: dict | None) -> str | None:
    """:func:`oversubscription` for this process since ``start``."""
    delta = sched_delta(start, sched_sample())
    if delta is None:
        return None
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = None
    return oversubscription(delta[0], delta[1], core_count(), load)


_launch_on_main_thread()
