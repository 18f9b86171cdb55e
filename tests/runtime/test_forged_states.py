"""Forged iterator states: valid checksums, hostile fields (issue 31 §3).

A saved state is checksummed, so random corruption is refused as DataLossError
(tests/runtime/test_state_integrity.py). Here the state is decoded, a field is changed
(negative, huge, 10**30, of another type, keys swapped or missing, rows of another
shape) and encoded again with valid checksums: a restore must refuse it with an
``nd.errors`` error naming the op and the field, or resume yielding only values of the
dataset, never hang, never raise a raw Python/NumPy/OS exception.

The semantic fuzz runs ``NBDATA_FUZZ_STATES`` cases (default 600, a few seconds);
``NBDATA_FUZZ_STATES=10000 python -m pytest -q -p no:xdist tests/runtime/test_forged_states.py``
runs the long version. Each case runs on its own thread with a time limit, so a hang is
reported as such instead of hanging the suite.
"""

from __future__ import annotations

import collections
import os
import random
import threading
import time

import numpy as np
import pytest

import nbdata as nd
from nbdata import checkpoint
from nbdata.chunks import Chunk, RowList, StringColumn

FUZZ_STATES = int(os.environ.get("NBDATA_FUZZ_STATES", "600"))
CASE_SECONDS = float(os.environ.get("NBDATA_FUZZ_CASE_SECONDS", "20"))
PULLS = 6

HOSTILE_INTS = [-1, -5, -10, -(10 ** 30), 2 ** 31, 2 ** 40, 2 ** 62, 2 ** 63 - 1, 2 ** 63,
                2 ** 64, 10 ** 30]
WRONG_TYPES = ["x", None, True, 1.5, [], {}, b"", (1, 2), np.arange(3)]


# ----------------------------------------------------------------- pipelines
def _scalars(value, out: list) -> None:
    """Every scalar of an element (arrays flattened, bytes as bytes)."""
    if isinstance(value, dict):
        for v in value.values():
            _scalars(v, out)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _scalars(v, out)
    elif isinstance(value, nd.SparseTensor):
        _scalars(value.values, out)
    elif isinstance(value, np.ndarray):
        if value.dtype == object:
            for v in value.reshape(-1):
                _scalars(v, out)
        else:
            out.extend(value.reshape(-1).tolist())
    elif isinstance(value, np.generic):
        out.append(value.item())
    else:
        out.append(value)


def _files(tmp) -> dict:
    os.makedirs(tmp, exist_ok=True)
    tf = os.path.join(tmp, "a.tfrecord")
    with nd.io.TFRecordWriter(tf) as w:
        for i in range(40):
            w.write(b"record-%03d" % i)
    tf_gz = os.path.join(tmp, "b.tfrecord.gz")
    with nd.io.TFRecordWriter(tf_gz, "GZIP") as w:
        for i in range(40):
            w.write(b"zipped-%03d" % i)
    text = os.path.join(tmp, "lines.txt")
    with open(text, "wb") as f:
        f.write(b"".join(b"line number %d\n" % i for i in range(60)))
    examples = os.path.join(tmp, "examples.tfrecord")
    with nd.io.TFRecordWriter(examples) as w:
        for i in range(30):
            w.write(nd.io.encode_example({"x": np.int64(i + 500)}))
    fixed = os.path.join(tmp, "fixed.bin")
    with open(fixed, "wb") as f:
        f.write(b"HEAD" + b"".join(b"%06d" % i for i in range(50)) + b"FT")
    return {"tf": tf, "tf_gz": tf_gz, "text": text, "fixed": fixed, "examples": examples}


