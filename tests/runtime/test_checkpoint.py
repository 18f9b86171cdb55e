"""Iterator save/restore for every source and transformation: saved before the first
element, mid-epoch and at the end, restored in this process and in a fresh one, the
rest of the run equals an uninterrupted one."""

import collections
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nbdata as nd

HERE = os.path.dirname(os.path.abspath(__file__))


def _py(x):
    return int(x) * 3 + 1


Pair = collections.namedtuple("Pair", ["a", "b"])


def _gen():
    for i in range(23):
        yield i, np.full(i % 4, i, np.int64)


def _options(**kw):
    o = nd.Options()
    for k, v in kw.items():
        setattr(o, k, v)
    return o


# name -> factory; every factory builds the same pipeline each time it is called
PIPELINES = {
    "range": lambda: nd.Dataset.range(3, 40, 3),
    "from_tensor_slices": lambda: nd.Dataset.from_tensor_slices(
        (np.arange(30).reshape(15, 2), np.array([str(i) for i in range(15)]))),
    "from_tensor_slices_dict": lambda: nd.Dataset.from_tensor_slices(
        {"x": np.arange(20.0), "y": np.arange(20) % 3}),
    "from_tensors": lambda: nd.Dataset.from_tensors((np.arange(3), b"abc")),
    "from_generator": lambda: nd.Dataset.from_generator(
        _gen, output_signature=(nd.TensorSpec((), np.int64), nd.TensorSpec((None,), np.int64))),
    "zip": lambda: nd.Dataset.zip((nd.Dataset.range(17), nd.Dataset.range(100, 130).filter(
        lambda v: v % 2 == 0))),
    "concatenate": lambda: nd.Dataset.range(7).concatenate(nd.Dataset.range(50, 60)),
    "map_lifted": lambda: nd.Dataset.range(5000).map(lambda v: v * 2 + 1).with_options(
        _options(fusion_min_rows=0, chunk_rows=333)),
    "map_compiled": lambda: nd.Dataset.from_tensor_slices(np.arange(60).reshape(20, 3)).map(
        lambda v: v[::-1].copy()).with_options(_options(fusion_min_rows=0)),
    "map_python": lambda: nd.Dataset.range(25).map(_py),
    "map_parallel": lambda: nd.Dataset.range(40).map(_py, num_parallel_calls=3),
    "map_autotune": lambda: nd.Dataset.range(40).map(_py, num_parallel_calls=nd.AUTOTUNE),
    "filter_fused": lambda: nd.Dataset.range(3000).filter(lambda v: v % 7 == 2).with_options(
        _options(fusion_min_rows=0, chunk_rows=100)),
    "filter_python": lambda: nd.Dataset.range(40).filter(lambda v: str(int(v)).endswith("3")),
    "flat_map": lambda: nd.Dataset.range(6).flat_map(lambda n: nd.Dataset.range(n * 10, n * 10 + n)),
    "interleave": lambda: nd.Dataset.range(1, 6).interleave(
        lambda n: nd.Dataset.from_tensors(n).repeat(n), cycle_length=2, block_length=2),
    "interleave_parallel": lambda: nd.Dataset.range(1, 7).interleave(
        lambda n: nd.Dataset.range(n * 100, n * 100 + n), cycle_length=3, num_parallel_calls=3),
    "batch": lambda: nd.Dataset.range(23).batch(5),
    "batch_drop": lambda: nd.Dataset.range(23).map(lambda v: (v, np.full(2, v))).batch(
        4, drop_remainder=True),
    "fused_batch": lambda: nd.Dataset.from_tensor_slices(np.arange(9000.0)).map(
        lambda v: v * 0.5).filter(lambda v: v % 3 < 2).batch(64).with_options(
        _options(fusion_min_rows=0, chunk_rows=500)),
    "padded_batch": lambda: nd.Dataset.range(11).map(lambda n: np.arange(n % 4)).padded_batch(3),
    "unbatch": lambda: nd.Dataset.range(20).batch(6).unbatch(),
    "shuffle_rows": lambda: nd.Dataset.range(50).shuffle(8, seed=4),
    "shuffle_stream": lambda: nd.Dataset.range(50).map(_py).shuffle(8, seed=5),
    "shuffle_strings": lambda: nd.Dataset.from_tensor_slices(
        np.array([str(i) for i in range(30)])).filter(lambda s: s != b"3").shuffle(6, seed=1),
    "shuffle_fused": lambda: nd.Dataset.from_tensor_slices(
        (np.arange(6000.0), np.arange(6000))).shuffle(100, seed=2).map(
        lambda x, y: (x * 2, y)).batch(100).with_options(_options(fusion_min_rows=0)),
    "shuffle_reshuffled_repeat": lambda: nd.Dataset.range(10).shuffle(10, seed=3).repeat(3),
    "repeat": lambda: nd.Dataset.range(4).repeat(3),
    "take": lambda: nd.Dataset.range(100).take(17),
    "skip": lambda: nd.Dataset.range(30).skip(11),
    "shard": lambda: nd.Dataset.range(50).shard(4, 1),
    "window": lambda: nd.Dataset.range(12).window(4, shift=3).flat_map(lambda w: w.batch(4)),
    "enumerate": lambda: nd.Dataset.range(10, 30).enumerate(5),
    "prefetch": lambda: nd.Dataset.range(60).map(_py).prefetch(4),
    "prefetch_autotune": lambda: nd.Dataset.range(60).batch(7).prefetch(nd.AUTOTUNE),
    "cache_memory": lambda: nd.Dataset.range(20).map(_py).cache(),
    "random_map": lambda: nd.Dataset.range(25).random_map(
        lambda v, rng: (v, rng.uniform(0.0, 1.0), rng.integers(0, 10)), seed=9),
    "global_shuffle": lambda: nd.experimental.global_shuffle(nd.Dataset.range(37), seed=2),
    "global_shuffle_fused": lambda: nd.experimental.global_shuffle(
        nd.Dataset.from_tensor_slices(np.arange(5000.0)), seed=2).map(lambda v: v + 1).batch(
        50).with_options(_options(fusion_min_rows=0)),
    "namedtuple": lambda: nd.Dataset.from_tensor_slices(Pair(np.arange(9), np.arange(9) * 2)).batch(2),
    "list_files": lambda: nd.Dataset.list_files(os.path.join(HERE, "*.py"), seed=1),
    # issue 35's ops
    "from_list": lambda: nd.Dataset.from_list([(i, str(i)) for i in range(9)]),
    "counter": lambda: nd.Dataset.counter(5, 3).take(12),
    "random": lambda: nd.Dataset.random(seed=3).take(10),
    "take_while": lambda: nd.Dataset.range(30).take_while(lambda v: v < 17),
    "scan": lambda: nd.Dataset.range(15).scan(np.int64(0), lambda s, v: (s + v, s * 2)),
    "unique": lambda: nd.Dataset.range(40).map(lambda v: v % 7).unique(),
    "group_by_window": lambda: nd.Dataset.range(25).group_by_window(
        lambda v: v % 3, lambda k, w: w.batch(4), window_size=4),
    "group_by_reducer": lambda: nd.Dataset.range(20).group_by_reducer(
        lambda v: v % 3, nd.experimental.Reducer(lambda k: np.int64(0), lambda s, v: s + v,
                                                 lambda s: s)),
    "bucket_by_sequence_length": lambda: nd.Dataset.range(1, 14).map(
        lambda n: np.arange(n % 5 + 1)).bucket_by_sequence_length(
        lambda x: np.int64(len(x)), [2, 4], [2, 2, 3]),
    "rebatch_sizes": lambda: nd.Dataset.range(20).batch(6).rebatch([3, 2]),
    "sample_from_datasets": lambda: nd.Dataset.sample_from_datasets(
        [nd.Dataset.range(10), nd.Dataset.range(100, 120), nd.Dataset.range(200, 205)],
        [0.2, 0.5, 0.3], seed=7),
    "choose_from_datasets": lambda: nd.Dataset.choose_from_datasets(
        [nd.Dataset.range(10), nd.Dataset.range(100, 110)],
        nd.Dataset.range(14).map(lambda v: v % 3 % 2)),
    "rejection_resample": lambda: nd.Dataset.range(30).rejection_resample(
        lambda v: v % 2, [0.5, 0.5], initial_dist=[0.8, 0.2], seed=3),
    "sparse_batch": lambda: nd.Dataset.range(9).map(lambda n: np.arange(n % 3)).sparse_batch(
        2, [4]).map(lambda st: (st.indices, st.values, st.dense_shape)),
    "shuffle_and_repeat": lambda: nd.Dataset.range(8).apply(
        nd.experimental.shuffle_and_repeat(4, count=2, seed=1)),
}


