"""Saved iterator state is checked before it is used: a state that was cut short or
altered (any flipped bit, any cut) is a DataLossError, never a wrong element or a raw
Python error; a state saved by another pipeline (other ops, arguments, function
constants, captured values, options) is refused naming the op that does not fit; a
refused state leaves the iterator where it was. TensorFlow's behaviour, for comparison,
is in tests/data/tf_state_integrity.json (tests/data/make_tf_state_integrity.py)."""

import collections
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd
# The checkpoint test pipelines, imported by their module name (one Numba's kernel cache
# can import again in another process).
import test_checkpoint as CASES
from nbdata import checkpoint
from nbdata.kernels.crc32c import crc32c_bytes

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module




@pytest.fixture(scope="module")
def tf_behaviour():
    """What TensorFlow does: asked live when it is importable, else as recorded."""
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return json.loads((DATA / "tf_state_integrity.json").read_text())
    return _load(DATA / "make_tf_state_integrity.py", "make_tf_state_integrity").record()


def restore_outcome(it, state: bytes) -> str:
    """"refused: <error class>" or "restored"; a Python error that is not an nbdata one
    propagates (and fails the test)."""
    try:
        it.restore(state)
    except nd.errors.OpError as e:
        return f"refused: {type(e).__name__}"
    return "restored"


# ------------------------------------------------------------------ corruption

