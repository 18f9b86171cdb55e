"""tf.data's vectorized filter, ``batch(B).map(lambda b: b[mask(b)])`` with a row-wise
mask, fuses: the mask runs as a filter inside the stage's kernel and the batches are cut
where each B input rows end (the kept rows of each batch, an empty batch where none is
kept). Same batches as the map on whole batches: values, dtypes, shapes, count."""

import numpy as np
import pytest

import nbdata as nd
from equivalence import either_path, resumed

ROWS = 5_000


def data():
    return (np.arange(ROWS * 16, dtype=np.int64).reshape(ROWS, 16) * 7919) % 1000


def pair_mask(a, y):
    m = y > 500
    return a[m], y[m]


def run(ds, fused=True, **options):
    return either_path(ds, fused, **options)


def same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for a, b in zip(g if isinstance(g, tuple) else (g,), w if isinstance(w, tuple) else (w,)):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


CASES = {
    "column of a 2-d row": (lambda: data(), lambda b: b[b[:, 0] % 3 != 0], 128),
    "scalar rows": (lambda: data()[:, 0].copy(), lambda b: b[b % 3 != 0], 128),
    "two components, one mask": (lambda: (data(), data()[:, 1].astype(np.float32)), pair_mask, 64),
    "slice and astype": (lambda: data().astype(np.float32),
                         lambda b: b[(b[:, 2:4].astype(np.int64) % 2 == 0)[:, 0]], 100),
    "most batches empty": (lambda: data(), lambda b: b[b[:, 0] > 990], 7),
}


