"""Compaction gathers rows as machine words: same values as NumPy's indexing for every
dtype and layout, one compiled kernel per word type whatever the dtypes."""

import numpy as np
import pytest

import nbdata as nd
from nbdata.kernels.compact import RowGather, compact, gather_rows

DTYPES = [np.float32, np.int64, np.uint8, np.float16, np.complex128, np.bool_, "S3", "U2",
          "M8[s]", np.int16, object]
SHAPES = [(10,), (10, 3), (10, 2, 5), (10, 0), (0, 4), (10, 1, 1), (10, 7)]


def _rows(n):
    return np.array([3, 1, 1, 9, 0][:min(5, n)], np.int64)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_compact_matches_numpy_indexing(dtype, shape):
    a = np.random.default_rng(0).integers(0, 100, size=shape).astype(dtype)
    rows = _rows(shape[0])
    views = [a, np.asfortranarray(a)]
    if a.ndim > 1:
        views.append(a[:, ::-1])
    if a.dtype != object and a.size:    # rows not aligned to their dtype
        unaligned = np.zeros(a.nbytes + 1, np.uint8)[1:].view(a.dtype).reshape(a.shape)
        unaligned[...] = a
        views.append(unaligned)
    for view in views:
        gather = RowGather(view)   # a fused stage's repeated gathers from one column
        for got in (compact(view, rows), gather(rows), gather(rows[::-1].copy())[::-1]):
            assert got.dtype == view.dtype and got.shape == view[rows].shape
            np.testing.assert_array_equal(got, view[rows])
            assert not np.shares_memory(got, view)


def test_one_word_kernel_serves_different_dtypes():
    """float32 rows of 16 and int64 labels are both 8-byte words: one signature."""
    x = np.arange(64, dtype=np.float32).reshape(4, 16)
    y = np.arange(4, dtype=np.int64)
    rows = np.array([2, 0], np.int64)
    np.testing.assert_array_equal(compact(x, rows), x[rows])
    before = set(gather_rows.signatures)
    np.testing.assert_array_equal(compact(y, rows), y[rows])
    np.testing.assert_array_equal(compact(y.astype(np.float64), rows), rows.astype(np.float64))
    assert set(gather_rows.signatures) == before


@pytest.mark.parametrize("after", [0, float("inf")], ids=["parallel", "serial"])
def test_kept_source_rows_are_gathered_from_the_source_not_copied_twice(after):
    """filter().batch() over wide rows and scalar labels: the kernel only decides which
    rows stay; the kept rows of both go from the source columns straight into the
    batches (one copy, not a copy into an output column and another into the batches).
    Same batches as the reference path, across chunk borders, and a state saved inside
    a batch resumes."""
    x = np.random.default_rng(1).integers(0, 100, (5_000, 48)).astype(np.int16)
    labels = np.arange(5_000, dtype=np.int64)

    def build(fused=True):
        o = nd.Options()
        if fused:
            o.fusion_min_rows = 0
            o.chunk_rows = 333
            o.parallel_kernel_after = after
        else:
            o.fusion = False
        return (nd.Dataset.from_tensor_slices((x, labels))
                .filter(lambda v, i: v[0] % 3 != 0).batch(64)).with_options(o)

    pipe = build().compile()
    source = pipe.explain().split("generated source:")[1].split("==")[0]
    # neither the wide rows nor the scalar labels are stored by the kernel
    assert "f[i, q] =" not in source and "col" not in source and "kept[n] = i" in source
    want = list(build(fused=False))
    got = list(pipe)
    assert len(got) == len(want)
    for (a, b), (c, d) in zip(got, want):
        assert a.dtype == c.dtype == np.int16 and b.dtype == d.dtype == np.int64
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    it = iter(build())
    for _ in range(7):
        next(it)
    state = it.save()
    again = iter(build())
    again.restore(state)
    rest = list(again)
    assert len(rest) == len(want) - 7
    np.testing.assert_array_equal(rest[0][0], want[7][0])


