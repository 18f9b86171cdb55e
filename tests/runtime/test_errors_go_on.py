"""After an element raises, iteration goes on with the next element (tf.data's rule), on
the fused path as on the plain one. A fused stage over a stream (a cache, a repeat, a
generator) or a shuffle re-runs a chunk whose row raised on the reference path; the
rows after that row were dropped with the chunk (31 of 200 elements lost after one
error, silently), and are now run next. A state saved right after the error resumes
with them."""

import numpy as np
import pytest

import nbdata as nd
from equivalence import either_path

TABLE = np.arange(100, dtype=np.int64)
SOURCES = {
    "in place": lambda d: d,
    "shuffle": lambda d: d.shuffle(50, seed=3),
    "cache": lambda d: d.cache(),
    "repeat": lambda d: d.repeat(2),
    "generator": lambda d: nd.Dataset.from_generator(
        lambda: iter(range(200)), output_signature=nd.TensorSpec((), np.int64)),
}


def build(source, fused, batch):
    ds = SOURCES[source](nd.Dataset.from_tensor_slices(np.arange(200, dtype=np.int64)))
    ds = ds.map(lambda v: TABLE[v % 101])   # row 100 indexes out of range
    if batch:
        ds = ds.batch(8)
    return either_path(ds, fused, chunk_rows=32)


def outcomes(it, limit=1_000):
    out = []
    for _ in range(limit):
        try:
            out.append(np.asarray(next(it)).tolist())
        except StopIteration:
            return out
        except nd.errors.OpError as e:
            out.append(type(e).__name__)
    raise AssertionError("did not end")


@pytest.mark.parametrize("batch", [False, True], ids=["elements", "batches"])
@pytest.mark.parametrize("source", list(SOURCES))
def test_the_elements_after_an_error_come_out_fused_as_plain(source, batch):
    want = outcomes(iter(build(source, False, batch)))
    got = outcomes(iter(build(source, True, batch)))
    assert "InvalidArgumentError" in want
    assert got == want


@pytest.mark.parametrize("source", ["shuffle", "cache", "generator"])
def test_a_state_saved_after_the_error_resumes_with_the_rest(source):
    pipe = build(source, True, False).compile()
    it = iter(pipe)
    seen = []
    while True:
        try:
            seen.append(int(next(it)))
        except nd.errors.OpError:
            break
    state = it.save()
    want = outcomes(it)
    again = iter(pipe)
    again.restore(state)
    assert outcomes(again) == want
    assert len(seen) + 1 + len(want) == 200 * (2 if source == "repeat" else 1)


@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])
def test_an_input_error_does_not_move_the_indices_of_the_rows_after_it(fused):
    """random_map draws by the row's index in its input: the rows after an input error
    get the indices that follow the rows before it (a row-by-row op counted its input
    chunk twice after its input raised, moving every later draw)."""
    def draws(values, raising):
        ds = nd.Dataset.from_tensor_slices(np.array(values, np.int64)).batch(2).unbatch()
        ds = ds.map(lambda v: TABLE[v] if raising else TABLE[v % 100])
        ds = ds.random_map(lambda v, rng: v * 0 + rng.integers(0, 1 << 40), seed=11)
        return outcomes(iter(either_path(ds, fused)))

    got = draws([0, 1, 2, 150, 4, 5, 6], raising=True)     # row 150 raises
    want = draws([0, 1, 2, 4, 5, 6], raising=False)
    assert got[3] == "InvalidArgumentError"
    assert got[:3] + got[4:] == want
