"""Tests for Dataset.shuffle: permutation, buffer locality, seeds and epochs (tf.data semantics)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbdata as nd

from equivalence import fused, fusing, reference, resumed


def values(ds):
    return [int(v) for v in ds.as_numpy_iterator()]


def assert_buffer_locality(out, buffer_size):
    """tf.data's shuffle fills a buffer of `buffer_size` elements and draws from it, so the
    k-th output (0-based) can only be one of the inputs 0 .. k + buffer_size - 1."""
    for k, v in enumerate(out):
        assert v <= k + buffer_size - 1, (
            f"output {k} is input {v}, beyond the buffer (size {buffer_size})")


# ---------------------------------------------------------------- properties

@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 60), buffer_size=st.integers(1, 70), seed=st.integers(0, 2**31 - 1))
def test_is_permutation_with_buffer_locality(n, buffer_size, seed):
    out = values(nd.Dataset.range(n).shuffle(buffer_size, seed=seed))
    assert sorted(out) == list(range(n))
    assert_buffer_locality(out, buffer_size)


@pytest.mark.parametrize("buffer_size", [2, 5, 17])
def test_buffer_locality_random_access_source(buffer_size):
    # from_tensor_slices is random-access; a "shuffle over indices" rewrite must still
    # respect the buffer size.
    data = np.arange(200, dtype=np.int64)
    out = values(nd.Dataset.from_tensor_slices(data).shuffle(buffer_size, seed=11))
    assert sorted(out) == list(range(200))
    assert_buffer_locality(out, buffer_size)
    assert out != list(range(200))


@pytest.mark.parametrize("buffer_size", [3, 10])
def test_buffer_locality_range_source(buffer_size):
    out = values(nd.Dataset.range(300).shuffle(buffer_size, seed=5))
    assert sorted(out) == list(range(300))
    assert_buffer_locality(out, buffer_size)


def test_buffer_locality_generator_source():
    def gen():
        yield from range(100)

    ds = nd.Dataset.from_generator(gen, output_types=np.int64, output_shapes=())
    out = values(ds.shuffle(4, seed=2))
    assert sorted(out) == list(range(100))
    assert_buffer_locality(out, 4)


def test_first_output_comes_from_first_buffer():
    for seed in range(5):
        first = values(nd.Dataset.range(1000).shuffle(10, seed=seed).take(1))
        assert len(first) == 1 and 0 <= first[0] < 10


def test_buffer_size_one_is_identity():
    assert values(nd.Dataset.range(50).shuffle(1)) == list(range(50))
    assert values(nd.Dataset.range(50).shuffle(1, seed=3)) == list(range(50))


def test_buffer_larger_than_dataset_is_a_permutation():
    out = values(nd.Dataset.range(40).shuffle(1000, seed=9))
    assert sorted(out) == list(range(40))
    assert out != list(range(40))


def test_small_buffer_actually_shuffles():
    out = values(nd.Dataset.range(100).shuffle(2, seed=1))
    assert out != list(range(100))


def test_empty_dataset():
    assert values(nd.Dataset.range(0).shuffle(10, seed=1)) == []


def test_element_types_and_pairing_kept():
    a = np.arange(30, dtype=np.int32)
    b = np.arange(30, dtype=np.float32) * 10
    s = np.array([str(i).encode() for i in range(30)], dtype=object)
    ds = nd.Dataset.from_tensor_slices((a, b, s)).shuffle(30, seed=4)
    out = list(ds.as_numpy_iterator())
    assert len(out) == 30
    for x, y, z in out:
        assert isinstance(x, np.int32) and isinstance(y, np.float32) and type(z) is bytes
        assert y == np.float32(x) * 10 and z == str(int(x)).encode()
    assert sorted(int(x) for x, _, _ in out) == list(range(30))


def test_dict_elements():
    ds = nd.Dataset.from_tensor_slices({"x": np.arange(20), "y": np.arange(20) * 2})
    out = list(ds.shuffle(20, seed=0).as_numpy_iterator())
    assert all(set(e) == {"x", "y"} and e["y"] == 2 * e["x"] for e in out)
    assert sorted(int(e["x"]) for e in out) == list(range(20))


def test_vector_elements_kept_whole():
    data = np.arange(60, dtype=np.float64).reshape(20, 3)
    out = list(nd.Dataset.from_tensor_slices(data).shuffle(8, seed=8).as_numpy_iterator())
    assert all(isinstance(r, np.ndarray) and r.shape == (3,) and r.dtype == np.float64 for r in out)
    assert sorted(tuple(r) for r in out) == [tuple(r) for r in data]


def test_shuffle_after_map():
    out = values(nd.Dataset.range(50).map(lambda x: x * 3).shuffle(7, seed=1))
    assert sorted(out) == [3 * i for i in range(50)]
    assert_buffer_locality([v // 3 for v in out], 7)


# ---------------------------------------------------------------- seeds

def test_same_seed_same_order():
    a = values(nd.Dataset.range(100).shuffle(100, seed=42))
    b = values(nd.Dataset.range(100).shuffle(100, seed=42))
    assert a == b


def test_same_seed_same_order_across_epochs():
    a = values(nd.Dataset.range(30).shuffle(30, seed=7).repeat(3))
    b = values(nd.Dataset.range(30).shuffle(30, seed=7).repeat(3))
    assert a == b


def test_same_seed_same_sequence_of_python_epochs():
    ds1 = nd.Dataset.range(30).shuffle(30, seed=7)
    ds2 = nd.Dataset.range(30).shuffle(30, seed=7)
    assert [values(ds1), values(ds1)] == [values(ds2), values(ds2)]


def test_different_seeds_differ():
    a = values(nd.Dataset.range(100).shuffle(100, seed=1))
    b = values(nd.Dataset.range(100).shuffle(100, seed=2))
    assert a != b


def test_unseeded_shuffles_differ():
    a = values(nd.Dataset.range(100).shuffle(100))
    b = values(nd.Dataset.range(100).shuffle(100))
    assert sorted(a) == sorted(b) == list(range(100))
    assert a != b


def test_seeded_shuffle_same_on_reference_and_fused_paths():
    # Two separately built pipelines: a dataset derived from a shuffle shares its
    # reshuffle state (epoch counter), as tf.data's seed generator is shared.
    def build():
        return nd.Dataset.range(80).map(lambda x: x + 1).shuffle(16, seed=123)

    assert fused(build()) == values(reference(build()))
    assert fused(build().repeat(2)) == values(reference(build()).repeat(2))


def test_derived_dataset_shares_reshuffle_state():
    ds = nd.Dataset.range(50).shuffle(50, seed=9)
    first = values(ds)
    # Iterating a dataset built on top of ds is ds's next epoch, not a replay of its first.
    assert values(ds.map(lambda x: x)) != first


# ---------------------------------------------------------------- epochs

def test_reshuffle_each_iteration_default_true_python_epochs():
    ds = nd.Dataset.range(50).shuffle(50)
    e1, e2 = values(ds), values(ds)
    assert sorted(e1) == sorted(e2) == list(range(50))
    assert e1 != e2


def test_reshuffle_each_iteration_true_with_seed_python_epochs():
    ds = nd.Dataset.range(50).shuffle(50, seed=3, reshuffle_each_iteration=True)
    e1, e2 = values(ds), values(ds)
    assert sorted(e1) == sorted(e2) == list(range(50))
    assert e1 != e2


def test_reshuffle_each_iteration_true_with_repeat():
    out = values(nd.Dataset.range(50).shuffle(50, seed=3).repeat(3))
    epochs = [out[0:50], out[50:100], out[100:150]]
    for e in epochs:
        assert sorted(e) == list(range(50))
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2]


@pytest.mark.parametrize("seed", [None, 5])
def test_reshuffle_each_iteration_false_keeps_order_python_epochs(seed):
    ds = nd.Dataset.range(50).shuffle(50, seed=seed, reshuffle_each_iteration=False)
    e1, e2, e3 = values(ds), values(ds), values(ds)
    assert e1 == e2 == e3
    assert sorted(e1) == list(range(50)) and e1 != list(range(50))


@pytest.mark.parametrize("seed", [None, 5])
def test_reshuffle_each_iteration_false_keeps_order_with_repeat(seed):
    out = values(nd.Dataset.range(50).shuffle(50, seed=seed, reshuffle_each_iteration=False).repeat(3))
    assert out[0:50] == out[50:100] == out[100:150]
    assert sorted(out[0:50]) == list(range(50))


def test_reshuffle_each_iteration_on_compiled_pipeline():
    pipe = nd.Dataset.range(40).shuffle(40, seed=1).compile()
    e1 = [int(v) for v in pipe]
    e2 = [int(v) for v in pipe]
    assert sorted(e1) == sorted(e2) == list(range(40))
    assert e1 != e2


# ---------------------------------------------------------------- shuffle/repeat order

def test_shuffle_then_repeat_keeps_epoch_boundaries():
    out = values(nd.Dataset.range(10).shuffle(10, seed=1).repeat(4))
    assert len(out) == 40
    for k in range(4):
        assert sorted(out[10 * k:10 * (k + 1)]) == list(range(10))


def test_repeat_then_shuffle_mixes_epochs():
    # With a buffer as large as two epochs, elements of the second epoch can come out
    # before all of the first has: some seed among a few must cross the boundary.
    crossed = False
    for seed in range(5):
        out = values(nd.Dataset.range(20).repeat(2).shuffle(40, seed=seed))
        assert sorted(out) == sorted(list(range(20)) * 2)
        if sorted(out[:20]) != list(range(20)):
            crossed = True
    assert crossed


def test_repeat_then_shuffle_buffer_locality():
    # enumerate labels each element with its input position before shuffling.
    out = values(nd.Dataset.range(15).repeat(3).enumerate().map(lambda i, x: i).shuffle(6, seed=2))
    assert sorted(out) == list(range(45))
    assert_buffer_locality(out, 6)


def test_repeat_then_shuffle_infinite():
    out = values(nd.Dataset.range(5).repeat().shuffle(5, seed=0).take(100))
    assert len(out) == 100
    assert sorted(set(out)) == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------- metadata

def test_cardinality_and_spec_preserved():
    ds = nd.Dataset.range(10)
    sh = ds.shuffle(3)
    assert sh.cardinality() == 10
    assert sh.element_spec == ds.element_spec
    assert nd.Dataset.range(3).repeat().shuffle(2).cardinality() == nd.INFINITE
    assert nd.Dataset.range(3).filter(lambda x: x > 0).shuffle(2).cardinality() == nd.UNKNOWN


def test_numpy_integer_buffer_size():
    assert sorted(values(nd.Dataset.range(10).shuffle(np.int64(4), seed=np.int64(1)))) == list(range(10))


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("buffer_size", [0, -5])
def test_non_positive_buffer_size_rejected(buffer_size):
    with pytest.raises(ValueError, match="(?i)shuffle|buffer"):
        nd.Dataset.range(10).shuffle(buffer_size)


@pytest.mark.parametrize("buffer_size", ["10", 2.5, None])
def test_non_integer_buffer_size_rejected(buffer_size):
    with pytest.raises((TypeError, ValueError)):
        nd.Dataset.range(10).shuffle(buffer_size)


@pytest.mark.parametrize("fusion", [True, False])
def test_buffer_locality_after_filter(fusion):
    ds = nd.Dataset.range(300).filter(lambda x: x % 3 == 0).map(lambda x: x // 3).shuffle(5, seed=21)
    ds = fusing(ds) if fusion else reference(ds)
    out = values(ds)
    assert sorted(out) == list(range(100))
    assert_buffer_locality(out, 5)


def test_shuffle_of_batches_keeps_batches_whole():
    out = list(nd.Dataset.range(20).batch(4).shuffle(3, seed=2).as_numpy_iterator())
    firsts = [int(b[0]) // 4 for b in out]
    assert sorted(firsts) == list(range(5))
    assert_buffer_locality(firsts, 3)
    for b in out:
        assert b.dtype == np.int64 and b.tolist() == list(range(b[0], b[0] + 4))


# ------------------------------------------ the row numbers' shuffle: state and replay

def _copy_every(monkeypatch, draws: int) -> None:
    """The shuffle of row numbers copies its buffer every ``draws`` draws."""
    monkeypatch.setattr("nbdata.ops.shuffle.REPLAY_DRAWS", draws)
    monkeypatch.setattr("nbdata.ops.shuffle.REPLAY_PER_ROW", 0)


@pytest.mark.parametrize("n,buffer_size", [(300, 16), (300, 300), (300, 1000), (301, 7)])
@pytest.mark.parametrize("fusion", [True, False])
def test_row_number_shuffle_resumes_at_every_point_across_buffer_copies(
        monkeypatch, n, buffer_size, fusion):
    """Over arrays the buffer holds row numbers, copied every few draws; a restore
    replays the draws since the copy. Saved anywhere (in the buffer's fill, while the
    input lasts, in the drain; right at a copy or between), the rest is the same."""
    _copy_every(monkeypatch, 5)
    x = np.arange(n, dtype=np.int64) * 3
    ds = nd.Dataset.from_tensor_slices(x).shuffle(buffer_size, seed=4) \
        .map(lambda v: v + 1).batch(4)
    # (unfused: the passes run, the shuffle of row numbers too, but no kernel; fused: the
    # parallel kernel from the first call, whose whole batches skip the row queue)
    pipe = (fusing(ds, parallel_kernel_after=0) if fusion
            else fusing(ds, fusion_min_rows=10**9)).compile()
    assert "over row numbers" in pipe.explain()
    assert bool(pipe.fused_stages()) == fusion
    one = np.concatenate(list(pipe))
    assert sorted(one.tolist()) == list(range(1, 3 * n, 3))
    for taken in list(range(0, n // 4 + 2, 3)) + [n // 4 - 1]:
        want, got, _ = resumed(pipe, taken)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_row_number_shuffle_state_is_small_and_holds_no_rows():
    """A state over 200,000 rows of 1 KB with a buffer of 100,000 rows holds no rows,
    and saving copies nothing: the buffer's row numbers are copied once per 800,000
    draws (8 per row), here never in the epoch."""
    x = np.zeros((200_000, 128), np.float64)
    o = nd.Options()
    o.fusion_min_rows = 0
    pipe = nd.Dataset.from_tensor_slices(x).shuffle(100_000, seed=1) \
        .map(lambda r: r * 2.0).batch(128).with_options(o).compile()
    it = iter(pipe)
    for _ in range(1_000):
        next(it)
    assert len(it.save()) < 4_000


def test_row_number_shuffle_restores_a_state_saved_with_the_buffer(monkeypatch):
    """A state that holds the buffer's row numbers as the shuffle saved them before it
    copied them only every so many draws (``store``, ``filled``; ``order`` once the
    input ended) restores where it was."""
    from nbdata import checkpoint
    _copy_every(monkeypatch, 1)   # every state holds the buffer as of its last draw
    small = nd.Options()
    small.chunk_rows = 2

    def make():
        return nd.Dataset.range(50).shuffle(8, seed=1).with_options(small)

    for taken in (3, 20, 45):
        it = iter(make())
        for _ in range(taken):
            next(it)
        state = it.save()
        doc = checkpoint.decode(state)
        root = doc["run"]["run"]["root"]
        draws = root["draws"]
        assert root["base"] == draws > 0
        drained = draws > 50 - 8
        old = {"epoch": root["epoch"], "size": 8, "draws": draws, "filled": 8,
               "ended": drained, "store": [root["buffer"]],
               "order": root["order"][:50 - draws] if drained else None,
               "input": {"pos": 50 if drained else 8 + draws}, "positions": None,
               "consumed": 0}
        doc["run"]["run"]["root"] = old
        again = iter(make())
        again.restore(checkpoint.encode(doc))
        assert [int(v) for v in again] == [int(v) for v in it]


@pytest.mark.parametrize("fusion", [True, False])
def test_a_row_that_raises_after_a_shuffle_of_row_numbers_raises_where_python_does(fusion):
    """A fused stage reading rows at shuffled row numbers hands out whole batches straight
    from its kernel; a row whose function raises sends that call's row numbers to the
    general path, which re-runs them on the reference path: the same batches before
    the error and the same error as op by op."""
    x = np.arange(1000, dtype=np.int64)
    table = np.arange(600, dtype=np.int64) * 3   # rows 600.. index past its end (in a
    # call of whole batches, not the last one's tail)

    def make():   # (a dataset of its own each: derived datasets share their epochs)
        return nd.Dataset.from_tensor_slices(x).shuffle(64, seed=9) \
            .map(lambda v: table[v]).batch(8)

    # (the parallel kernel from the first call: the serial tier never takes this path)
    pipe = (fusing(make(), parallel_kernel_after=0) if fusion
            else fusing(make(), fusion_min_rows=10**9)).compile()
    assert bool(pipe.fused_stages()) == fusion and "over row numbers" in pipe.explain()
    outcomes = []
    for p in (pipe, reference(make()).compile()):
        got = []
        with pytest.raises(nd.errors.InvalidArgumentError, match="IndexError") as e:
            for b in p:
                got.append(b.tolist())
        outcomes.append((got, str(e.value)))
    assert outcomes[0] == outcomes[1] and len(outcomes[0][0]) > 0


@pytest.mark.parametrize("fusion", [True, False])
def test_a_shuffle_of_row_numbers_gives_its_buffer_back_at_each_iterations_end(fusion):
    """The buffer's bytes count toward the pipeline's memory budget while an iteration
    runs, and go back when it ends or is closed (a fused stage's iterations held them
    for good: 50 epochs over a 10,000-row buffer held 4-8 MB, and a long enough run would
    have reached the budget)."""
    x = np.arange(5_000, dtype=np.float32)
    ds = nd.Dataset.from_tensor_slices(x).shuffle(1_000, seed=1).map(lambda v: v * 2).batch(64)
    pipe = (fusing(ds) if fusion else fusing(ds, fusion_min_rows=10**9)).compile()
    assert bool(pipe.fused_stages()) == fusion and "over row numbers" in pipe.explain()
    for _ in range(5):
        assert len(list(pipe)) == 79
        assert pipe.memory.held == 0
    it = iter(pipe)
    next(it)
    assert pipe.memory.held > 0   # the buffer, while the iteration runs
    assert len(list(it)) == 78 and pipe.memory.held == 0