def plain(e):
    """A comparable form of an element."""
    if isinstance(e, dict):
        return {k: plain(v) for k, v in sorted(e.items())}
    if isinstance(e, tuple):
        return [plain(v) for v in e]
    if isinstance(e, bytes):
        return e.decode("latin-1")
    a = np.asarray(e)
    if a.dtype == object:
        return [plain(v) for v in a.reshape(-1)] + [list(a.shape)]
    return [str(a.dtype), list(a.shape), a.tolist()]


def elements(it) -> list:
    return [plain(e) for e in it]


def positions(n: int) -> list:
    return sorted({0, 1, n // 2, max(0, n - 1), n})


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_save_restore_everywhere_in_this_process(name):
    make = PIPELINES[name]
    full = elements(make())
    assert full, name
    for k in positions(len(full)):
        it = iter(make())
        head = [plain(next(it)) for _ in range(k)]
        state = it.save()
        rest = elements(it)                 # the saved iterator goes on unharmed
        assert head + rest == full, (name, k)
        again = iter(make())
        again.restore(state)
        assert elements(again) == full[k:], (name, k)


@pytest.mark.parametrize("name", ["shuffle_rows", "fused_batch", "random_map", "prefetch"])
def test_restore_into_an_iterator_that_already_ran(name):
    make = PIPELINES[name]
    ds = make()
    full = elements(ds)                     # this dataset's second epoch would differ
    it = iter(make())
    for _ in range(3):
        next(it)
    state = it.save()
    other = iter(ds)
    for _ in range(5):
        next(other)
    other.restore(state)
    assert elements(other) == full[3:]


def test_restore_in_a_fresh_process(tmp_path):
    expected = {}
    for name, make in PIPELINES.items():
        full = elements(make())
        k = len(full) // 2
        it = iter(make())
        for _ in range(k):
            next(it)
        (tmp_path / f"{name}.state").write_bytes(it.save())
        expected[name] = full[k:]
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {HERE!r})
        import test_checkpoint as t
        out = {{}}
        for name, make in t.PIPELINES.items():
            it = iter(make())
            it.restore(open({str(tmp_path)!r} + "/" + name + ".state", "rb").read())
            out[name] = t.elements(it)
        print(json.dumps(out))
    """)
    # The child shares this process's kernel cache: it loads the kernels compiled above
    # instead of compiling them again; the iterators' states are all it gets from here.
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600, cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    for name in PIPELINES:
        assert got[name] == json.loads(json.dumps(expected[name])), name


def test_file_cache_state(tmp_path):
    path = str(tmp_path / "c")

    def make():
        return nd.Dataset.range(30).map(_py).cache(path)

    full = elements(make())                   # writes the cache
    for k in (0, 7, 30):
        it = iter(make())                     # reads it
        for _ in range(k):
            next(it)
        again = iter(make())
        again.restore(it.save())
        assert elements(again) == full[k:]
    os.unlink(path + ".nbcache")
    it = iter(make())                         # a writer, saved mid-write
    for _ in range(11):
        next(it)
    state = it.save()
    del it
    again = iter(make())
    again.restore(state)
    assert elements(again) == full[11:]
    assert os.path.exists(path + ".nbcache")  # the restored writer completed the cache
    assert elements(make()) == full


def test_state_of_another_pipeline_is_refused():
    it = iter(nd.Dataset.range(10).map(lambda x: x + 1))
    next(it)
    other = iter(nd.Dataset.range(10).map(lambda x: x * 5))
    with pytest.raises(nd.errors.InvalidArgumentError, match="different pipeline"):
        other.restore(it.save())
    with pytest.raises(nd.errors.DataLossError):
        other.restore(b"not a state")


def test_checkpoint_and_saver_write_atomically(tmp_path):
    a = iter(nd.Dataset.range(10))
    b = iter(nd.Dataset.range(100, 110).shuffle(5, seed=1))
    next(a), next(b), next(b)
    ckpt = nd.Checkpoint(a=a, b=b)
    path = ckpt.write(str(tmp_path / "ckpt"))
    assert os.listdir(tmp_path) == ["ckpt"]           # no temporary file left behind
    rest_a, rest_b = elements(a), elements(b)
    a2 = iter(nd.Dataset.range(10))
    b2 = iter(nd.Dataset.range(100, 110).shuffle(5, seed=1))
    nd.Checkpoint(a=a2, b=b2).read(path)
    assert elements(a2) == rest_a and elements(b2) == rest_b
    c = iter(nd.Dataset.range(5))
    saver = nd.train.Saver([nd.make_saveable_from_iterator(c)])
    next(c)
    saved = saver.save(None, str(tmp_path / "model"), global_step=3)
    assert saved.endswith("model-3")
    list(c)
    saver.restore(None, saved)
    assert [int(x) for x in c] == [1, 2, 3, 4]
    with pytest.raises(nd.errors.NotFoundError):
        saver.restore(None, str(tmp_path / "missing"))


def test_state_is_small_for_shuffles_over_arrays():
    x = np.zeros((200_000, 16), np.float32)
    it = iter(nd.Dataset.from_tensor_slices((x, np.arange(200_000))).shuffle(1000, seed=1).batch(64))
    for _ in range(10):
        next(it)
    # the buffer holds row numbers: 1000 int64, not 1000 rows of 72 bytes
    assert len(it.save()) < 20_000


def test_state_after_an_interrupt_resumes_where_it_stopped():
    """Ctrl-C inside a chunk's computation closes the run's input, but neither the
    iterator nor its saved state counts as ended: both go on with the next element."""
    armed = {"raise": True}

    def interrupt_once(x):
        if armed["raise"] and int(x) == 5:
            armed["raise"] = False
            raise KeyboardInterrupt
        return x

    ds = nd.Dataset.range(10).map(interrupt_once)
    it = iter(ds)
    got = []
    with pytest.raises(KeyboardInterrupt):
        for x in it:
            got.append(int(x))
    state = it.save()
    again = iter(ds)
    again.restore(state)
    rest = [int(x) for x in again]
    assert got + rest == list(range(10))
    assert [int(x) for x in it] == rest
