"""sample_from_datasets / choose_from_datasets: tf.data's directed-interleave rules,
counter-based picks (same mixture at any thread count and after a restore), per-source
positions."""

import numpy as np
import pytest

import nbdata as nd


def test_choose_from_datasets_order_and_stop():
    a, b = nd.Dataset.range(10, 13), nd.Dataset.range(20, 22)
    choice = nd.Dataset.from_list([0, 1, 1, 0, 1, 0])
    assert [int(x) for x in nd.Dataset.choose_from_datasets([a, b], choice)] == [10, 20, 21, 11]
    got = nd.experimental.choose_from_datasets([a, b], choice, stop_on_empty_dataset=False)
    assert [int(x) for x in got] == [10, 20, 21, 11, 12]


def test_choose_from_datasets_errors():
    a = nd.Dataset.range(3)
    with pytest.raises(TypeError):
        nd.Dataset.choose_from_datasets([a], nd.Dataset.from_list([0.5]))
    with pytest.raises(TypeError):
        nd.Dataset.choose_from_datasets([a, nd.Dataset.from_list(["x"])], nd.Dataset.range(1))
    with pytest.raises(nd.errors.InvalidArgumentError, match="Selector index out of range"):
        list(nd.Dataset.choose_from_datasets([a], nd.Dataset.from_list([0, 2])))
    with pytest.raises(ValueError):
        nd.Dataset.choose_from_datasets([], nd.Dataset.range(1))


def test_sample_from_datasets_each_row_once_and_weights():
    sources = [nd.Dataset.range(0, 300), nd.Dataset.range(1000, 1300)]
    ds = nd.Dataset.sample_from_datasets(sources, [0.25, 0.75], seed=5)
    out = [int(x) for x in ds]
    assert sorted(out) == list(range(300)) + list(range(1000, 1300))
    head = out[:200]
    share = sum(v >= 1000 for v in head) / len(head)
    assert 0.6 < share < 0.9
    # each source's rows keep their order
    assert [v for v in out if v < 1000] == list(range(300))


def test_sample_is_deterministic_and_thread_independent():
    def make(threads):
        o = nd.Options()
        o.threading.private_threadpool_size = threads
        return nd.Dataset.sample_from_datasets(
            [nd.Dataset.range(50), nd.Dataset.range(100, 150)], seed=11).with_options(o)
    assert [int(x) for x in make(1)] == [int(x) for x in make(2)]


def test_sample_stop_on_empty_dataset():
    ds = nd.Dataset.sample_from_datasets(
        [nd.Dataset.range(3), nd.Dataset.range(100, 200)], [0.5, 0.5], seed=1,
        stop_on_empty_dataset=True)
    out = [int(x) for x in ds]
    assert sum(v < 100 for v in out) == 3 and len(out) < 103


def test_sample_infinite_sources_and_cardinality():
    ds = nd.Dataset.sample_from_datasets([nd.Dataset.range(3).repeat(),
                                          nd.Dataset.range(5).repeat()], seed=1)
    assert ds.cardinality() == nd.INFINITE
    assert len(list(ds.take(50))) == 50


def test_sample_zero_weight_inputs_are_skipped():
    ds = nd.Dataset.sample_from_datasets([nd.Dataset.range(5), nd.Dataset.range(10, 15)],
                                         [0.0, 1.0], seed=2)
    assert [int(x) for x in ds] == [10, 11, 12, 13, 14]


def test_sample_weights_dataset():
    weights = nd.Dataset.from_tensors(np.array([0.0, 1.0])).repeat(7)
    ds = nd.Dataset.sample_from_datasets([nd.Dataset.range(5), nd.Dataset.range(10, 15)],
                                         weights, seed=2)
    assert [int(x) for x in ds] == [10, 11, 12, 13, 14]


