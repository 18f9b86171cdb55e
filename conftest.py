"""Pytest settings for the whole repository (loaded before any test imports Numba).

Numba starts ``NUMBA_NUM_THREADS`` threads, by default one per core; tests that run
kernels at two threads need two even on a one-core machine, so at least 2 are
started.

``NBDATA_STRICT=1``: where nbdata falls back from a fast path because recording or
lifting a function failed, an error raised inside nbdata's own code is raised instead
(an internal bug fails the test; users still fall back).

The GPU tests (tests/gpu) run their kernels in Numba's CUDA simulator unless
``NBDATA_GPU_TESTS=device`` asks for the real GPU: the simulator must be switched on
before Numba is first imported, which is here. It only affects ``numba.cuda``.
"""

import os

os.environ.setdefault("NUMBA_NUM_THREADS", str(max(2, os.cpu_count() or 1)))
os.environ.setdefault("NBDATA_STRICT", "1")
if os.environ.get("NBDATA_GPU_TESTS", "sim") != "device":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