def pipelines(tmp) -> dict:
    """name -> a function making the dataset (fresh for each restore)."""
    r = nd.Dataset.range
    files = _files(tmp)
    fused = nd.Options()
    fused.fusion_min_rows = 0

    def ragged(x):
        return np.arange(int(x) % 5 + 1, dtype=np.int64)

    def fails_on_sevens(x):
        if int(x) % 7 == 3:
            raise ValueError("a row that fails")
        return x

    feats = {"x": nd.io.FixedLenFeature([], np.int64)}
    # Fused stages whose states hold carried source positions (pending_at), masked
    # batches' groups (groups_out, pending_groups) and the rows after an error (leftover).
    small_chunks = nd.Options()
    small_chunks.fusion_min_rows = 0
    small_chunks.chunk_rows = 7
    rows = (np.arange(120 * 3, dtype=np.int64).reshape(120, 3) * 7919) % 1000
    table = np.arange(35, dtype=np.int64)

    return {
        "range": lambda: r(50),
        "from_tensor_slices": lambda: nd.Dataset.from_tensor_slices(
            (np.arange(40), np.arange(40) * 10)),
        "from_tensors_repeat": lambda: nd.Dataset.from_tensors(np.int64(7)).repeat(5),
        "map": lambda: r(40).map(lambda x: x * 3),
        "python_map": lambda: r(40).map(lambda x: np.int64(int(x) + 1000)),
        "filter": lambda: r(60).filter(lambda x: x % 3 == 0),
        "batch": lambda: r(50).batch(7),
        "batch_of_stream": lambda: r(50).filter(lambda x: x % 2 == 0).batch(4),
        "shuffle": lambda: r(50).shuffle(8, seed=1),
        "shuffle_stream": lambda: r(50).filter(lambda x: x % 5 != 0).shuffle(6, seed=2),
        "shuffle_pairs": lambda: nd.Dataset.from_tensor_slices(
            (np.arange(30), np.arange(30) + 100)).filter(lambda a, b: a % 3 != 1).shuffle(5, seed=3),
        "global_shuffle": lambda: nd.experimental.global_shuffle(r(40), seed=5),
        "repeat": lambda: r(10).repeat(3),
        "repeat_forever": lambda: r(7).repeat(),
        "take": lambda: r(50).take(20),
        "take_0": lambda: r(50).take(0),
        "skip": lambda: r(50).skip(10),
        "skip_all": lambda: r(50).skip(-1),
        "concatenate": lambda: r(10).concatenate(r(100, 110)),
        "zip": lambda: nd.Dataset.zip((r(30), r(100, 130).filter(lambda x: x % 2 == 0))),
        "interleave": lambda: r(1, 6).interleave(
            lambda x: r(x * 10, x * 10 + x), cycle_length=3, block_length=2),
        "parallel_interleave": lambda: r(1, 6).interleave(
            lambda x: r(x * 10, x * 10 + 4), cycle_length=2, block_length=3,
            num_parallel_calls=2),
        "flat_map": lambda: r(6).flat_map(lambda x: r(x)),
        "cache": lambda: r(30).cache(),
        "cache_file": lambda: r(30).cache(os.path.join(tmp, "cache")),
        "window": lambda: r(20).window(4, shift=3).flat_map(lambda w: w),
        "enumerate": lambda: r(100, 130).enumerate(),
        "shard": lambda: r(50).shard(3, 1),
        "prefetch": lambda: r(50).map(lambda x: x + 1).prefetch(4),
        "padded_batch": lambda: r(1, 12).map(ragged).padded_batch(3),
        "unbatch": lambda: r(40).batch(6).unbatch(),
        "fused": lambda: r(5000).map(lambda x: x + 1).filter(lambda x: x % 7 != 0).skip(5)
        .take(3000).enumerate().batch(64).with_options(fused),
        "tfrecord": lambda: nd.TFRecordDataset([files["tf"], files["tf"]]),
        "tfrecord_gzip": lambda: nd.TFRecordDataset(files["tf_gz"], compression_type="GZIP"),
        "tfrecord_parallel": lambda: nd.TFRecordDataset([files["tf"], files["tf"]],
                                                        num_parallel_reads=2),
        "textline": lambda: nd.TextLineDataset(files["text"]).batch(5),
        "random_map": lambda: r(30).random_map(lambda x, rng: x + 0 * rng.integers(0, 9),
                                               seed=4),
        "ignore_errors": lambda: r(40).map(fails_on_sevens).ignore_errors(),
        "parse_batches": lambda: nd.TFRecordDataset(files["examples"]).batch(4).map(
            lambda b: nd.io.parse_example(b, feats)),
        "fixed_length": lambda: nd.FixedLengthRecordDataset(files["fixed"], 6, header_bytes=4,
                                                            footer_bytes=2),
        "fused_positions": lambda: nd.Dataset.from_tensor_slices(rows).filter(
            lambda v: v[0] % 3 != 0).batch(5).with_options(small_chunks),
        "masked_batch": lambda: nd.Dataset.from_tensor_slices(rows).shuffle(30, seed=6).batch(
            6).map(lambda b: b[b[:, 0] % 3 != 0]).with_options(small_chunks),
        "fused_leftover": lambda: r(60).shuffle(20, seed=7).map(
            lambda x: table[x % 36]).ignore_errors().with_options(small_chunks),
    }


