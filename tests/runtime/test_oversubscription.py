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


def _drive(tuner, limit, ns_per_row, calls, rows=1000):
    """Run ``calls`` kernel calls through ``tuner`` where ``ns_per_row[n]`` is what a row
    costs at n threads; the thread counts it chose, in order."""
    chosen = []
    for _ in range(calls):
        n = tuner.threads(limit)
        chosen.append(n)
        tuner.record(n, rows, ns_per_row[n] * rows * 1e-9)
    return chosen


def test_the_kernel_tuner_backs_off_when_fewer_threads_run_faster_and_comes_back():
    tuner = threads.KernelThreadTuner()
    # a neighbour holds cores: 4 threads take turns with it, 3 run fastest
    busy = {1: 40.0, 2: 22.0, 3: 15.0, 4: 25.0}
    chosen = _drive(tuner, 4, busy, 40)
    assert chosen[0] == 4 and tuner.current == 3 and chosen[-10:].count(3) >= 8
    assert "3 threads ran a row in 15 ns" in tuner.why
    # the neighbour left: more threads pay again, and the tuner climbs back
    quiet = {1: 40.0, 2: 20.0, 3: 14.0, 4: 10.0}
    chosen = _drive(tuner, 4, quiet, 60)
    assert tuner.current == 4 and chosen[-10:].count(4) >= 8
    # a smaller limit (executor threads busy elsewhere) caps it at once
    assert tuner.threads(2) == 2


def test_the_kernel_tuner_probes_rarely_once_settled():
    tuner = threads.KernelThreadTuner()
    costs = {1: 20.0, 2: 10.0}
    chosen = _drive(tuner, 2, costs, 1000)
    assert tuner.current == 2
    probes = chosen.count(1)
    # probes after 4, 8, 16, ... 256 calls, two calls each: 2 * (6 + 3) at most
    assert 2 <= probes <= 20, probes
    # noise within the margin never moves it
    tuner = threads.KernelThreadTuner()
    assert set(_drive(tuner, 2, {1: 10.2, 2: 10.0}, 200)[1:]) <= {1, 2}
    assert tuner.current == 2
    # an epoch's short tail is not measured: it would look slow per row at any count
    tuner = threads.KernelThreadTuner()
    _drive(tuner, 2, {1: 10.0, 2: 5.0}, 8)
    before = (tuner.current, tuner._calls, tuner.probe)
    tuner.record(tuner.threads(2), 10, 1.0)
    assert (tuner.current, tuner._calls, tuner.probe) == before


@pytest.mark.parametrize("fixed", [None, "pool", "intra", "autotune_off", "env"])
def test_fused_stages_tune_kernel_threads_only_under_default_settings(fixed, monkeypatch):
    o = nd.Options()
    o.fusion_min_rows = 0
    o.parallel_kernel_after = 0
    o.chunk_rows = 256
    if fixed == "pool":
        o.threading.private_threadpool_size = 2
    elif fixed == "intra":
        o.threading.max_intra_op_parallelism = 2
    elif fixed == "autotune_off":
        o.autotune.enabled = False
    # conftest.py sets NUMBA_NUM_THREADS for the whole suite (which fixes the count)
    if fixed == "env":
        monkeypatch.setenv("NUMBA_NUM_THREADS", "2")
    else:
        monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    x = np.arange(20_000, dtype=np.int64)
    pipe = (nd.Dataset.from_tensor_slices(x).map(lambda v: v * 3 + 1)
            .filter(lambda v: v % 7 != 0).batch(100).with_options(o).compile())
    seen = []
    real = threads.KernelThreadTuner.record
    monkeypatch.setattr(threads.KernelThreadTuner, "record",
                        lambda self, n, rows, s: (seen.append(n), real(self, n, rows, s)))
    for _ in range(2):
        got = np.concatenate(list(pipe))
        want = x * 3 + 1
        np.testing.assert_array_equal(got, want[want % 7 != 0])
    summary = pipe.stats().summary()
    if fixed is None:
        assert len(seen) >= 2 * (20_000 // 256)
        assert "kernel threads=" in summary
    else:
        assert not seen and "kernel threads" not in summary


def test_record_decoders_tune_their_kernel_threads_too(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    path = tmp_path / "rows.csv"
    path.write_text("".join(f"{i},{i * 0.5}\n" for i in range(6000)))
    o = nd.Options()
    o.chunk_rows = 256
    pipe = (nd.TextLineDataset(str(path)).batch(250)
            .map(lambda line: nd.io.decode_csv(line, [[0], [0.0]]))
            .with_options(o).compile())
    got = [b for b in pipe]
    np.testing.assert_array_equal(np.concatenate([a for a, _ in got]), np.arange(6000))
    np.testing.assert_array_equal(np.concatenate([b for _, b in got]),
                                  np.arange(6000, dtype=np.float32) * np.float32(0.5))
    assert "kernel threads=" in pipe.stats().summary()
