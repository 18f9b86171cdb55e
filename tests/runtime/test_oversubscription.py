"""stats().summary() names oversubscription when this process's threads waited for a
CPU (Linux run-queue wait, /proc/self/task/*/schedstat): measured on faked samples."""

import numpy as np
import pytest

import nbdata as nd
from nbdata.kernels import threads


def test_verdict_from_run_and_wait_times():
    assert threads.oversubscription(1.0, 0.1, 2) is None           # 9% waiting: fine
    assert threads.oversubscription(0.01, 0.02, 2) is None         # too little to judge
    line = threads.oversubscription(1.0, 3.0, 2, load=7.5)
    assert line.startswith("oversubscribed") and "75%" in line and "load average 7.5" in line
    assert "private_threadpool_size" in line


def test_delta_counts_threads_alive_at_the_end():
    start = {"1": (1.0, 0.5), "2": (2.0, 1.0)}
    end = {"1": (1.5, 2.5), "3": (0.25, 0.25)}     # thread 2 ended, thread 3 started
    assert threads.sched_delta(start, end) == (0.75, 2.25)
    assert threads.sched_delta(None, end) is None


def test_summary_names_oversubscription(monkeypatch):
    if threads.sched_sample() is None:
        pytest.skip("no /proc/self/task/*/schedstat")
    o = nd.Options()
    o.fusion_min_rows = 0
    ds = nd.Dataset.from_tensor_slices(np.arange(4000)).map(lambda x: x + 1).batch(500)
    pipe = ds.with_options(o).compile()
    assert sum(int(b.sum()) for b in pipe) == sum(range(1, 4001))
    stats = pipe.stats()
    assert stats.sched_start is not None
    # the same run as measured, then as if every thread had waited 10 s more for a CPU
    now = threads.sched_sample()
    monkeypatch.setattr(threads, "sched_sample",
                        lambda: {t: (r + 1.0, w) for t, (r, w) in now.items()})
    stats.sched_start = {t: (r, w) for t, (r, w) in now.items()}
    assert "oversubscribed" not in stats.summary()
    monkeypatch.setattr(threads, "sched_sample",
                        lambda: {t: (r + 1.0, w + 10.0) for t, (r, w) in now.items()})
    summary = stats.summary()
    assert summary.splitlines()[0].startswith("oversubscribed: this process's threads waited")