# Pipelines whose shuffle buffer holds rows (a shuffle over a stream), not row numbers.
DATA_STORES = {"shuffle_stream", "shuffle_pairs"}


# ----------------------------------------------------------------- mutations
def _paths(value, path=()):
    """(path, value) of every place in a state a mutation can hit (not inside the rows
    of a chunk: those are data, which no check can tell from other data)."""
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, (list, tuple)) and not isinstance(value, RowList):
        for k, v in enumerate(value):
            yield from _paths(v, path + (k,))


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _set(doc, path, value):
    """A copy of ``doc`` with ``path`` set (containers along the path copied)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        out = dict(doc)
        out[head] = _set(doc[head], rest, value)
        return out
    out = list(doc)
    out[head] = _set(doc[head], rest, value)
    return tuple(out) if isinstance(doc, tuple) else out


_DELETE = object()


def _mutant(value, rng: random.Random):
    """A hostile replacement of ``value`` (or _DELETE to drop a dict entry)."""
    pick = rng.random()
    if isinstance(value, (bool, np.bool_)):
        return not value if pick < 0.4 else rng.choice(HOSTILE_INTS + WRONG_TYPES)
    if isinstance(value, (int, np.integer)):
        return rng.choice(HOSTILE_INTS) if pick < 0.75 else rng.choice(WRONG_TYPES)
    if isinstance(value, Chunk):
        k = rng.randrange(5)
        if k == 0:
            return Chunk(value.columns, rng.choice([value.n + 1, -1, 10 ** 30, value.n + 1000]))
        if k == 1:
            return Chunk(value.columns[1:], value.n)
        if k == 2 and value.columns:
            return Chunk([rng.choice([5, np.zeros((value.n, 3)), np.zeros(value.n, np.float32),
                                      RowList([1] * (value.n + 2)),
                                      StringColumn(np.zeros(4, np.uint8),
                                                   np.array([0, 9] * (value.n // 2 + 1))[:value.n + 1])])]
                         + value.columns[1:], value.n)
        if k == 3:
            return Chunk(value.columns + value.columns[:1], value.n)
        return rng.choice(WRONG_TYPES)
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu" and value.size:
        k = rng.randrange(4)
        if k == 0:
            out = value.astype(np.int64).copy()
            out.reshape(-1)[rng.randrange(out.size)] = rng.choice([-1, -5, 2 ** 40, 2 ** 62])
            return out
        if k == 1:
            return value.astype(np.float64)
        if k == 2:
            return value.reshape(1, -1)
        return rng.choice(WRONG_TYPES)
    if isinstance(value, dict):
        keys = list(value)
        k = rng.randrange(4)
        if k == 0 and len(keys) >= 2:       # two fields swapped
            a, b = rng.sample(keys, 2)
            out = dict(value)
            out[a], out[b] = value[b], value[a]
            return out
        if k == 1 and keys:                 # a field missing
            out = dict(value)
            del out[rng.choice(keys)]
            return out
        if k == 2 and keys:                 # a field renamed
            out = dict(value)
            out["x" + str(keys[0])] = out.pop(keys[0])
            return out
        return rng.choice(WRONG_TYPES[:-1] + [[value]])
    if isinstance(value, (list, tuple)):
        k = rng.randrange(3)
        if k == 0 and value:
            return type(value)(list(value)[:-1])
        if k == 1:
            return type(value)(list(value) + list(value)[:1] + [None])
        return rng.choice(WRONG_TYPES)
    return rng.choice(HOSTILE_INTS + WRONG_TYPES)


def forge(doc, rng: random.Random, data_store: bool = False):
    """``doc`` with one to three hostile changes in its run state, epochs or seed.
    ``data_store``: a shuffle buffer ("store") holds rows of data, whose values no check
    can tell from other values, so its arrays only change kind or shape there."""
    targets = [("run",), ("seed",)]
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        base = rng.choice(targets) if rng.random() < 0.1 else ("run",)
        places = [p for p, _ in _paths(_get(doc, base), base)]
        path = rng.choice(places[1:] or places)
        value = _get(doc, path)
        for _ in range(10):
            new = _mutant(value, rng)
            if not (data_store and "store" in path and isinstance(value, np.ndarray)
                    and isinstance(new, np.ndarray) and new.shape == value.shape
                    and new.dtype == value.dtype):
                break
        doc = _set(doc, path, new)
    return doc


# ----------------------------------------------------------------- running a case
def _run_case(make, state: bytes, universe: set, result: dict) -> None:
    try:
        it = iter(make())
        it.restore(state)
        got = []
        for _ in range(PULLS):
            try:
                element = next(it)
            except StopIteration:
                break
            _scalars(element, got)
        outside = [v for v in got if v not in universe]
        result["outcome"] = "outside" if outside else "resumed"
        result["detail"] = outside[:5]
    except nd.errors.OpError as e:
        result["outcome"] = f"refused:{type(e).__name__}"
        result["detail"] = e.message
    except BaseException as e:  # noqa: BLE001 - what the test looks for
        result["outcome"] = "raw"
        result["detail"] = f"{type(e).__name__}: {e}"


def run_case(make, state: bytes, universe: set, seconds: float = CASE_SECONDS) -> dict:
    """The outcome of restoring ``state`` and pulling a few elements, on a thread of its
    own: "hang" when it did not finish in ``seconds``."""
    result: dict = {}
    t = threading.Thread(target=_run_case, args=(make, state, universe, result), daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        return {"outcome": "hang", "detail": f"still running after {seconds} s"}
    return result


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """name -> (make, universe, saved states at several points)."""
    tmp = str(tmp_path_factory.mktemp("forged"))
    out = {}
    for name, make in pipelines(tmp).items():
        everything = []
        for element in make().take(400):
            _scalars(element, everything)
        universe = set(everything) | {0}   # padded_batch pads with 0
        states = []
        for k in (0, 1, 2, 5, 9, 17):
            it = iter(make())
            for _ in range(k):
                if next(it, None) is None:
                    break
            states.append(it.save())
        out[name] = (make, universe, states)
    return out


# ----------------------------------------------------------------- the tests
def _forged(state: bytes, path: tuple, value) -> bytes:
    doc = checkpoint.decode(state)
    return checkpoint.encode(_set(doc, ("run", "run") + path, value))


def _refused(make, state: bytes, *match: str) -> str:
    outcome = run_case(make, state, set(), seconds=30)
    assert outcome["outcome"] == "refused:InvalidArgumentError", outcome
    for m in match:
        assert m in outcome["detail"], outcome
    return outcome["detail"]


def _plain(element):
    out = []
    _scalars(element, out)
    return out


def test_every_state_saved_by_the_corpus_restores_as_saved(corpus):
    """The checks refuse no state nbdata saved: each resumes where it was saved."""
    for name, (make, _, _) in corpus.items():
        for k in (0, 1, 2, 5, 9, 17, 40):
            it = iter(make())
            for _ in range(k):
                next(it, None)
            state = it.save()
            expected = [_plain(x) for _, x in zip(range(8), it)]
            again = iter(make())
            again.restore(state)
            assert [_plain(x) for _, x in zip(range(8), again)] == expected, (name, k)


def test_an_enumerate_index_stays_within_its_input(corpus):
    make, _, states = corpus["fused"]
    doc = checkpoint.decode(states[2])
    counters = doc["run"]["run"]["root"]["counters"]
    assert len(counters) == 3   # skip, take, enumerate
    for k, value in ((0, 6), (1, 3001), (2, 3001), (2, -1)):
        forged = counters.copy()
        forged[k] = value
        _refused(make, _forged(states[2], ("root", "counters"), forged), "fused_stage",
                 "'counters[" if value >= 0 else "'counters'")
    make, _, states = corpus["enumerate"]
    _refused(make, _forged(states[3], ("root", "next"), 2 ** 40), "enumerate", "'next'")


def test_the_states_of_the_issue_are_refused_naming_op_and_field(corpus):
    make, _, states = corpus["global_shuffle"]
    detail = _refused(make, _forged(states[2], ("root", "pos"), -5), "global_shuffle", "'pos'")
    assert "-5" in detail
    _refused(make, _forged(states[2], ("root", "pos"), 10 ** 30), "global_shuffle", "'pos'")
    make, _, states = corpus["range"]
    _refused(make, _forged(states[3], ("root", "pos"), -10), "range", "'pos'")
    make, _, states = corpus["cache"]
    doc = checkpoint.decode(states[3])
    assert doc["run"]["run"]["root"]["mode"] == "write"
    _refused(make, _forged(states[3], ("root", "rows"), -10), "cache", "'rows'")
    make, _, states = corpus["interleave"]
    _refused(make, _forged(states[3], ("root", "block_index"), 10 ** 30), "interleave",
             "'block_index'")
    _refused(make, _forged(states[3], ("root", "cycle_index"), -1), "interleave",
             "'cycle_index'")
    make, _, states = corpus["repeat_forever"]
    _refused(make, _forged(states[3], ("skip",), 10 ** 30), "iterator", "'skip'")
    make, _, states = corpus["take"]
    _refused(make, _forged(states[3], ("root", "left"), -5), "take", "'left'")
    make, _, states = corpus["shuffle"]
    order_doc = checkpoint.decode(states[3])
    _refused(make, _forged(states[3], ("root", "draws"), "x"), "shuffle", "'draws'")
    assert order_doc["run"]["run"]["root"]["draws"] > 0


def test_a_memory_cache_read_position_is_checked(corpus):
    make, universe, _ = corpus["cache"]
    ds = make()
    it = iter(ds)
    for _ in range(35):   # the cache is complete: the next iteration reads it
        next(it, None)
    it = iter(ds)
    next(it)
    state = it.save()
    assert checkpoint.decode(state)["run"]["run"]["root"]["mode"] == "read"
    _refused(lambda: ds, _forged(state, ("root", "pos"), -10), "cache", "'pos'")


def test_a_shuffle_buffer_order_is_checked(corpus):
    make, universe, _ = corpus["shuffle_stream"]
    it = iter(make())
    for _ in range(40):   # the buffer drained: the slots left are an array of row slots
        next(it)
    state = it.save()
    root = checkpoint.decode(state)["run"]["run"]["root"]
    assert root["ended"] and root["filled"] == 6 and root["order"] is not None
    ok = _forged(state, ("root", "order"), np.array([4, 0], np.int64))
    assert run_case(make, ok, universe)["outcome"] == "resumed"
    for order in (np.array([0, 2 ** 40]), np.array([-1]), np.array([6])):
        _refused(make, _forged(state, ("root", "order"), order), "shuffle", "'order'")


def test_the_row_numbers_of_a_shuffle_over_positions_are_checked(monkeypatch):
    # (a copy of the buffer every 4 draws: the states below hold row numbers)
    monkeypatch.setattr("nbdata.ops.shuffle.REPLAY_DRAWS", 4)
    monkeypatch.setattr("nbdata.ops.shuffle.REPLAY_PER_ROW", 0)

    small = nd.Options()
    small.chunk_rows = 2   # pulls of two rows: a state near each row

    def make():
        return nd.Dataset.range(50).shuffle(8, seed=1).with_options(small)

    universe = set(range(50))
    for taken, phase in ((20, "buffer"), (47, "order")):
        it = iter(make())
        for _ in range(taken):
            next(it)
        state = it.save()
        root = checkpoint.decode(state)["run"]["run"]["root"]
        saved = root[phase]
        assert 0 < root["base"] <= root["draws"] <= taken and len(saved) == 8
        assert run_case(make, state, universe)["outcome"] == "resumed"
        rest = list(it)
        again = iter(make())
        again.restore(state)
        assert [int(v) for v in again] == [int(v) for v in rest]
        for bad in (-1, 50 if phase == "buffer" else 8, 2 ** 62):
            forged = saved.copy()
            forged[0] = bad
            _refused(make, _forged(state, ("root", phase), forged), "shuffle", f"'{phase}'")
        _refused(make, _forged(state, ("root", phase), saved[:5]), "shuffle", f"'{phase}'")
        _refused(make, _forged(state, ("root", "base"), taken + 1), "shuffle", "'base'")


def test_file_offsets_are_checked(corpus):
    make, _, states = corpus["textline"]
    doc = checkpoint.decode(states[2])
    reader = doc["run"]["run"]["root"]["input"]["reader"]
    assert reader["offset"] > 0
    _refused(make, _forged(states[2], ("root", "input", "reader", "offset"), reader["offset"] + 3),
             "file_records", "'offset'", "line")
    _refused(make, _forged(states[2], ("root", "input", "reader", "offset"), -1),
             "file_records", "'offset'")
    make, _, states = corpus["fixed_length"]
    doc = checkpoint.decode(states[3])
    offset = doc["run"]["run"]["root"]["reader"]["offset"]
    _refused(make, _forged(states[3], ("root", "reader", "offset"), offset + 1),
             "file_records", "'offset'", "record")


def test_take_restores_at_every_point_also_count_0():
    """Issue 31: restoring take raised KeyError 'left' (count 0, or once it was done)."""
    r = nd.Dataset.range
    for ds in (r(10).take(0), r(10).take(3), r(10).take(-1), r(2).take(5),
               r(10).take(0).repeat(2), nd.Dataset.zip((r(5).take(0), r(5)))):
        full = [np.asarray(x).tolist() for x in ds]
        for k in range(len(full) + 2):
            it = iter(ds)
            for _ in range(k):
                next(it, None)
            state = it.save()
            again = iter(ds)
            again.restore(state)
            assert [np.asarray(x).tolist() for x in again] == full[k:]


def test_semantic_fuzz_of_forged_states(corpus):
    rng = random.Random(int(os.environ.get("NBDATA_FUZZ_SEED", "31")))
    names = sorted(corpus)
    outcomes = collections.Counter()
    bad = []
    started = time.perf_counter()
    for case in range(FUZZ_STATES):
        name = names[case % len(names)]
        make, universe, states = corpus[name]
        doc = checkpoint.decode(rng.choice(states))
        forged = checkpoint.encode(forge(doc, rng, name in DATA_STORES))
        result = run_case(make, forged, universe)
        outcomes[result["outcome"]] += 1
        if result["outcome"] in ("hang", "raw", "outside"):
            bad.append((name, result))
    seconds = time.perf_counter() - started
    print(f"\nforged states: {FUZZ_STATES} in {seconds:.1f} s; outcomes: {dict(outcomes)}")
    assert not bad, bad[:10]
