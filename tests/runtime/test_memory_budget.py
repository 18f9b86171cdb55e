"""Options().memory_budget (nbdata/memory.py): one bound on the bytes a pipeline's
buffers hold together. Read-ahead buffers stay within it (same output), a buffer whose
size is part of the result raises ResourceExhaustedError naming the op and the bytes,
and pipe.stats() reports what each stage holds and the peak."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nbdata as nd
from nbdata.memory import default_budget, physical_memory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_pipeline_that_would_hold_gigabytes_stays_under_a_512_mb_budget():
    # 300 rows of 8 MB behind prefetch(300) and a consumer that pauses: without a budget
    # the producer would queue 2.4 GB; with 512 MB it waits. Peak RSS is measured in a
    # fresh process; the values are checked row by row.
    script = textwrap.dedent("""
        import resource, time, numpy as np, nbdata as nd
        o = nd.Options(); o.memory_budget = 512 << 20
        ds = (nd.Dataset.range(300).map(lambda i: np.full(1_000_000, i, np.float64))
              .prefetch(300).with_options(o))
        pipe = ds.compile()
        it = iter(pipe)
        first = next(it)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        made = lambda: pipe.stats().stages[-2].rows   # the map's rows so far
        last, still = -1, 0
        while still < 3 and made() < 300:   # the producer runs ahead until it stops
            time.sleep(0.2)
            last, still = made(), (still + 1 if made() == last else 0)
        good = first[0] == 0 and all(x[0] == i + 1 and x[-1] == i + 1 for i, x in enumerate(it))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(good, (peak - before) // 1024, pipe.stats().memory.peak >> 20)
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    good, grown_mb, budget_peak_mb = done.stdout.split()
    assert good == "True"
    assert 400 <= int(budget_peak_mb) <= 512   # filled up to the budget, and no further
    assert int(grown_mb) < 512 + 64, f"RSS grew {grown_mb} MB"   # + the row being made


def test_autotune_and_read_ahead_stay_within_a_small_budget():
    o = nd.Options()
    o.memory_budget = 16 << 20
    rows = nd.Dataset.range(64).map(lambda i: np.full(250_000, i, np.float32))   # 1 MB rows
    pipe = rows.prefetch(nd.AUTOTUNE).with_options(o).compile()
    got = [int(x[0]) for x in pipe]
    assert got == list(range(64))
    stats = pipe.stats()
    assert 0 < stats.memory.peak <= 16 << 20
    (prefetch,) = [s for s in stats.stages if s.title.startswith("prefetch")]
    assert prefetch.peak_bytes > 0 and prefetch.bytes_held == 0   # all handed out
    assert "peak" in prefetch.line() and "memory: the pipeline's buffers held at most" in stats.summary()


def test_a_shuffle_buffer_that_cannot_fit_raises_at_the_start_naming_op_and_bytes():
    ds = nd.Dataset.range(10).map(lambda i: np.zeros(1000)).shuffle(10**7, seed=1)
    with pytest.raises(nd.errors.ResourceExhaustedError,
                       match=r"shuffle.*a buffer of 10,000,000 rows needs 80,000,000,000 bytes"):
        next(iter(ds))
    o = nd.Options()
    o.memory_budget = 1 << 20
    small = nd.Dataset.range(1000).shuffle(1000, seed=1).with_options(o)
    assert sorted(int(v) for v in small) == list(range(1000))   # 8 KB of row numbers fit


def test_a_memory_cache_larger_than_the_budget_raises_naming_the_cache():
    o = nd.Options()
    o.memory_budget = 4 << 20
    ds = nd.Dataset.range(100).map(lambda i: np.full(100_000, i, np.float64)).cache() \
        .with_options(o)
    with pytest.raises(nd.errors.ResourceExhaustedError, match=r"cache.*in-memory cache"):
        for _ in ds:
            pass
    fits = nd.Dataset.range(100).cache().with_options(o)
    assert [int(v) for v in fits] == list(range(100)) == [int(v) for v in fits]


def test_the_default_budget_is_half_the_machine_s_memory():
    assert default_budget() == physical_memory() // 2 > 0
    pipe = nd.Dataset.range(3).prefetch(1).compile()
    assert pipe.memory.limit == default_budget()