def _gathered_bytes(monkeypatch) -> list:
    """The bytes of each gather of source rows a fused stage makes from now on."""
    from nbdata.compiler import fused_stage
    gathered = []

    class Spy(fused_stage.RowGather):
        def __call__(self, rows):
            out = super().__call__(rows)
            gathered.append(out.nbytes)
            return out

    monkeypatch.setattr(fused_stage, "RowGather", Spy)
    return gathered


def test_rows_gathered_from_the_source_count_toward_the_chunk_bound(monkeypatch):
    """Rows gathered straight from the source stay within MAX_GATHER_BYTES a pull (at
    least one batch): a filter over wide rows gathers its kept rows a bounded chunk at
    a time, however far its kernel calls read ahead (they write only positions)."""
    from nbdata.compiler import fused_stage
    gathered = _gathered_bytes(monkeypatch)
    x = np.random.default_rng(2).integers(0, 100, (6_000, 4096)).astype(np.uint8)
    o = nd.Options()
    o.fusion_min_rows = 0
    ds = nd.Dataset.from_tensor_slices(x).filter(lambda v: v[0] % 5 != 0).batch(512)
    got = np.concatenate(list(ds.with_options(o)))
    np.testing.assert_array_equal(got, x[x[:, 0] % 5 != 0])
    assert gathered and max(gathered) <= fused_stage.MAX_GATHER_BYTES, max(gathered)


def test_read_only_and_writable_inputs_share_one_compiled_gather():
    """Gathers read their source through chunks.read_only: rows from a memory map or an
    Arrow buffer (read-only) and from NumPy (writable) run one compiled kernel each, not
    one per kind of array."""
    from nbdata import chunks
    from nbdata.kernels import compact as kc
    text = np.frombuffer(b"abcde", np.uint8)          # read-only, as a memory map's
    for data, offsets in ((text, np.array([0, 2, 5])), (text.copy(), np.array([0, 2, 5]))):
        out, out_offsets = chunks.gather_strings(data, offsets, np.array([1, 0]))
        assert out.tobytes() == b"cdeab" and out_offsets.tolist() == [0, 3, 5]
    rows = np.arange(12, dtype=np.uint16).reshape(6, 2)
    frozen = rows.copy()
    frozen.flags.writeable = False
    for source in (rows, frozen):
        assert kc.compact(source, np.array([4, 1])).tolist() == [[8, 9], [2, 3]]
    for sig in chunks._gather_rows.signatures:
        assert not sig[0].mutable and not sig[1].mutable, sig
    gathers = [sig for k in (kc.gather_rows, kc.gather_words)
               for sig in k.serial.signatures + k.parallel.signatures]
    assert gathers and not any(sig[0].mutable for sig in gathers), gathers


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.float16, "S3"], ids=str)
@pytest.mark.parametrize("shape", [(), (3,), (2, 5), (1,)], ids=str)
def test_gather_units_matches_numpy(dtype, shape):
    """A global shuffle's rows from several decoded blocks (Parquet row groups):
    ``result[picked[u]] = blocks[u][local[u]]``, one-word rows by the 1-D kernel."""
    from nbdata.kernels.compact import gather_units
    rng = np.random.default_rng(2)
    blocks = [rng.integers(0, 100, (n,) + shape).astype(dtype) for n in (7, 1, 12)]
    blocks.append(np.asfortranarray(blocks[2]) if len(shape) == 2 else blocks[2][::-1])
    units = rng.integers(0, len(blocks), 40)
    local = np.array([rng.integers(0, len(blocks[u])) for u in units], np.int64)
    picked = [np.flatnonzero(units == u) for u in range(len(blocks))]
    got = gather_units(blocks, picked, [local[p] for p in picked])
    want = np.concatenate([blocks[u][r:r + 1] for u, r in zip(units, local)])
    if got is None:   # rows not contiguous in a block: the caller takes them itself
        assert any(not b.flags.c_contiguous for b in blocks)
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sizes", [[5], [3, 0, 4, 0, 0, 9], [1] * 40, [0, 7], [100, 1, 1, 2, 500]],
                         ids=str)
