"""fork(): after the parent ran fused kernels, a fork()ed child (a PyTorch DataLoader
worker started with fork) runs nbdata pipelines and gets their values; under Numba's
GNU OpenMP layer, which cannot run in a forked child, the child refuses at once with an
error naming spawn. Each case runs in a fresh interpreter with a timeout, so that a
broken child can neither hang the suite nor kill the test process."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from nbdata.kernels import threads

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FORK = textwrap.dedent("""
    import multiprocessing, os, sys, threading
    import numpy as np
    import nbdata as nd
    import numba

    def pipeline():
        return (nd.Dataset.from_tensor_slices(np.arange(20000, dtype=np.int64))
                .map(lambda x: x * 3 + 1).filter(lambda x: x % 2 == 0).batch(256)
                .prefetch(2))

    def total():
        from nbdata.kernels.threads import shared_pool   # made anew in a forked child
        pooled = sum(shared_pool().submit(sum, [k, 1]).result() for k in range(8))
        assert pooled == 36, pooled
        return int(sum(int(b.sum()) for b in pipeline()))

    def child(queue):
        try:
            queue.put(("ok", total()))
        except Exception as e:
            queue.put((type(e).__name__, str(e)))

    expected = total()          # the parent uses its threads (and a prefetch thread)
    print("layer", numba.threading_layer(), flush=True)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=child, args=(queue,)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=90) for _ in procs]
    for p in procs:
        p.join(30)
    print("codes", [p.exitcode for p in procs], flush=True)
    for kind, value in results:
        print("child", kind, value == expected if kind == "ok" else value, flush=True)
""")

TORCH = textwrap.dedent("""
    import torch.utils.data as tud

    def pipeline():
        return nd.Dataset.from_tensor_slices(np.arange(6000, dtype=np.int64)).map(lambda x: x * 2)

    class Stream(tud.IterableDataset):
        def __iter__(self):
            info = tud.get_worker_info()
            ds = pipeline().shard(info.num_workers, info.id) if info else pipeline()
            for x in ds.batch(100):
                yield x

    expected = sorted(int(x) for b in pipeline().batch(500) for x in b)  # the parent runs it
    loader = tud.DataLoader(Stream(), batch_size=None, num_workers=2,
                            multiprocessing_context="fork", timeout=90)
    got = sorted(int(x) for b in loader for x in b.numpy())
    print("dataloader", got == expected, len(got), flush=True)
""")


def run(script: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    environ.update(env)
    environ["PYTHONPATH"] = REPO + os.pathsep + environ.get("PYTHONPATH", "")
    environ.setdefault("NUMBA_NUM_THREADS", "2")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=180, env=environ, cwd=REPO)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    # Numba's tbb layer, started on a thread other than the one that forks (the parent's
    # first kernel ran on its prefetch thread), leaves each child a task scheduler
    # whose workers do not exist there: a child's kernel could then wait forever.
    assert "may be in an invalid state in the child" not in proc.stderr, out
    return proc.stdout


HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def default_layer_run():
    """One interpreter on Numba's default layer choice: forked children, then (where
    torch is installed) a DataLoader with two fork-started workers."""
    return run(FORK + (TORCH if HAS_TORCH else ""))


def test_forked_children_run_pipelines_after_the_parent(default_layer_run):
    out = default_layer_run
    assert "codes [0, 0]" in out, out
    assert out.count("child ok True") == 2, out
    if threads._tbb_loadable:
        # the PyPI tbb wheel is a dependency: nbdata makes Numba pick its fork-safe layer
        assert "layer tbb" in out, out


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_torch_dataloader_fork_workers(default_layer_run):
    assert "dataloader True 6000" in default_layer_run, default_layer_run


def test_openmp_layer_refuses_in_a_forked_child_naming_spawn():
    out = run(FORK, NUMBA_THREADING_LAYER="omp")
    assert "layer omp" in out, out
    assert "codes [0, 0]" in out, out        # no child was terminated by GNU OpenMP
    lines = [line for line in out.splitlines() if line.startswith("child ")]
    assert len(lines) == 2, out
    for line in lines:
        assert line.startswith("child FailedPreconditionError"), out
        assert 'multiprocessing_context="spawn"' in line and "tbb" in line, out


def test_core_count_follows_the_cgroup_quota(tmp_path, monkeypatch):
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")
    assert threads.cgroup_cpu_limit(str(cpu_max)) == 1.5
    cpu_max.write_text("max 100000\n")
    assert threads.cgroup_cpu_limit(str(cpu_max)) is None
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda path=None: 0.5)
    assert threads.core_count() == 1
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda path=None: None)
    assert threads.core_count() == len(os.sched_getaffinity(0))


def test_the_process_quota_is_read_at_most_once_a_second(monkeypatch):
    reads = []
    monkeypatch.setattr(threads, "_read_cpu_limit", lambda path: reads.append(path) or 1.5)
    monkeypatch.setattr(threads, "_quota_read", [None, -float("inf")])
    clock = [1000.0]
    monkeypatch.setattr(threads, "_clock", lambda: clock[0])
    assert [threads.core_count() for _ in range(3)] == [min(2, len(os.sched_getaffinity(0)))] * 3
    assert reads == ["/sys/fs/cgroup/cpu.max"]       # every pipeline iteration asks
    clock[0] += 1.5
    threads.core_count()
    assert len(reads) == 2
    assert threads.cgroup_cpu_limit("/elsewhere") == 1.5 and reads[-1] == "/elsewhere"
