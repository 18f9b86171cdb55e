"""File caches are checked as they are read: every record of a cache file carries
CRC32Cs (of its length, its header and each buffer), so a changed byte is a
DataLossError naming the file and the offset, never a wrong element; a cache read by a
pipeline whose elements have another dtype, shape or structure is an
InvalidArgumentError at the first element, as in tf.data (tests/data/
tf_state_integrity.json, made by tests/data/make_tf_state_integrity.py)."""

import json
import random
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd
from nbdata.kernels.column_file import MAGIC

DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.fixture(scope="module")
def tf_behaviour():
    """What TensorFlow does: asked live when it is importable, else as recorded."""
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return json.loads((DATA / "tf_state_integrity.json").read_text())
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_tf_state_integrity",
                                                  DATA / "make_tf_state_integrity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.record()


def read(ds) -> tuple[list, BaseException | None]:
    """The elements ``ds`` gives (as plain lists) before it fails, and the error."""
    got = []
    try:
        for e in ds:
            got.append([np.asarray(v).tolist() if not isinstance(v, bytes) else v
                        for v in (e if isinstance(e, tuple) else (e,))])
    except nd.errors.OpError as e:
        return got, e
    return got, None


def check_damage(ds, path: Path, expected: list, variants) -> dict:
    """Writes each damaged file in turn and reads it through ``ds``: every read ends in
    DataLossError after a prefix of the right elements, or gives all of them (a change
    to padding). Returns the count of each outcome."""
    original = path.read_bytes()
    counts = {"DataLossError": 0, "same elements": 0}
    for variant in variants:
        path.write_bytes(variant)
        got, error = read(ds)
        assert got == expected[:len(got)], "a wrong element"
        if error is None:
            assert got == expected
            counts["same elements"] += 1
        else:
            assert isinstance(error, nd.errors.DataLossError), repr(error)
            assert str(path) in str(error)
            counts["DataLossError"] += 1
    path.write_bytes(original)
    return counts


def test_a_flipped_byte_in_a_cache_file_is_data_loss(tmp_path, tf_behaviour):
    """The issue: one flipped byte gave a wrong element with no error."""
    name = str(tmp_path / "c")
    list(nd.Dataset.range(1000).cache(name))
    path = tmp_path / "c.nbcache"
    raw = path.read_bytes()
    ds = nd.Dataset.range(1000).cache(name)
    expected = [[v] for v in range(1000)]
    rng = random.Random(3)
    positions = list(range(len(MAGIC) + 200)) + rng.sample(range(len(raw)), 500)
    variants = []
    for pos in positions:
        b = bytearray(raw)
        b[pos] ^= 1 << rng.randrange(8)
        variants.append(bytes(b))
    counts = check_damage(ds, path, expected, variants)
    assert counts["DataLossError"] >= len(variants) - 40     # some bytes are padding
    # the value bytes of element 700, as TensorFlow's test flips them
    at = raw.index(np.arange(699, 701, dtype=np.int64).tobytes()) + 8
    flipped = bytearray(raw)
    flipped[at + 3] ^= 1
    path.write_bytes(bytes(flipped))
    got, error = read(ds)
    assert isinstance(error, nd.errors.DataLossError)
    assert "checksum does not match" in str(error)
    assert got == expected[:len(got)]
    recorded = tf_behaviour["cache_flipped_bit"]
    assert recorded["error"] == "DataLossError" and "Checksum does not match" in recorded["message"]
    # TensorFlow checks each element, nbdata each chunk: it stops no later.
    assert len(got) <= recorded["elements_before_error"]


