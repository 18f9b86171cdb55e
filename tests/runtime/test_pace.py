"""A later iteration of a compiled pipeline starts at the demand its last one reached
(``nbdata.compiler.executor.Pace``), where reading ahead has no effect a consumer could
see; elsewhere every iteration still starts at one element.

The first iteration asks for one element and grows its pulls; a short in-memory epoch
paid for that ramp (two small kernel calls and three more pulls) again every epoch.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdata as nd


def _options() -> nd.Options:
    options = nd.Options()
    options.fusion_min_rows = 0
    return options


def _fused():
    x = np.arange(60_000 * 4, dtype=np.float32).reshape(60_000, 4)
    ds = nd.Dataset.from_tensor_slices(x).map(lambda r: r * np.float32(2) - np.float32(1))
    return ds.filter(lambda r: r[0] % np.float32(3) != np.float32(0)).batch(128) \
        .with_options(_options()).compile()


def _first_demand(pipe) -> int:
    run = pipe.open()
    try:
        return run.want
    finally:
        run.close()


def test_a_fused_pipeline_starts_its_second_iteration_at_a_whole_pull():
    pipe = _fused()
    assert "per element" not in pipe.explain()
    assert _first_demand(pipe) == 1
    first = [b.copy() for b in pipe]
    assert _first_demand(pipe) > 1
    second = list(pipe)
    assert len(first) == len(second)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_a_second_iteration_saves_and_restores_as_the_first():
    pipe = _fused()
    whole = [b.copy() for b in pipe]
    it = iter(pipe)           # starts at a whole pull
    head = [next(it).copy() for _ in range(7)]
    state = it.save()
    other = iter(pipe)
    other.restore(state)
    rest = list(other)
    got = head + rest
    assert len(got) == len(whole)
    for a, b in zip(got, whole):
        np.testing.assert_array_equal(a, b)


def test_a_fixed_shuffle_gives_the_same_order_at_any_first_demand():
    ds = nd.Dataset.from_tensor_slices(np.arange(50_000, dtype=np.int64)) \
        .shuffle(1000, seed=3, reshuffle_each_iteration=False).map(lambda x: x * 2).batch(64)
    pipe = ds.with_options(_options()).compile()
    first = np.concatenate(list(pipe))
    assert _first_demand(pipe) > 1
    np.testing.assert_array_equal(np.concatenate(list(pipe)), first)
    np.testing.assert_array_equal(np.sort(first), np.arange(0, 100_000, 2))


class Counted:
    """A Python function that counts its calls (``int()`` keeps it out of the kernel)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return np.int64(int(x) + 1)


def test_a_python_map_still_starts_each_iteration_at_one_element():
    f = Counted()
    pipe = nd.Dataset.range(5_000).map(f, output_signature=nd.TensorSpec((), np.int64)) \
        .batch(4).compile()
    assert "per element" in pipe.explain()
    assert [int(v) for v in np.concatenate(list(pipe))] == list(range(1, 5_001))
    for _ in range(2):
        f.calls = 0
        it = iter(pipe)
        assert next(it).tolist() == [1, 2, 3, 4]
        assert f.calls == 4     # a side effect per element, only those asked for
        del it


def test_a_cache_written_to_a_file_still_starts_at_one_element(tmp_path):
    ds = nd.Dataset.from_tensor_slices(np.arange(20_000, dtype=np.int64)).map(lambda x: x + 1)
    pipe = ds.cache(str(tmp_path / "c")).batch(16).with_options(_options()).compile()
    list(pipe)
    assert _first_demand(pipe) == 1


def test_the_first_demand_is_bounded_by_the_chunk_limit():
    from nbdata.compiler.executor import PULL_TARGET_S, Pace
    pace = Pace()
    assert pace.first_demand(512) == 1
    pace.seconds_per_element = PULL_TARGET_S / 40
    assert pace.first_demand(512) == 40
    pace.seconds_per_element = 1e-12
    assert pace.first_demand(512) == 512
    pace.seconds_per_element = 1.0
    assert pace.first_demand(512) == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_values_match_the_plain_path_on_every_iteration(threads):
    options = _options()
    options.threading.private_threadpool_size = threads
    x = np.random.default_rng(0).integers(0, 1000, (30_000, 3))
    fused = nd.Dataset.from_tensor_slices(x).filter(lambda r: r[1] % 4 != 0).batch(100) \
        .with_options(options).compile()
    plain_options = _options()
    plain_options.fusion = False
    plain = nd.Dataset.from_tensor_slices(x).filter(lambda r: r[1] % 4 != 0).batch(100) \
        .with_options(plain_options).compile()
    expected = np.concatenate(list(plain))
    for _ in range(3):
        np.testing.assert_array_equal(np.concatenate(list(fused)), expected)


def test_epochs_are_the_same_whatever_each_one_first_asks_for(monkeypatch):
    """A reshuffling shuffle and a filter over three epochs: the same batches whether
    later iterations start at a whole pull (Pace) or at one element."""
    def epochs(first_demand):
        with monkeypatch.context() as m:
            if first_demand is not None:
                m.setattr(Pace, "first_demand", lambda self, limit: first_demand)
            ds = nd.Dataset.from_tensor_slices(np.arange(40_000, dtype=np.int64)) \
                .shuffle(3000, seed=9).map(lambda x: x * 3).filter(lambda x: x % 7 != 2) \
                .batch(96).with_options(_options())
            pipe = ds.compile()
            return [np.concatenate(list(pipe)) for _ in range(3)]

    from nbdata.compiler.executor import Pace
    paced, plain = epochs(None), epochs(1)
    assert not np.array_equal(paced[0], paced[1])   # a new order each epoch
    for a, b in zip(paced, plain):
        np.testing.assert_array_equal(a, b)
