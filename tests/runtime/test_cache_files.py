"""File caches: a writer killed at any point never leaves a cache that reads as
complete; complete caches are re-read in chunks from a memory map."""

import mmap
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np

import nbdata as nd


def _kill_writer_after(path: str, rows: int) -> None:
    script = textwrap.dedent(f"""
        import os, signal, numpy as np, nbdata as nd
        ds = nd.Dataset.range(20000).map(lambda x: (x, np.full(3, x, np.float32))).cache({path!r})
        it = iter(ds)
        for _ in range({rows}):
            next(it)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    run = subprocess.run([sys.executable, "-c", script], timeout=300)
    assert run.returncode == -signal.SIGKILL


def test_a_killed_writer_never_leaves_a_complete_looking_cache(tmp_path):
    path = str(tmp_path / "cache")
    for rows in (1, 5000, 19999):
        _kill_writer_after(path, rows)
        assert not os.path.exists(path + ".nbcache")      # only a temporary file, if any
    ds = nd.Dataset.range(20000).map(lambda x: (x, np.full(3, x, np.float32))).cache(path)
    first = [int(x) for x, _ in ds]
    assert first == list(range(20000))
    assert os.path.exists(path + ".nbcache")
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    calls = []

    def counted(x):
        calls.append(1)
        return x, np.full(3, x, np.float32)

    again = nd.Dataset.range(20000).map(counted).cache(path)
    again.compile()          # tracing calls the function while the pipeline is built
    calls.clear()
    assert [int(x) for x, _ in again] == first and not calls   # read, not recomputed


def test_a_truncated_cache_file_is_data_loss_not_a_short_epoch(tmp_path):
    path = str(tmp_path / "cache")
    ds = nd.Dataset.range(5000).cache(path)
    list(ds)
    data = open(path + ".nbcache", "rb").read()
    open(path + ".nbcache", "wb").write(data[:len(data) // 2])
    try:
        list(nd.Dataset.range(5000).cache(path))
    except nd.errors.DataLossError as e:
        assert "cache.nbcache" in str(e)
    else:
        raise AssertionError("a truncated cache read as complete")


def test_cache_files_are_reread_from_a_memory_map(tmp_path):
    path = str(tmp_path / "cache")
    x = np.arange(30000, dtype=np.float32).reshape(10000, 3)
    list(nd.Dataset.from_tensor_slices(x).cache(path))
    first = next(iter(nd.Dataset.from_tensor_slices(x).cache(path).batch(100)))
    row = next(iter(nd.Dataset.from_tensor_slices(x).cache(path)))
    base = row
    while getattr(base, "base", None) is not None and not isinstance(base, mmap.mmap):
        base = base.base
    assert isinstance(base, (mmap.mmap, memoryview)) or isinstance(getattr(base, "obj", None), mmap.mmap)
    assert np.array_equal(first, x[:100])


def test_memory_cache_counts_only_a_complete_epoch():
    calls = []

    def counted(x):
        calls.append(int(x))
        return x

    ds = nd.Dataset.range(50).map(counted).cache()
    it = iter(ds)
    [next(it) for _ in range(10)]
    del it
    calls.clear()
    assert [int(v) for v in ds] == list(range(50)) and len(calls) == 50
    calls.clear()
    assert [int(v) for v in ds] == list(range(50)) and calls == []