def test_every_bit_flip_of_a_shuffle_state_is_data_loss():
    """The issue's case: one flipped bit of a saved range(1000).shuffle(100) restored
    silently and later gave 72057594037928035. Now each of its bits, flipped, is refused,
    and the iterator the bad states were fed to goes on as if nothing happened."""
    ds = nd.Dataset.range(1000).shuffle(100)
    it = iter(ds)
    for _ in range(10):
        next(it)
    state = it.save()
    rest = [int(x) for x in it]
    target = iter(ds)
    head = [int(next(target)) for _ in range(5)]
    outcomes = collections.Counter()
    for bit in range(len(state) * 8):
        damaged = bytearray(state)
        damaged[bit // 8] ^= 1 << (bit % 8)
        outcomes[restore_outcome(target, bytes(damaged))] += 1
    assert outcomes == {"refused: DataLossError": len(state) * 8}
    tail = [int(x) for x in target]                # never restored: its own epoch, intact
    assert sorted(head + tail) == list(range(1000))
    target.restore(state)
    assert [int(x) for x in target] == rest


def damaged_variants(state: bytes, rng: random.Random, count: int):
    """``count`` damaged copies of ``state``: flipped bits, replaced bytes, bursts of up
    to 4 bytes, cuts, bytes added, removed or appended (CRC32C detects each of them)."""
    n = len(state)
    for k in range(count):
        kind = k % 8
        b = bytearray(state)
        if kind in (0, 1):
            pos = rng.randrange(n)
            b[pos] ^= 1 << rng.randrange(8)
        elif kind == 2:
            pos = rng.randrange(n)
            b[pos] = (b[pos] + rng.randrange(1, 256)) % 256
        elif kind == 3:
            pos = rng.randrange(n - 4)
            for j in range(pos, pos + rng.randrange(2, 5)):
                b[j] ^= rng.randrange(1, 256)
        elif kind == 4:
            b = b[:rng.randrange(n)]
        elif kind == 5:
            pos = rng.randrange(24)                  # the header: magic, version, length, CRCs
            b[pos] ^= 1 << rng.randrange(8)
        elif kind == 6:
            pos = rng.randrange(n)
            if rng.random() < 0.5:
                del b[pos]
            else:
                b.insert(pos, rng.randrange(256))
        else:
            b += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        yield bytes(b)


def test_flips_and_cuts_of_every_checkpoint_pipeline_state_are_data_loss():
    """Over 10,000 damaged states of the checkpoint test pipelines (each saved at its
    start, middle and end), every one fed to restore: zero restored, so zero wrong
    elements, and no error that is not an nbdata one."""
    rng = random.Random(19)
    per_state = -(-10_000 // (3 * len(CASES.PIPELINES))) + 1
    outcomes = collections.Counter()
    for name in sorted(CASES.PIPELINES):
        make = CASES.PIPELINES[name]
        full = CASES.elements(make())
        target = iter(make())
        for k in sorted({0, len(full) // 2, len(full)}):
            it = iter(make())
            for _ in range(k):
                next(it)
            state = it.save()
            for variant in damaged_variants(state, rng, per_state):
                outcome = restore_outcome(target, variant)
                outcomes[outcome] += 1
                assert outcome == "refused: DataLossError", (name, k, variant)
            target.restore(state)                  # the real one still restores
            assert CASES.elements(target) == full[k:], name
    assert sum(outcomes.values()) >= 10_000


def test_checkpoint_files_are_checked_before_any_iterator_changes(tmp_path):
    a = iter(nd.Dataset.range(10))
    b = iter(nd.Dataset.range(100, 110).shuffle(5, seed=1))
    next(a), next(b), next(b)
    path = nd.Checkpoint(a=a, b=b).write(str(tmp_path / "ckpt"))
    data = Path(path).read_bytes()
    rest_a, rest_b = CASES.elements(a), CASES.elements(b)
    a2 = iter(nd.Dataset.range(10))
    b2 = iter(nd.Dataset.range(100, 110).shuffle(5, seed=1))
    first = int(next(a2))
    rng = random.Random(5)
    bad = tmp_path / "bad"
    for variant in damaged_variants(data, rng, 400):
        bad.write_bytes(variant)
        with pytest.raises(nd.errors.DataLossError, match="Checkpoint.read: .*bad: "):
            nd.Checkpoint(a=a2, b=b2).read(str(bad))
    assert first == 0 and int(next(a2)) == 1       # neither iterator was touched
    with pytest.raises(nd.errors.NotFoundError, match="no checkpoint at"):
        nd.Checkpoint(a=a2).read(str(tmp_path / "missing"))
    # b's state into an iterator of another pipeline: refused before a is restored.
    c = iter(nd.Dataset.range(100, 110).shuffle(6, seed=1))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="iterator 'b': restore: the state of shuffle \\(op 2\\)"):
        nd.Checkpoint(a=a2, b=c).read(path)
    assert int(next(a2)) == 2
    nd.Checkpoint(a=a2, b=b2).read(path)
    assert CASES.elements(a2) == rest_a and CASES.elements(b2) == rest_b


def test_format_version_and_structure_are_checked():
    it = iter(nd.Dataset.range(5))
    state = it.save()
    assert state[:8] == b"NBSTATE2"
    old = b"NBSTATE1" + state[8:]
    with pytest.raises(nd.errors.DataLossError,
                       match="unknown format version b'1'.*older nbdata, without a checksum"):
        it.restore(old)
    with pytest.raises(nd.errors.DataLossError, match="unknown format version b'3'"):
        it.restore(b"NBSTATE3" + state[8:])
    with pytest.raises(nd.errors.DataLossError, match="bad magic"):
        it.restore(b"not a state at all")
    for cut in (b"", b"NBST", state[:12], state[:23]):
        with pytest.raises(nd.errors.DataLossError, match="truncated iterator state"):
            it.restore(cut)
    with pytest.raises(nd.errors.DataLossError, match="bad header checksum"):
        it.restore(state[:8] + bytes([state[8] ^ 1]) + state[9:])
    with pytest.raises(nd.errors.DataLossError, match="bad checksum"):
        it.restore(state[:-1] + bytes([state[-1] ^ 0x80]))
    with pytest.raises(nd.errors.DataLossError, match="3 unexpected bytes after its end"):
        it.restore(state + b"abc")
    doc = checkpoint.decode(state)
    with pytest.raises(nd.errors.DataLossError, match="unknown iterator state version 99"):
        it.restore(checkpoint.encode(dict(doc, version=99)))
    for broken in ({"version": doc["version"]}, dict(doc, run={"run": {}, "epochs": {}}),
                   dict(doc, seed="x"), [1, 2]):
        with pytest.raises(nd.errors.DataLossError, match="malformed|no iterator state"):
            it.restore(checkpoint.encode(broken))
    with pytest.raises(TypeError, match="expected the bytes of it.save"):
        it.restore("a string")
    assert [int(x) for x in it] == [0, 1, 2, 3, 4]   # never touched by the refusals
    # the layout: header CRC over magic, version and length; payload CRC over the rest
    assert int.from_bytes(state[16:20], "little") == crc32c_bytes(state[:16])
    assert int.from_bytes(state[20:24], "little") == crc32c_bytes(state[24:])
    assert int.from_bytes(state[8:16], "little") == len(state) - 24


def test_the_checksum_costs_little_next_to_saving_a_large_state():
    """A stream shuffle holding 1M rows: its state is 16 MB; the checksum is a small part
    of what saving costs (CRC32C with the CPU's instruction, ~10 GB/s)."""
    x = np.arange(1_200_000, dtype=np.float64)
    ds = nd.Dataset.from_tensor_slices((x, x.astype(np.int64))).map(
        lambda a, b: (a * 2, b + 1)).shuffle(1_000_000, seed=1)
    it = iter(ds)
    next(it)
    saves, crcs = [], []
    for _ in range(3):
        started = time.perf_counter()
        state = it.save()
        saves.append(time.perf_counter() - started)
        started = time.perf_counter()
        crc32c_bytes(state)
        crcs.append(time.perf_counter() - started)
    assert len(state) > 16_000_000
    assert min(crcs) < 0.5 * min(saves), (crcs, saves)
    again = iter(ds)
    again.restore(state)
    assert [tuple(map(float, next(again))) for _ in range(3)] == \
        [tuple(map(float, next(it))) for _ in range(3)]


# ------------------------------------------------------------ another pipeline

def saved(ds, k: int = 3) -> bytes:
    it = iter(ds)
    for _ in range(k):
        next(it)
    return it.save()


K_ONE, K_TWO = 1, 2
GLOBAL_TABLE = np.arange(4)


def refused(ds, state: bytes, error=nd.errors.InvalidArgumentError, match: str = "") -> str:
    it = iter(ds)
    with pytest.raises(error, match=match) as e:
        it.restore(state)
    return str(e.value)


def test_a_different_shuffle_buffer_names_the_op(tf_behaviour):
    state = saved(nd.Dataset.range(1000).shuffle(100, seed=1))
    refused(nd.Dataset.range(1000).shuffle(50, seed=1), state,
            match=r"^restore: the state of shuffle \(op 2\) does not fit this pipeline: "
                  r"buffer_size 100 saved, 50 here")
    refused(nd.Dataset.range(1000).shuffle(100, seed=2), state,
            match=r"shuffle \(op 2\).*seed 1 saved, 2 here")
    # TensorFlow restores it and fails later with an InternalError.
    assert tf_behaviour["restore_into_other_shuffle_buffer"]["error"] == "InternalError"


def test_a_placeholder_fed_another_buffer_size_names_the_op():
    n = nd.placeholder(np.int64, shape=[])
    ds = nd.Dataset.range(1000).map(lambda x: x * 2).shuffle(n, seed=1)
    it = ds.make_initializable_iterator()
    it.initialize(feed_dict={n: 100})
    for _ in range(10):
        next(it)
    state = it.save()
    other = ds.make_initializable_iterator()
    other.initialize(feed_dict={n: 50})
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="state of shuffle does not fit this pipeline: buffer_size 100 "
                             "saved, 50 here"):
        other.restore(state)
    other.initialize(feed_dict={n: 100})
    other.restore(state)
    assert [int(x) for x in other] == [int(x) for x in it]


def test_function_constants_and_captured_values_are_part_of_the_pipeline(tf_behaviour):
    r = nd.Dataset.range
    state = saved(r(20).map(lambda x: x + 1))
    message = refused(r(20).map(lambda x: x + 1000), state,
                      match=r"state of map \(op 2\) does not fit this pipeline: its fn "
                            r"\S*<lambda> differs from the one the state was saved with")
    assert "different pipeline" in message
    refused(r(20).filter(lambda x: x % 3 == 0), saved(r(20).filter(lambda x: x % 2 == 0)),
            match=r"state of filter \(op 2\).*its predicate \S*<lambda> differs")

    def adder(k):
        return lambda x: x + k
    refused(r(20).map(adder(2)), saved(r(20).map(adder(1))), match=r"map \(op 2\)")
    refused(r(20).map(lambda x: x + K_TWO), saved(r(20).map(lambda x: x + K_ONE)),
            match=r"map \(op 2\)")
    refused(r(20).map(lambda x, k=2: x + k), saved(r(20).map(lambda x, k=1: x + k)),
            match=r"map \(op 2\)")
    space = {"np": np, "GLOBAL_TABLE": np.arange(4)}
    exec("def look(x):\n    return GLOBAL_TABLE[x % 4]\n", space)
    first = saved(r(20).map(space["look"]))
    space["GLOBAL_TABLE"] = np.arange(4) * 7       # a global array of other content
    refused(r(20).map(space["look"]), first, match=r"map \(op 2\)")
    refused(r(20).take(10), saved(r(20).take(5)), match=r"take \(op 2\).*count 5 saved, 10 here")
    refused(r(30), saved(r(20)), match=r"range \(op 1\).*stop 20 saved, 30 here")
    refused(r(20).batch(4, drop_remainder=True), saved(r(20).batch(4)),
            match=r"batch \(op 2\).*drop_remainder False saved, True here")
    # The same pipeline built again restores, in this process.
    state = saved(r(20).map(lambda x: x + 1))
    again = iter(r(20).map(lambda x: x + 1))
    again.restore(state)
    assert [int(x) for x in again] == list(range(4, 21))
    # TensorFlow restores the state of map(x + 1) into map(x + 1000) without a word.
    assert tf_behaviour["restore_into_other_map_constant"]["error"] is None


class Opaque:
    """An object of no kind the fingerprint knows: it counts by its type."""

    def __init__(self, v):
        self.v = v


def test_functions_reading_unknown_objects_are_fingerprinted_in_part():
    thing = Opaque(3)
    r = nd.Dataset.range

    def plus_one(x):
        return x + 1 + 0 * thing.v

    def plus_two(x):
        return x + 2 + 0 * thing.v

    state = saved(r(10).map(plus_one))
    again = iter(r(10).map(plus_one))
    again.restore(state)
    assert [int(x) for x in again] == list(range(4, 11))
    refused(r(10).map(plus_two), state, match=r"map \(op 2\)")


def test_other_ops_are_not_found_as_in_tensorflow(tf_behaviour):
    r = nd.Dataset.range
    refused(r(20).batch(2), saved(r(20).map(lambda x: x + 1)), nd.errors.NotFoundError,
            match="saved by a different pipeline: op 2 is map there and batch here")
    refused(r(20).skip(2), saved(r(20)), nd.errors.NotFoundError,
            match="op 2 is nothing there and skip here")
    refused(r(20), saved(r(20).skip(2)), nd.errors.NotFoundError,
            match="op 2 is skip there and nothing here")
    for case in ("restore_into_other_ops", "restore_into_an_extra_op"):
        assert tf_behaviour[case]["error"] == "NotFoundError"
        assert "Failed to restore dataset iterator" in tf_behaviour[case]["message"]


def test_the_same_pipeline_planned_with_other_options_is_refused():
    def make(fusion: bool):
        o = nd.Options()
        o.fusion_min_rows = 0
        o.fusion = fusion
        return nd.Dataset.range(5000).map(lambda v: v * 2 + 1).with_options(o)

    refused(make(False), saved(make(True)), match="planned differently.*Options")


def test_a_state_that_does_not_fit_an_op_is_an_error_naming_it():
    """A state document made by hand (checksummed, the pipeline's own identity) whose op
    state lacks what the op reads: InvalidArgumentError naming the op, no KeyError."""
    ds = nd.Dataset.range(50).shuffle(8, seed=4)
    it = iter(ds)
    next(it)
    doc = checkpoint.decode(it.save())
    root = doc["run"]["run"]["root"]
    del root["epoch"]
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"restore: the state of shuffle does not fit this pipeline: "
                             r"its field 'epoch' is missing"):
        iter(ds).restore(checkpoint.encode(doc))


def test_fingerprints_cover_op_arguments_not_where_distribute_runs():
    from nbdata.compiler.plan_identity import plan_fingerprint

    base = nd.Dataset.range(10)
    a = base.distribute("parallel_epochs", num_workers=2)
    b = base.distribute("parallel_epochs", num_workers=2, address="ray://elsewhere:10001")
    c = base.distribute("distributed_epoch", num_workers=2)
    # Nor on how many workers: a saved position resumes on another count (the job
    # refuses what a processing mode cannot re-split).
    d = base.distribute("parallel_epochs", num_workers=3)
    assert plan_fingerprint(a._node) == plan_fingerprint(b._node) == plan_fingerprint(d._node)
    assert plan_fingerprint(a._node) != plan_fingerprint(c._node)


def test_fingerprints_are_the_same_in_every_process():
    """Set constants (``x in {...}`` compiles to a frozenset) iterate in an order that
    depends on the string hash seed: the fingerprint does not."""
    code = ("import nbdata as nd\n"
            "from nbdata.compiler.plan_identity import plan_fingerprint\n"
            "ds = nd.Dataset.from_tensor_slices([b'a', b'q']).filter(\n"
            "    lambda s: s in {b'a', b'b', b'c', b'dd', b'ee'})\n"
            "print(plan_fingerprint(ds._node))\n")
    seen = set()
    for seed in ("1", "2"):
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=300, env=dict(os.environ, PYTHONHASHSEED=seed))
        assert run.returncode == 0, run.stderr[-2000:]
        seen.add(run.stdout.strip().splitlines()[-1])
    assert len(seen) == 1
