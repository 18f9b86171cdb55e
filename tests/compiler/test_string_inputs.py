"""Stages whose input chunks hold strings: a first map that does not use them fuses (the
strings never enter the kernel); any other use of a string keeps the ops in Python.
Fused and reference paths agree either way."""

import numpy as np
import pytest

import nbdata as nd


def _reference(ds):
    options = nd.Options()
    options.fusion = False
    return list(ds.with_options(options))


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        fx, fy = _flat(x), _flat(y)
        assert len(fx) == len(fy)
        for u, v in zip(fx, fy):
            u, v = np.asarray(u), np.asarray(v)
            assert u.dtype == v.dtype and u.shape == v.shape
            assert u.tolist() == v.tolist()


def _flat(x):
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in _flat(x[k])]
    if isinstance(x, (tuple, list)):
        return [leaf for v in x for leaf in _flat(v)]
    return [x]


@pytest.fixture(scope="module")
def _records_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("strings") / "rows.tfrecord")
    with nd.io.TFRecordWriter(path) as writer:
        for i in range(9000):
            writer.write(nd.io.encode_example({
                "x": np.arange(4, dtype=np.float32) + i, "label": i,
                "id": b"row-%d" % i}))
    return path


@pytest.fixture
def records(_records_file):
    path = _records_file
    features = {"x": nd.io.FixedLenFeature([4], np.float32),
                "label": nd.io.FixedLenFeature([], np.int64),
                "id": nd.io.FixedLenFeature([], nd.string)}
    return nd.TFRecordDataset(path).map(lambda r: nd.io.parse_single_example(r, features))


def _fused_ops(pipe) -> str:
    text = pipe.explain()
    return text.split("== physical plan (sink first) ==")[1].split("==")[0]


def test_a_map_that_drops_the_strings_fuses(records):
    ds = records.map(lambda e: (e["x"] * 2.0, e["label"] % 7)).batch(64)
    pipe = ds.compile()
    assert "fused_stage[the chunks of decode(parse_single_example(id, label, x)) -> map(" \
        in _fused_ops(pipe)
    got = list(pipe)
    _same(got, _reference(ds))
    assert np.array_equal(got[1][0][0], (np.arange(4, dtype=np.float32) + 64) * 2)


@pytest.mark.parametrize("fn, why", [
    (lambda e: (e["x"], e["id"]), "strings run in Python"),            # passes the string through
    # uses it: len() of a symbolic string cannot be recorded, so the map runs in Python
    # (and its spec comes from the first record)
    (lambda e: (e["x"], np.int64(len(e["id"]))), "graph could not be recorded: TraceError: len is not well defined"),
])
def test_a_map_that_uses_a_string_runs_in_python(records, fn, why):
    ds = records.map(fn).batch(64)
    pipe = ds.compile()
    assert why in pipe.explain()
    _same(list(pipe), _reference(ds))


def test_a_filter_before_the_map_keeps_the_chain_in_python(records):
    ds = records.filter(lambda e: e["label"] % 2 == 0).map(lambda e: e["x"]).batch(64)
    pipe = ds.compile()
    assert "string components" in pipe.explain()
    _same(list(pipe), _reference(ds))


def test_a_function_that_is_not_lifted_stays_in_python_and_fails_alike(records):
    """A function Numba would compile (not lifted: a data-dependent index) cannot take
    the string leaves, so it runs in Python; its error comes after the same rows as on
    the reference path."""
    def pick(e):
        return e["x"][e["label"] // 2000]      # out of range from row 8000 on

    ds = records.map(pick)
    assert "uses (or returns) a string component" in ds.compile().explain()
    fused, ref = [], []
    with pytest.raises(Exception) as fused_error:
        for v in ds.compile():
            fused.append(v)
    with pytest.raises(Exception) as ref_error:
        for v in ds.with_options(_no_fusion()):
            ref.append(v)
    assert type(fused_error.value) is type(ref_error.value)
    assert len(fused) == 8000
    _same(fused, ref)


def _no_fusion():
    options = nd.Options()
    options.fusion = False
    return options


def test_generator_strings_dropped_by_a_map():
    def gen():
        for i in range(6000):
            yield b"name-%d" % i, i

    ds = nd.Dataset.from_generator(gen, output_signature=(
        nd.TensorSpec((), nd.string), nd.TensorSpec((), np.int64)))
    ds = ds.map(lambda name, i: i * 3).batch(500)
    pipe = ds.compile()
    assert "fused_stage[" in _fused_ops(pipe)
    got = list(pipe)
    _same(got, _reference(ds))
    assert np.concatenate(got).tolist() == [3 * i for i in range(6000)]
