"""from_tensor_slices over arrays that live outside memory (np.memmap, np.load with
mmap_mode, h5py.Dataset, zarr.Array): the same elements as the array loaded whole,
fused chains, save/restore, shuffles that read blocks, global shuffles, split sources,
and memory bounded by a block, not by the array."""

import os
import sys
import tracemalloc

import numpy as np
import pytest

import nbdata as nd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ops"))
from equivalence import assert_same, fused, fusing, reference  # noqa: E402

from nbdata.ops.lazy_array import LazyArray  # noqa: E402

N = 2000
BLOCK = 256                                   # Options().chunk_rows: rows read at a time
DATA = np.arange(N * 3, dtype=np.float32).reshape(N, 3) * 0.5
LABELS = np.arange(N, dtype=np.int64)


def small_blocks(ds):
    opts = nd.Options()
    opts.chunk_rows = BLOCK
    return ds.with_options(opts)


def open_memmap(tmp_path):
    path = str(tmp_path / "a.dat")
    mm = np.memmap(path, np.float32, "w+", shape=DATA.shape)
    mm[:] = DATA
    mm.flush()
    return np.memmap(path, np.float32, "r", shape=DATA.shape)


def open_npy(tmp_path):
    path = str(tmp_path / "a.npy")
    np.save(path, DATA)
    return np.load(path, mmap_mode="r")


