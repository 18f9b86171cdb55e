"""Pytest settings for the whole repository (loaded before any test imports Numba).

Numba starts ``NUMBA_NUM_THREADS`` threads, by default one per core; tests that run
kernels at two threads need two even on a one-core machine, so at least 2 are
started.
"""

import os

os.environ.setdefault("NUMBA_NUM_THREADS", str(max(2, os.cpu_count() or 1)))