def test_group_by_unit_matches_numpy(sizes):
    """A chunk's rows grouped by the unit (row group, record batch) holding them, in
    order: what searchsorted and a stable argsort give, empty units included."""
    from nbdata.kernels.compact import group_by_unit
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    rows = np.random.default_rng(len(sizes)).integers(0, starts[-1], 300).astype(np.int64)
    bad, offsets, order, local = group_by_unit(rows, starts)
    units = np.searchsorted(starts, rows, side="right") - 1
    want = np.argsort(units, kind="stable")
    assert bad == -1
    np.testing.assert_array_equal(order, want)
    np.testing.assert_array_equal(local, (rows - starts[units])[want])
    np.testing.assert_array_equal(np.diff(offsets), np.bincount(units, minlength=len(sizes)))
    for outside in (-1, int(starts[-1])):
        bad, *_ = group_by_unit(np.array([0, outside, 0], np.int64), starts)
        assert bad == 1
    assert group_by_unit(np.zeros(0, np.int64), starts)[0] == -1


def test_a_masked_batch_gathers_its_groups_a_bounded_chunk_at_a_time(monkeypatch):
    """``batch(b).map(lambda x: x[keep])`` over wide rows (a masked batch: each batch the
    kept rows of b input rows) gathers the kept rows of as many whole groups as fit in
    MAX_GATHER_BYTES per pull (one group where one alone is larger), not every pending
    group at once; the batches are the reference path's."""
    from nbdata.compiler import fused_stage
    gathered = _gathered_bytes(monkeypatch)
    x = np.random.default_rng(3).integers(0, 100, (6_000, 4096)).astype(np.uint8)
    o = nd.Options()
    o.fusion_min_rows = 0
    ds = nd.Dataset.from_tensor_slices(x).batch(128).map(lambda b: b[b[:, 0] % 3 == 0])
    pipe = ds.with_options(o).compile()
    list(pipe)   # (a second iteration asks for whole chunks from its first pull: Pace)
    gathered.clear()
    got = list(pipe)
    o.fusion = False
    want = list(ds.with_options(o))
    assert len(got) == len(want) == 47
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert gathered and max(gathered) <= fused_stage.MAX_GATHER_BYTES, max(gathered)
    # whole groups up to the bound (a third of the rows kept: bounding the groups by
    # their input rows instead gathered 0.7 MB a pull); the first and last pulls less
    assert sorted(gathered)[len(gathered) // 2] > fused_stage.MAX_GATHER_BYTES // 2, gathered


@pytest.mark.parametrize("dtype", [np.float32, np.int64, "S3", np.bool_], ids=str)
@pytest.mark.parametrize("shape", [(50,), (50, 3), (50, 4, 2)], ids=str)
def test_a_gather_calls_the_parallel_kernel_once_its_tier_runs_it(dtype, shape, monkeypatch):
    """Once the tier of a column's gather runs the parallel kernel, later calls call it
    directly (no lookup by argument fingerprints): the same rows as NumPy's indexing, for
    contiguous int64 rows, and rows of another layout or dtype go through the tier."""
    from nbdata.kernels import tiers
    monkeypatch.setattr(tiers, "PARALLEL_AFTER", 0)
    a = np.random.default_rng(1).integers(0, 100, size=shape).astype(dtype)
    gather = RowGather(a)
    kernel = gather.kernel
    monkeypatch.setattr(kernel, "_tiers", {})   # (tiers start over under PARALLEL_AFTER 0)
    rows = np.array([7, 3, 3, 49, 0, 12], np.int64)
    np.testing.assert_array_equal(gather(rows), a[rows])
    assert gather.parallel is kernel.parallel
    looked = []
    monkeypatch.setattr(kernel, "call_or", lambda *args, **kw: looked.append(args))
    for r in (rows[::-1].copy(), np.arange(50, dtype=np.int64)):
        got = gather(r)
        assert got.dtype == a.dtype and got.base is None
        np.testing.assert_array_equal(got, a[r])
    assert not looked
    read_only = rows.copy()
    read_only.flags.writeable = False
    for r in (rows[::2], read_only):   # other types: through the tier (the spy writes nothing)
        gather(r)
    assert len(looked) == 2