def test_every_kind_of_leaf_is_checked(tmp_path):
    """Dense, ragged and string leaves: flipped bytes, cuts, and bytes appended."""
    name = str(tmp_path / "c")
    words = np.array([f"w{i}" * (i % 4) for i in range(300)])

    def make():
        return nd.Dataset.from_tensor_slices((np.arange(300.0).reshape(100, 3), words[:100])).map(
            lambda v, w: (v, w, np.full(int(v[0]) % 3, v[1]))).cache(name)

    expected, error = read(make())
    assert error is None and len(expected) == 100
    path = tmp_path / "c.nbcache"
    raw = path.read_bytes()
    rng = random.Random(11)
    variants = []
    for _ in range(400):
        b = bytearray(raw)
        b[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        variants.append(bytes(b))
    variants += [raw[:cut] for cut in range(0, len(raw), 13)]
    variants += [raw + b"\0" * 8, raw + b"x"]
    counts = check_damage(make(), path, expected, variants)
    assert counts["DataLossError"] >= len(variants) - 60
    path.write_bytes(raw[:len(raw) // 2])
    with pytest.raises(nd.errors.DataLossError, match="c.nbcache is corrupt at offset"):
        list(make())


def test_a_cache_of_an_older_format_is_data_loss(tmp_path):
    name = str(tmp_path / "c")
    list(nd.Dataset.range(10).cache(name))
    path = tmp_path / "c.nbcache"
    path.write_bytes(b"NBCOLS\x00\x01" + path.read_bytes()[8:])
    with pytest.raises(nd.errors.DataLossError, match="unknown format version 1 .*delete the file"):
        list(nd.Dataset.range(10).cache(name))


def test_a_cache_read_as_another_dtype_is_invalid_argument(tmp_path, tf_behaviour):
    name = str(tmp_path / "c")
    list(nd.Dataset.range(1000).cache(name))
    it = iter(nd.Dataset.range(1000).map(lambda x: x.astype(np.float64)).cache(name))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Data type mismatch at component 0: expected float64 but got int64"):
        next(it)
    recorded = tf_behaviour["cache_read_as_float64"]
    assert recorded["error"] == "InvalidArgumentError" and recorded["elements_before_error"] == 0
    assert recorded["message"].startswith("Data type mismatch at component 0: expected double "
                                          "but got int64")
    strings = name + "s"
    list(nd.Dataset.from_tensor_slices(np.array([b"a", b"b", b"c"])).cache(strings))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Data type mismatch at component 0: expected int64 but got string"):
        list(nd.Dataset.from_tensor_slices(np.arange(3)).cache(strings))
    assert read(nd.Dataset.range(1000).cache(name))[0] == [[v] for v in range(1000)]


def test_a_cache_read_as_another_shape_or_structure_is_invalid_argument(tmp_path, tf_behaviour):
    name = str(tmp_path / "c")
    list(nd.Dataset.range(1000).cache(name))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"Incompatible shapes at component 0: expected \[2\] but got \[\]"):
        list(nd.Dataset.range(1000).map(lambda x: np.stack([x, x])).cache(name))
    recorded = tf_behaviour["cache_read_as_pairs_of_int64"]
    assert recorded["error"] == "InvalidArgumentError"
    assert recorded["message"].startswith("Incompatible shapes at component 0: expected [2] but got []")
    # TensorFlow reads pairs of consecutive elements here; nbdata says what is wrong.
    with pytest.raises(nd.errors.InvalidArgumentError, match="elements of 1 components, this "
                                                              "dataset's elements have 2"):
        list(nd.Dataset.range(1000).map(lambda x: (x, x)).cache(name))
    ragged = str(tmp_path / "r")
    list(nd.Dataset.range(10).map(lambda x: np.full(x % 3, x)).cache(ragged))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"Incompatible shapes at component 0: expected \[2\] but got \[0\]"):
        list(nd.Dataset.range(10).map(lambda x: np.stack([x, x])).cache(ragged))
    got, error = read(nd.Dataset.range(10).map(lambda x: np.full(x % 3 + 0, x)).cache(ragged))
    assert error is None and got == [[[x] * (x % 3)] for x in range(10)]


def test_restoring_a_read_position_of_a_deleted_cache_names_the_file(tmp_path):
    name = str(tmp_path / "c")
    list(nd.Dataset.range(30).cache(name))
    it = iter(nd.Dataset.range(30).cache(name))
    for _ in range(7):
        next(it)
    state = it.save()
    (tmp_path / "c.nbcache").unlink()
    # (the row the state reads from: where the chunk holding the 8th element starts)
    with pytest.raises(nd.errors.NotFoundError, match=r"c.nbcache at row [0-7], and the file is gone"):
        iter(nd.Dataset.range(30).cache(name)).restore(state)
