"""Seeded randomness: random_map generators, nd.random.set_seed, pipeline seeds, shuffles
and global_shuffle."""

import numba
import numpy as np
import pytest

import nbdata as nd


def values(ds):
    return [tuple(float(v) for v in np.atleast_1d(np.asarray(e, dtype=float)).ravel())
            if not isinstance(e, tuple) else tuple(float(v) for v in e) for e in ds]


@pytest.fixture(autouse=True)
def no_global_seed():
    nd.random.set_seed(None)
    yield
    nd.random.set_seed(None)


def draws(x, rng):
    return x, rng.uniform(0.0, 1.0), rng.normal(0.0, 1.0), rng.integers(-5, 5), rng.bernoulli(0.5)


def test_random_map_depends_only_on_seed_element_and_epoch():
    def make(threads=0, fusion=True):
        o = nd.Options()
        o.threading.private_threadpool_size = threads
        o.fusion = fusion
        return nd.Dataset.range(50).map(lambda x: x * 2).random_map(draws, seed=7).with_options(o)

    first = values(make())
    assert values(make(threads=1)) == first == values(make(threads=2)) == values(make(fusion=False))
    ds = make()
    assert values(ds) == first
    assert values(ds) != first                           # the next epoch draws anew
    assert values(nd.Dataset.range(50).map(lambda x: x * 2).random_map(draws, seed=8)) != first
    u = [v[1] for v in first]
    assert all(0.0 <= x < 1.0 for x in u) and len(set(u)) == 50
    assert all(-5 <= v[3] < 5 for v in first)


def test_random_map_values_do_not_depend_on_what_came_before_an_element():
    a = values(nd.Dataset.range(20).random_map(draws, seed=3))
    b = values(nd.Dataset.range(20).take(10).random_map(draws, seed=3))
    assert a[:10] == b


def test_random_map_generator_works_inside_numba_functions():
    @numba.njit
    def jitter(x, rng):
        return x + rng.uniform(-0.5, 0.5)

    python = values(nd.Dataset.from_tensor_slices(np.arange(10.0)).random_map(
        lambda x, rng: x + rng.uniform(-0.5, 0.5), seed=1))
    compiled = values(nd.Dataset.from_tensor_slices(np.arange(10.0)).random_map(jitter, seed=1))
    assert python == compiled


def test_random_map_repeats_draw_anew_each_epoch():
    ds = nd.Dataset.range(5).random_map(lambda x, rng: rng.integers(0, 1 << 30), seed=2).repeat(2)
    out = [int(v) for v in ds]
    assert out[:5] != out[5:]
    assert [int(v) for v in nd.Dataset.range(5).random_map(
        lambda x, rng: rng.integers(0, 1 << 30), seed=2).repeat(2)] == out


def test_set_seed_makes_unseeded_ops_repeatable():
    def build():
        return nd.Dataset.range(40).shuffle(40).random_map(lambda x, rng: x + rng.integers(0, 3))

    nd.random.set_seed(11)
    a = [int(x) for x in build()]
    nd.random.set_seed(11)
    b = [int(x) for x in build()]
    nd.random.set_seed(12)
    c = [int(x) for x in build()]
    assert a == b != c


def test_without_a_global_seed_a_pipeline_seed_is_drawn_shown_and_saved():
    ds = nd.Dataset.range(30).shuffle(30)
    pipe = ds.compile()
    text = pipe.explain()
    assert "pipeline seed" in text and str(pipe.state.seed) in text
    it = iter(ds)
    head = [int(next(it)) for _ in range(10)]
    state = it.save()
    rest = [int(x) for x in it]
    again = iter(nd.Dataset.range(30).shuffle(30))     # another pipeline seed ...
    again.restore(state)                                # ... until the saved one is restored
    assert [int(x) for x in again] == rest
    assert sorted(head + rest) == list(range(30))


def test_shuffle_order_is_the_same_on_every_executor_and_thread_count():
    def make(**kw):
        o = nd.Options()
        for k, v in kw.items():
            setattr(o, k, v)
        return nd.Dataset.from_tensor_slices((np.arange(5000), np.arange(5000.0))).shuffle(
            300, seed=4).map(lambda a, b: (a, b * 2)).batch(64).with_options(o)

    reference = [b[0].tolist() for b in make(fusion=False)]
    assert [b[0].tolist() for b in make(fusion_min_rows=0)] == reference
    assert [b[0].tolist() for b in make(fusion_min_rows=0, chunk_rows=7)] == reference
    o = nd.Options()
    o.optimization.shuffle_indices = False
    assert [b[0].tolist() for b in make().with_options(o)] == reference


def test_reshuffle_each_iteration_false_keeps_one_order():
    ds = nd.Dataset.range(20).shuffle(20, seed=1, reshuffle_each_iteration=False)
    a, b = [int(x) for x in ds], [int(x) for x in ds]
    assert a == b and a != list(range(20))
    r = [int(x) for x in ds.repeat(2)]
    assert r[:20] == r[20:] == a
    ds2 = nd.Dataset.range(20).shuffle(20, seed=1)
    c, d = [int(x) for x in ds2], [int(x) for x in ds2]
    assert c != d and sorted(c) == sorted(d) == list(range(20))


def test_global_shuffle_is_a_permutation_per_epoch():
    ds = nd.experimental.global_shuffle(nd.Dataset.range(1000), seed=5)
    a, b = [int(x) for x in ds], [int(x) for x in ds]
    assert sorted(a) == sorted(b) == list(range(1000))
    assert a != b and a != list(range(1000))
    fixed = nd.experimental.global_shuffle(nd.Dataset.range(100), seed=5,
                                           reshuffle_each_iteration=False)
    assert [int(x) for x in fixed] == [int(x) for x in fixed]


def test_global_shuffle_of_maps_and_batches():
    x = np.arange(40.0)
    ds = nd.experimental.global_shuffle(
        nd.Dataset.from_tensor_slices(x).map(lambda v: v * 10).batch(8, drop_remainder=True),
        seed=1)
    batches = [b.tolist() for b in ds]
    assert len(batches) == 5 and sorted(v for b in batches for v in b) == (x * 10).tolist()
    assert all(b == [v for v in range(int(b[0]), int(b[0]) + 80, 10)] for b in batches)
    fused = nd.experimental.global_shuffle(nd.Dataset.from_tensor_slices(np.arange(9000.0)),
                                           seed=2).map(lambda v: v + 1).batch(100)
    o = nd.Options()
    o.fusion_min_rows = 0
    pipe = fused.with_options(o).compile()
    got = np.concatenate(list(pipe))
    assert sorted(got.tolist()) == list(np.arange(1.0, 9001.0))
    assert "at the row numbers of global_shuffle" in pipe.explain()


def test_global_shuffle_refuses_datasets_without_random_access():
    for ds, what in ((nd.Dataset.range(10).filter(lambda v: v > 2), "filter"),
                     (nd.Dataset.range(10).shuffle(3), "shuffle"),
                     (nd.Dataset.range(10).repeat(), "repeat"),
                     (nd.Dataset.range(10).map(lambda v: v).take(nd.placeholder(np.int64, [])),
                      "placeholder")):
        with pytest.raises(nd.errors.FailedPreconditionError, match=what):
            nd.experimental.global_shuffle(ds)