def open_hdf5(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = str(tmp_path / "a.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=DATA, chunks=(100, 3))
    return h5py.File(path, "r")["x"]


def open_zarr(tmp_path):
    zarr = pytest.importorskip("zarr")
    arr = zarr.create_array(store=str(tmp_path / "a.zarr"), shape=DATA.shape, chunks=(300, 3),
                            dtype="float32")
    arr[:] = DATA
    return zarr.open_array(str(tmp_path / "a.zarr"), mode="r")


OPENERS = {"memmap": open_memmap, "npy_mmap": open_npy, "hdf5": open_hdf5, "zarr": open_zarr}


@pytest.fixture(params=sorted(OPENERS))
def lazy(request, tmp_path):
    return OPENERS[request.param](tmp_path)


def scaled(x, i):
    return x * 2.0 + 1.0, i


def kept(x, i):
    return i % 3 != 0


def chain(ds):
    return ds.map(scaled).filter(kept).batch(50)


def test_elements_equal_the_array_loaded_whole(lazy):
    ds = nd.Dataset.from_tensor_slices((lazy, LABELS))
    assert isinstance(ds._node.value[0], LazyArray)
    assert ds.element_spec == (nd.TensorSpec((3,), np.float32), nd.TensorSpec((), np.int64))
    assert ds.cardinality() == N
    whole = nd.Dataset.from_tensor_slices((DATA, LABELS))
    assert_same(list(small_blocks(ds)), list(whole))


def test_a_strided_view_of_a_memmap_is_read_as_it_goes(tmp_path):
    column = open_memmap(tmp_path)[::2, 1]
    ds = small_blocks(nd.Dataset.from_tensor_slices(column))
    assert isinstance(ds._node.value, LazyArray)
    assert_same(list(ds), list(nd.Dataset.from_tensor_slices(DATA[::2, 1])))
    assert_same(fused(ds.map(lambda v: v + 1.0).batch(100)),
                list(reference(nd.Dataset.from_tensor_slices(DATA[::2, 1]).map(lambda v: v + 1.0).batch(100))))


def test_map_filter_batch_fuses_reading_blocks(lazy):
    ds = small_blocks(chain(nd.Dataset.from_tensor_slices((lazy, LABELS))))
    pipe = fusing(ds).compile()
    plan = pipe.explain().splitlines()[1]
    assert plan.startswith("fused_stage[the chunks of from_tensor_slices(") and \
        "read a block at a time) -> map(scaled)" in plan, plan
    expected = list(reference(chain(nd.Dataset.from_tensor_slices((DATA, LABELS)))))
    assert_same(fused(ds), expected)
    sizes = [c.n for c in iter_chunks(nd.Dataset.from_tensor_slices((lazy, LABELS)), 10_000)]
    assert max(sizes) <= BLOCK and sum(sizes) == N


def iter_chunks(ds, want):
    from nbdata.compiler.executor import ExecContext
    opts = nd.Options()
    opts.chunk_rows = BLOCK
    it = ds._node.open_chunks(ExecContext(opts), None)
    while (chunk := it.next(want)) is not None:
        yield chunk


def test_save_and_restore_mid_epoch(lazy):
    ds = fusing(small_blocks(chain(nd.Dataset.from_tensor_slices((lazy, LABELS)))))
    full = [[b[0].tolist(), b[1].tolist()] for b in ds]
    for k in (3, 7, len(full)):          # batch 3 ends inside a block, batch 7 past one
        it = iter(ds)
        for _ in range(k):
            next(it)
        state = it.save()
        again = iter(ds)
        again.restore(state)
        assert [[b[0].tolist(), b[1].tolist()] for b in again] == full[k:], k


def test_shuffle_reads_in_order_and_global_shuffle_reads_random_rows(lazy):
    def order(ds):
        return next(iter(small_blocks(ds).batch(N)))[1].tolist()

    whole = nd.Dataset.from_tensor_slices((DATA, LABELS))
    ds = nd.Dataset.from_tensor_slices((lazy, LABELS))
    assert order(ds.shuffle(300, seed=5)) == order(whole.shuffle(300, seed=5))
    plan = fusing(ds.shuffle(300, seed=5).map(scaled)).compile().explain()
    assert "over row numbers" not in plan        # a buffer of rows, read block after block
    shuffled = order(nd.experimental.global_shuffle(ds, seed=6))
    assert shuffled == order(nd.experimental.global_shuffle(whole, seed=6)) != sorted(shuffled)
    rows = small_blocks(nd.experimental.global_shuffle(ds, seed=6).batch(N))
    x, i = next(iter(rows))
    np.testing.assert_array_equal(x, DATA[i])


def test_split_sources_read_their_rows(lazy):
    from nbdata.distribute.splits import SplitSource, replace_node, splittable_source
    splits = [(0, 300), (1700, 2000), (650, 660)]
    node = chain(nd.Dataset.from_tensor_slices((lazy, LABELS)))._node
    source = splittable_source(node)
    worker = replace_node(node, source, SplitSource(
        source, lambda key, k: splits[k] if k < len(splits) else None))
    got = np.concatenate([b[1] for b in fusing(nd.Dataset(worker))])
    want = np.concatenate([np.arange(a, b) for a, b in splits])
    assert got.tolist() == want[want % 3 != 0].tolist()


def test_blocks_are_whole_storage_chunks(tmp_path):
    reader = LazyArray.of(open_zarr(tmp_path)).reader(BLOCK)
    assert reader.block == 300 and reader.limit == BLOCK
    reader = LazyArray.of(open_hdf5(tmp_path)).reader(BLOCK)
    assert reader.block == 300
    assert LazyArray.of(np.zeros(3)) is None and LazyArray.of(open_memmap(tmp_path)).storage_rows == 1


def test_other_arrays_are_not_lazy(tmp_path):
    h5py = pytest.importorskip("h5py")
    with h5py.File(str(tmp_path / "s.h5"), "w") as f:
        f.create_dataset("s", data=np.array([b"a", b"bc"], dtype=h5py.string_dtype("ascii")))
    strings = h5py.File(str(tmp_path / "s.h5"), "r")["s"]
    assert list(nd.Dataset.from_tensor_slices(strings)) == [b"a", b"bc"]


# ---------------------------------------------------------------- memory

def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads RSS from /proc")
def test_a_memmap_larger_than_a_block_is_read_in_bounded_memory(tmp_path):
    rows, width = 120_000, 256                  # 123 MB of float32, 15 blocks
    path = str(tmp_path / "big.npy")
    mm = np.lib.format.open_memmap(path, "w+", np.float32, (rows, width))
    for a in range(0, rows, 40_000):
        mm[a:a + 40_000] = 1.0
    mm.flush()
    del mm
    big = np.load(path, mmap_mode="r")
    pipe = fusing(nd.Dataset.from_tensor_slices(big).map(lambda r: r.sum()).batch(5000)).compile()
    before, peak, total = rss(), 0, 0.0
    for batch in pipe:
        peak = max(peak, rss() - before)
        total += float(batch.sum())
    assert total == rows * width
    assert peak < 48 << 20, f"RSS grew by {peak >> 20} MiB reading a {big.nbytes >> 20} MiB array"


@pytest.mark.parametrize("kind", ["hdf5", "zarr"])
def test_hdf5_and_zarr_are_never_loaded_whole(tmp_path, kind):
    pytest.importorskip("h5py" if kind == "hdf5" else "zarr")
    rows, width = 48_000, 256                   # 49 MB of float32, blocks of 8 MiB
    data = np.ones((rows, width), np.float32)
    if kind == "hdf5":
        import h5py
        with h5py.File(str(tmp_path / "big.h5"), "w") as f:
            f.create_dataset("x", data=data, chunks=(1000, width))
        arr = h5py.File(str(tmp_path / "big.h5"), "r")["x"]
    else:
        import zarr
        arr = zarr.create_array(store=str(tmp_path / "big.zarr"), shape=data.shape,
                                chunks=(1000, width), dtype="float32")
        arr[:] = data
    del data
    tracemalloc.start()
    try:
        ds = nd.Dataset.from_tensor_slices(arr)
        held, _ = tracemalloc.get_traced_memory()
        pipe = fusing(ds.map(lambda r: r.sum()).batch(4000)).compile()
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        total = sum(float(b.sum()) for b in pipe)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == rows * width
    size = (rows * width * 4) >> 20
    assert held < 1 << 20, f"from_tensor_slices holds {held >> 20} MiB of a {size} MiB array"
    assert peak - before < 20 << 20, f"{(peak - before) >> 20} MiB allocated at once for a {size} MiB array"