def test_sample_bad_weights():
    with pytest.raises(ValueError, match="should have the same length"):
        nd.Dataset.sample_from_datasets([nd.Dataset.range(2)], [0.5, 0.5])
    with pytest.raises(TypeError, match="float32. or .tf.float64"):
        nd.Dataset.sample_from_datasets([nd.Dataset.range(2), nd.Dataset.range(2)], [1, 1])
    with pytest.raises(nd.errors.InvalidArgumentError):
        nd.Dataset.sample_from_datasets([nd.Dataset.range(2), nd.Dataset.range(2)], [-1.0, 2.0])
    with pytest.raises(TypeError, match="must have compatible"):
        nd.Dataset.sample_from_datasets([nd.Dataset.from_tensors(0), nd.Dataset.from_tensors(0.0)])
    with pytest.raises(ValueError, match="should not be empty"):
        nd.Dataset.sample_from_datasets([], [])


def test_sample_all_zero_weights_and_stop_rules():
    zero = nd.Dataset.sample_from_datasets([nd.Dataset.from_tensors(-1).repeat(),
                                            nd.Dataset.from_tensors(1).repeat()], [0.0, 0.0])
    assert list(zero) == []
    sources = [nd.Dataset.from_tensors(np.int64(-1)), nd.Dataset.from_tensors(np.int64(1)).repeat(),
               nd.Dataset.range(10).repeat()]
    skipping = nd.Dataset.sample_from_datasets(sources, [0.5, 0.1, 0.4], seed=3).take(100)
    out = [int(x) for x in skipping]
    assert len(out) == 100 and out.count(-1) == 1
    stopping = nd.Dataset.sample_from_datasets(sources, [0.5, 0.1, 0.4], seed=3,
                                               stop_on_empty_dataset=True)
    assert [int(x) for x in stopping].count(-1) == 1
    empty_first = nd.Dataset.sample_from_datasets(
        [nd.Dataset.range(0), nd.Dataset.range(1).repeat()], [1.0, 0.0],
        stop_on_empty_dataset=True)
    assert list(empty_first) == []


def test_sample_rerandomize_each_iteration():
    def make(r):
        return nd.Dataset.sample_from_datasets([nd.Dataset.range(10), nd.Dataset.range(100, 110)],
                                               [0.5, 0.5], seed=42, stop_on_empty_dataset=True,
                                               rerandomize_each_iteration=r)
    for r in (None, False):
        ds = make(r)
        assert [int(x) for x in ds] == [int(x) for x in ds]
    ds = make(True)
    assert [int(x) for x in ds] != [int(x) for x in ds]
    both = [int(x) for x in make(True).repeat(2)]
    assert both[:len(both) // 2] != both[len(both) // 2:]


def test_sample_nested_datasets():
    ds = nd.Dataset.sample_from_datasets([nd.Dataset.range(10).window(2),
                                          nd.Dataset.range(10, 20).window(2)], [0.3, 0.7], seed=1)
    assert len([int(x) for x in ds.flat_map(lambda w: w)]) == 20


def test_mixture_resumes_per_source_exactly_once_after_weights_change():
    """Each source's position is in the saved state and the weights are not part of the
    plan's identity: restoring into the same sources mixed with other weights goes on
    with the rows not yet consumed of each source (none lost, none repeated)."""
    def make(w):
        return nd.Dataset.sample_from_datasets(
            [nd.Dataset.range(0, 400), nd.Dataset.range(1000, 1400)], w, seed=4)
    rng = np.random.default_rng(0)
    for _ in range(3):
        k = int(rng.integers(0, 800))
        it = iter(make([0.3, 0.7]))
        head = [int(next(it)) for _ in range(k)]
        again = iter(make([float(w) for w in rng.dirichlet([1.0, 1.0])]))
        again.restore(it.save())
        rest = [int(x) for x in again]
        assert sorted(head + rest) == list(range(400)) + list(range(1000, 1400))


def test_snapshot_fingerprint_sees_the_weights():
    a = nd.Dataset.sample_from_datasets([nd.Dataset.range(3), nd.Dataset.range(3)], [0.5, 0.5])
    b = nd.Dataset.sample_from_datasets([nd.Dataset.range(3), nd.Dataset.range(3)], [0.1, 0.9])
    assert a.fingerprint() != b.fingerprint()
