"""A fused stage whose element is kept rows of in-memory source columns (a filter over
arrays, shuffled or not) carries the kept rows' source positions between kernel calls
and gathers each batch from the source once, when it is whole: a batch whose rows come
from two kernel calls is not gathered per call and then joined, and a state saved
between them holds positions, not rows."""

import numpy as np
import pytest

import nbdata as nd

ROWS, WIDTH = 3_000, 2_048   # 4 KiB rows (int16)


def data():
    x = np.random.default_rng(7).integers(0, 1000, (ROWS, WIDTH)).astype(np.int16)
    x[:, 0] = np.arange(ROWS)
    return x


def build(x, shuffled, fused=True, batch=64):
    o = nd.Options()
    if fused:
        o.fusion_min_rows = 0
        o.chunk_rows = 333           # kernel calls end inside batches
    else:
        o.fusion = False
    ds = nd.Dataset.from_tensor_slices(x)
    if shuffled:
        ds = ds.shuffle(1_000, seed=5)
    return ds.filter(lambda v: v[0] % 3 != 0).batch(batch).with_options(o)


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
        o = nd.Options()
        o.fusion = fused
        if fused:
            o.fusion_min_rows = 0
            o.chunk_rows = 333
        ds = nd.Dataset.from_tensor_slices(x[:1_150]).filter(keep).batch(64)
        out = []
        with pytest.raises(nd.errors.InvalidArgumentError, match="IndexError: index 1100") as e:
            for b in ds.with_options(o):
                out.append(b)
        return out, str(e.value)

    (want, error), (got, error_fused) = run(False), run(True)
    assert error_fused == error
    assert len(got) == len(want) == (666 + 67) // 64
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