@pytest.mark.parametrize("chunk_rows", [0, 333], ids=["default chunks", "chunks inside batches"])
@pytest.mark.parametrize("drop_remainder", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_masked_batches_are_the_map_on_whole_batches(case, drop_remainder, chunk_rows):
    make, fn, size = CASES[case]
    ds = nd.Dataset.from_tensor_slices(make()).batch(size, drop_remainder=drop_remainder).map(fn)
    pipe = run(ds, chunk_rows=chunk_rows).compile()
    plan = pipe.explain()
    assert "filter(mask of" in plan and "masked_batch" in plan
    assert "per element" not in plan
    want = list(run(ds, fused=False))
    got = list(pipe)
    same(got, want)
    assert len(got) == (ROWS // size if drop_remainder else -(-ROWS // size))
    if case == "most batches empty":
        assert sum(len(b) == 0 for b in got) > len(got) // 2
        assert all(b.shape[1:] == (16,) for b in got)


@pytest.mark.parametrize("fn", [
    lambda b: b[b[:, 0] > b[:, 0].mean()],          # a reduction over the batch
    lambda b: b[::-1][b[:, 0] % 2 == 0],            # rows reordered
    lambda b: (b + 1)[b[:, 0] % 2 == 0],            # a computed value indexed
], ids=["reduction", "reversed", "computed"])
def test_masks_that_are_not_row_wise_run_on_whole_batches(fn):
    ds = nd.Dataset.from_tensor_slices(data()).batch(100).map(fn)
    pipe = run(ds).compile()
    assert "masked_batch" not in pipe.explain()
    same(list(pipe), list(run(ds, fused=False)))


@pytest.mark.parametrize("chunk_rows", [0, 333], ids=["default chunks", "chunks inside batches"])
def test_a_shuffled_input_fuses_and_is_cut_in_its_shuffled_order(chunk_rows):
    """Batches end where each B rows of the shuffled order end (each dataset built
    anew: a shuffle's epochs count per dataset)."""
    def build():
        return nd.Dataset.from_tensor_slices(data()).shuffle(1_000, seed=4).batch(128) \
            .map(lambda b: b[b[:, 0] % 3 != 0])
    pipe = run(build(), chunk_rows=chunk_rows).compile()
    assert "masked_batch" in pipe.explain() and "row numbers" in pipe.explain()
    same(list(pipe), list(run(build(), fused=False)))
    want, got, _ = resumed(pipe, 9)
    same(got, want)


@pytest.mark.parametrize("shuffled", [False, True], ids=["in order", "shuffled"])
@pytest.mark.parametrize("chunk_rows", [0, 333], ids=["default chunks", "chunks inside batches"])
def test_maps_before_the_batch_fuse_with_it(shuffled, chunk_rows):
    """The mask reads the map's values; the kept rows are the map's outputs (computed
    columns, not source rows)."""
    def build():
        ds = nd.Dataset.from_tensor_slices(data())
        if shuffled:
            ds = ds.shuffle(700, seed=2)
        return ds.map(lambda r: r.astype(np.float32) / 7).batch(100) \
            .map(lambda b: b[b[:, 3] > 70])
    pipe = run(build(), chunk_rows=chunk_rows).compile()
    assert "masked_batch" in pipe.explain() and "per element" not in pipe.explain()
    same(list(pipe), list(run(build(), fused=False)))


@pytest.mark.parametrize("op", ["filter", "skip", "enumerate"])
def test_ops_that_drop_or_count_rows_before_the_batch_run_it_as_written(op):
    def build():
        ds = nd.Dataset.from_tensor_slices(data())
        if op == "filter":
            ds = ds.filter(lambda r: r[1] % 2 == 0)
        elif op == "skip":
            ds = ds.skip(9)
        else:
            ds = ds.enumerate().map(lambda i, r: r + i)
        return ds.batch(128).map(lambda b: b[b[:, 0] % 3 != 0])
    pipe = run(build()).compile()
    assert "drops or counts rows" in pipe.explain()
    same(list(pipe), list(run(build(), fused=False)))


@pytest.mark.parametrize("mapped", [False, True], ids=["source rows", "a map's rows"])
def test_a_state_saved_between_groups_resumes(mapped):
    ds = nd.Dataset.from_tensor_slices(data())
    if mapped:   # kept rows are computed columns, queued as rows, not as positions
        ds = ds.map(lambda r: r * 2 + 1)
    ds = ds.batch(128).map(lambda b: b[b[:, 0] % 3 != 0])
    pipe = run(ds, chunk_rows=333).compile()
    for taken in (1, 2, 5, 17):
        want, got, _ = resumed(pipe, taken)
        same(got, want)
        assert len(want) == -(-ROWS // 128) - taken


def fail_source_row(monkeypatch, bad, place):
    """The kernel sends the call that reads source row ``bad`` to the reference path,
    where its mask raises. ``place(lo, k, args)``: where that row is in the call, or
    None. Returns the places it did so at."""
    from nbdata.compiler import fused_stage
    from nbdata.errors import InvalidArgumentError
    from nbdata.ops.filter import FilterStep
    triggered = []
    real_running = fused_stage.FusedStage.running

    def running(stage):
        kernel = real_running(stage)

        def call(lo, k, *args):
            at = place(int(lo), int(k), args)
            if at is not None:
                triggered.append(at)
                return np.int64(at), False, np.int64(0)
            return kernel(lo, k, *args)
        return call

    real_reference = FilterStep.reference

    def reference(step, element):
        if int(element[0]) == int(data()[bad, 0]):
            raise InvalidArgumentError("mask failed", "filter")
        return real_reference(step, element)

    monkeypatch.setattr(fused_stage.FusedStage, "running", running)
    monkeypatch.setattr(FilterStep, "reference", reference)
    return triggered


def until_error(it) -> list:
    """The batches before the iterator raises the mask's error."""
    got = []
    with pytest.raises(nd.errors.InvalidArgumentError, match="mask failed"):
        for b in it:
            got.append(b)
    return got


def test_an_error_in_a_group_loses_that_batch_and_iteration_goes_on(monkeypatch):
    """A row whose mask raises (on the reference path the kernel sends its chunk to):
    the batches before its group come out, then the error, then the batches after it,
    as when the map's function raises on one whole batch."""
    bad = 700    # in group 5 (rows 640..767)
    fn = lambda b: b[b[:, 0] % 3 != 0]   # noqa: E731
    ds = nd.Dataset.from_tensor_slices(data()).batch(128).map(fn)
    want = list(run(ds, fused=False))
    triggered = fail_source_row(monkeypatch, bad,
                                lambda lo, k, args: bad - lo if lo <= bad < lo + k else None)
    it = iter(run(ds, chunk_rows=256).compile())
    same(until_error(it), want[:5])
    same(list(it), want[6:])
    assert triggered   # the kernel sent the row's chunk to the reference path


def test_an_error_over_a_shuffle_loses_its_batch_and_the_rest_of_its_rows(monkeypatch):
    """As above over a shuffle read at row numbers: the failing group's other row numbers
    are dropped with it (already taken from the shuffle or still to come), and the next
    batch is the next group's."""
    bad = 700

    def place(lo, k, args):
        idx = args[2]   # from_tensor_slices' two arguments, then the row numbers
        assert idx.ndim == 1 and idx.dtype == np.int64
        hit = np.flatnonzero(idx[:k] == bad)
        return int(hit[0]) if len(hit) else None

    def build():
        return nd.Dataset.from_tensor_slices(data()).shuffle(1_000, seed=4).batch(128) \
            .map(lambda b: b[b[:, 0] % 3 != 0])

    order = np.concatenate(list(run(nd.Dataset.from_tensor_slices(np.arange(ROWS))
                                    .shuffle(1_000, seed=4).batch(500), fused=False)))
    group = int(np.flatnonzero(order == bad)[0]) // 128
    want = list(run(build(), fused=False))
    triggered = fail_source_row(monkeypatch, bad, place)
    it = iter(run(build(), chunk_rows=200).compile())
    same(until_error(it), want[:group])
    same(list(it), want[group + 1:])
    assert triggered   # the kernel sent the row's chunk to the reference path
