"""A fused stage whose element is kept rows of in-memory source columns (a filter over
arrays, shuffled or not) carries the kept rows' source positions between kernel calls
and gathers each batch from the source once, when it is whole: a batch whose rows come
from two kernel calls is not gathered per call and then joined, and a state saved
between them holds positions, not rows."""

import numpy as np
import pytest

import nbdata as nd
from equivalence import either_path

ROWS, WIDTH = 3_000, 2_048   # 4 KiB rows (int16)


def data():
    x = np.random.default_rng(7).integers(0, 1000, (ROWS, WIDTH)).astype(np.int16)
    x[:, 0] = np.arange(ROWS)
    return x


def build(x, shuffled, fused=True, batch=64):
    ds = nd.Dataset.from_tensor_slices(x)
    if shuffled:
        ds = ds.shuffle(1_000, seed=5)
    # (chunk_rows: kernel calls end inside batches)
    return either_path(ds.filter(lambda v: v[0] % 3 != 0).batch(batch), fused, chunk_rows=333)


@pytest.mark.parametrize("shuffled", [False, True], ids=["in order", "shuffled"])
def test_each_batch_is_one_gather_from_the_source(shuffled, monkeypatch):
    from nbdata.compiler import fused_stage
    gathered = []

    class Spy(fused_stage.RowGather):
        def __call__(self, rows):
            out = super().__call__(rows)
            gathered.append(out)
            return out

    monkeypatch.setattr(fused_stage, "RowGather", Spy)
    x = data()
    want = list(build(x, shuffled, fused=False))
    got = list(build(x, shuffled).compile())
    assert len(got) == len(want) == -(-(ROWS * 2 // 3) // 64)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # Every batch is a view of one gather (before: a batch straddling two kernel calls
    # was a join of two gathers, its rows copied twice), and the rows gathered are the
    # rows handed out, each once.
    outputs = {id(a) for a in gathered}
    assert all(id(b.base) in outputs or id(b) in outputs for b in got)
    assert sum(len(a) for a in gathered) == sum(len(b) for b in got)


@pytest.mark.parametrize("shuffled", [False, True], ids=["in order", "shuffled"])
def test_a_state_between_kernel_calls_holds_positions_and_resumes(shuffled):
    x = data()
    pipe = build(x, shuffled).compile()
    total = -(-(ROWS * 2 // 3) // 64)
    sizes = []
    for taken in (1, 5, 6, 11, 20):
        it = iter(pipe)
        for _ in range(taken):
            next(it)
        state = it.save()
        sizes.append(len(state))
        want = list(it)
        again = iter(pipe)
        again.restore(state)
        rest = list(again)
        assert len(rest) == len(want) == total - taken
        for g, w in zip(rest, want):
            np.testing.assert_array_equal(g, w)
    # Rows that wait for their batch are up to 63 x 4 KiB = 258 KB; their positions
    # 504 bytes (the shuffle's own buffer of row numbers is 8 KB).
    assert max(sizes) < 40_000, sizes


def test_rows_of_the_reference_path_and_carried_positions_keep_their_order():
    """A row the kernel cannot compute sends its chunk to the reference path: rows made
    there follow the positions carried before them, and later calls' rows follow them."""
    x = data()
    table = np.arange(1_100, dtype=np.int64)

    def keep(v):
        # row 1100 indexes out of range: the kernel's call over rows 999..1149 falls
        # back, and the reference path keeps rows 999..1099 (67 of them, after the 26
        # positions carried from the calls before) and raises at row 1100, as the
        # plain path does
        return table[v[0]] % 3 != 0

    def run(fused):
        ds = nd.Dataset.from_tensor_slices(x[:1_150]).filter(keep).batch(64)
        out = []
        with pytest.raises(nd.errors.InvalidArgumentError, match="IndexError: index 1100") as e:
            for b in either_path(ds, fused, chunk_rows=333):
                out.append(b)
        return out, str(e.value)

    (want, error), (got, error_fused) = run(False), run(True)
    assert error_fused == error
    assert len(got) == len(want) == (666 + 67) // 64
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


SOURCES = {
    "repeat": lambda x: nd.Dataset.from_tensor_slices(x).repeat(3),
    "endless repeat": lambda x: nd.Dataset.from_tensor_slices(x).repeat(),
    "a constant repeated": lambda x: nd.Dataset.from_tensors(x[1:4]).repeat(),
    "zip": lambda x: nd.Dataset.zip((nd.Dataset.from_tensor_slices(x),
                                     nd.Dataset.from_tensor_slices(x[:, 1].copy()))),
    "skip and take": lambda x: nd.Dataset.from_tensor_slices(x).skip(7).take(200),
    "shard": lambda x: nd.Dataset.from_tensor_slices(x).shard(3, 1),
}


@pytest.mark.parametrize("source", list(SOURCES))
def test_filters_over_other_sources_give_the_plain_batches(source):
    """Positions index the source's columns only where every source row has one there:
    a repeat (finite or endless), a constant, a zip, counted steps."""
    x = ((np.arange(300 * 8, dtype=np.int64).reshape(300, 8) * 7919) % 1000)
    assert x[1, 0] % 3 != 0   # the constant's rows are kept (an endless filter ends)

    def keep(*e):
        v = e[0]
        return v[(0,) * v.ndim] % 3 != 0

    def build(fused):
        return either_path(SOURCES[source](x).filter(keep).batch(32).take(30), fused,
                           chunk_rows=64)

    want, got = list(build(False)), list(build(True))
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
        for a, b in zip(g if isinstance(g, tuple) else (g,), w if isinstance(w, tuple) else (w,)):
            assert a.shape == b.shape
            np.testing.assert_array_equal(a, b)
