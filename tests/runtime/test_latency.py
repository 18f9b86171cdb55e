"""Latency to the first element and interrupts (issue 19).

A ``prefetch`` asks its input for what its consumer asks for (one element first) and
grows its pulls from there, so a slow Python function under ``prefetch`` delivers the
first element after as many calls as without the prefetch, not a chunk's worth; and
Ctrl-C while a consumer waits on a prefetch surfaces at once, with the background
thread calling no more user code.
"""

from __future__ import annotations

import itertools
import signal
import threading
import time

import numpy as np
import pytest

import nbdata as nd

SLOW = 0.002   # seconds per call of the slow function


class Counted:
    """A slow Python function that counts its calls (it converts its input to a
    Python int, so it runs in Python: it cannot be recorded)."""

    def __init__(self, seconds: float = SLOW):
        self.calls = 0
        self.seconds = seconds

    def __call__(self, x):
        self.calls += 1
        time.sleep(self.seconds)
        return np.int64(int(x))


def _spec():
    return nd.TensorSpec((), np.int64)


def _pipelines(f):
    """Pipelines whose every element needs calls of ``f`` (name, dataset)."""
    src = nd.Dataset.range(10**6)
    mapped = src.map(f, output_signature=_spec())
    return {
        "map": mapped,
        "map_batch": mapped.batch(8),
        "parallel_map_batch": src.map(f, num_parallel_calls=2, output_signature=_spec()).batch(8),
        "filter": src.filter(lambda x: bool(f(x) % 2 == 0)),
        "shuffle": mapped.shuffle(16, seed=1),
        "padded_batch": mapped.padded_batch(4),
        "take_skip": mapped.skip(3).take(100),
        "enumerate": mapped.enumerate(),
        "zip": nd.Dataset.zip((mapped, src)),
        "unbatch": mapped.batch(4).unbatch(),
        "flat_map": nd.Dataset.range(1000).flat_map(
            lambda i: nd.Dataset.range(10).map(f, output_signature=_spec())),
        "interleave": nd.Dataset.range(1000).interleave(
            lambda i: nd.Dataset.range(10).map(f, output_signature=_spec()), cycle_length=2),
        "parallel_interleave_batch": nd.Dataset.range(1000).interleave(
            lambda i: nd.Dataset.range(10).map(f, output_signature=_spec()), cycle_length=2,
            num_parallel_calls=2).batch(4),
        "generator": nd.Dataset.from_generator(lambda: (f(i) for i in range(10**6)),
                                               output_signature=_spec()).batch(2),
    }


def _first(ds) -> float:
    started = time.perf_counter()
    it = iter(ds)
    next(it)
    took = time.perf_counter() - started
    del it
    return took


@pytest.mark.parametrize("name", sorted(_pipelines(Counted())))
def test_prefetch_delivers_the_first_element_as_fast_as_without(name):
    plain_f, prefetched_f = Counted(), Counted()
    plain = _first(_pipelines(plain_f)[name])
    prefetched = _first(_pipelines(prefetched_f)[name].prefetch(nd.AUTOTUNE))
    # The prefetch's thread runs ahead once the first element is out, so only the
    # time counts (with room for a thread start), not the calls made meanwhile.
    assert prefetched <= 2 * plain + 0.05, (name, plain, prefetched)
    assert plain_f.calls < 100, (name, plain_f.calls)


def test_prefetch_first_batch_after_a_few_calls_of_a_slow_function():
    """The case from the issue: a 0.2 ms Python function, batch(8), prefetch(AUTOTUNE).
    It made 524,293 calls (a whole chunk) before its first batch."""
    f = Counted(0.0002)
    ds = nd.Dataset.range(10**6).map(f, output_signature=_spec()).batch(8).prefetch(nd.AUTOTUNE)
    it = iter(ds)
    assert next(it).tolist() == list(range(8))
    calls = f.calls
    del it
    assert calls < 200


def test_prefetch_over_a_fused_pipeline_keeps_its_values():
    ds = nd.Dataset.range(300_000).map(lambda x: x * 3).filter(lambda x: x % 2 == 0).batch(1000)
    expected = [b.tolist() for b in ds]
    assert [b.tolist() for b in ds.prefetch(nd.AUTOTUNE)] == expected
    assert [b.tolist() for b in ds.prefetch(1)] == expected


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raising KeyboardInterrupt in this process, as in an interactive one: a
    process started with SIGINT ignored (a command run in the background by a
    non-interactive shell, as a CI script may be) never gets Python's handler."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _interrupt_main_after(seconds: float) -> dict:
    fired = {}
    main = threading.main_thread().ident

    def fire():
        fired["at"] = time.perf_counter()
        signal.pthread_kill(main, signal.SIGINT)

    threading.Timer(seconds, fire).start()
    return fired


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
def test_ctrl_c_on_a_prefetch_surfaces_at_once_and_stops_the_producer(ctrl_c_raises):
    f = Counted(0.005)
    # 6,000 calls of 5 ms: 30 s at most if the interrupt were lost (the test then fails
    # in bounded time instead of running 10**5 calls)
    ds = nd.Dataset.range(6_000).map(f, output_signature=_spec()).batch(64).prefetch(nd.AUTOTUNE)
    it = iter(ds)
    first = next(it)
    fired = _interrupt_main_after(0.1)
    with pytest.raises(KeyboardInterrupt):
        for _ in it:
            pass
    surfaced = time.perf_counter() - fired["at"]
    # at once: well before the producer's next batch of 64 calls (0.3 s) could end it,
    # with room for a machine whose cores are busy with other work
    assert surfaced < 0.25, surfaced
    time.sleep(0.05)
    calls = f.calls
    time.sleep(0.3)
    assert f.calls == calls, "the background thread still calls the user's function"
    # Nothing is lost: the iterator, and the state it saves now, go on after the last
    # batch handed out.
    state = it.save()
    nxt = next(it)
    assert nxt[0] == first[-1] + 1 + 64 * (int(nxt[0]) // 64 - 1) or nxt[0] % 64 == 0
    again = iter(ds)
    again.restore(state)
    assert next(again).tolist() == nxt.tolist()
    del it
    del again


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
def test_interrupted_iteration_resumes_without_loss(ctrl_c_raises):
    f = Counted(0.003)
    ds = nd.Dataset.range(400).map(f, output_signature=_spec()).batch(10).prefetch(2)
    it = iter(ds)
    got = [next(it).tolist()]
    _interrupt_main_after(0.05)
    with pytest.raises(KeyboardInterrupt):
        for b in it:
            got.append(b.tolist())
    got += [b.tolist() for b in itertools.islice(it, 100)]
    assert [x for b in got for x in b] == list(range(400))
