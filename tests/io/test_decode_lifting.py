"""Decoders lifted out of maps into record kernels: same elements, specs and errors as the
plain path (each function called per element), save/restore, explain()."""

from __future__ import annotations

import numpy as np
import pytest

import nbdata as nd

FEATURES = {"x": nd.io.FixedLenFeature([4], np.float32),
            "label": nd.io.FixedLenFeature([], np.int64),
            "id": nd.io.FixedLenFeature([], nd.string),
            "tags": nd.io.VarLenFeature(np.int64)}


def _record(i):
    return nd.io.encode_example({"x": np.arange(4, dtype=np.float32) * i, "label": i,
                                 "id": b"id-%d" % i, "tags": np.arange(i % 4, dtype=np.int64)})


# The records of the test files: the reference path (every op element by element) is
# what costs, so 2,000 rather than the 5,000 (and 6,000) these tests had. What they
# covered still is: the source's chunks growing 1, 2, 4, ... rows and a last, partial
# one (chunks of up to 2,048 rows: 5,000 rows never reached parse_example's parallel
# PARALLEL_MIN_ROWS of 4,096, 2,000 do not either), the whole file within one read
# block (190 KB now, 480 KB before, of 1 MB); many batches with and without a
# remainder for every batch size here (64, 32, 7, 9 after the filter; 100 and 50
# divide it, as they did 5,000), batches that straddle chunks, far more rows than the
# shuffle buffer of 100, and a save after batch 30 of 32 (of 79 before).
RECORDS = 2000


@pytest.fixture(scope="module")
def tfrecord(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("lift") / "r.tfrecord")
    with nd.io.TFRecordWriter(path) as w:
        for i in range(RECORDS):
            w.write(_record(i))
    return path


def plain(ds):
    options = nd.Options()
    options.optimization.decode_lifting = False
    options.optimization.decode_vectorization = False
    return ds.with_options(options)


def unlifted(ds):
    """The reference: every op element by element, no passes."""
    options = nd.Options()
    options.fusion = False
    return ds.with_options(options)


def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, nd.SparseTensor):
        return a == b
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def assert_paths_agree(ds):
    want = list(unlifted(ds))
    for variant in (ds, plain(ds)):
        got = list(variant)
        assert len(got) == len(want)
        assert all(same(g, w) for g, w in zip(got, want))
    assert ds.element_spec == unlifted(ds).element_spec


def parse(r):
    return nd.io.parse_single_example(r, FEATURES)


@pytest.mark.parametrize("build", [
    lambda ds: ds.map(parse),
    lambda ds: ds.map(parse).batch(64),
    lambda ds: ds.map(parse).batch(64, drop_remainder=True),
    lambda ds: ds.batch(100).map(lambda b: nd.io.parse_example(b, FEATURES)),
    lambda ds: ds.map(parse).map(lambda e: (e["x"] * 2, e["label"] + 1)).batch(32),
    lambda ds: ds.map(lambda r: nd.io.parse_single_example(r, FEATURES)["x"]).batch(7),
    lambda ds: ds.shuffle(100, seed=3, reshuffle_each_iteration=False).map(parse).batch(50),
    lambda ds: ds.map(parse).filter(lambda e: e["label"] % 3 == 0).batch(9),
])
def test_lifted_equals_plain(tfrecord, build):
    assert_paths_agree(build(nd.TFRecordDataset(tfrecord)))


def test_plan_shows_record_kernel_and_vectorized_parse(tfrecord):
    pipe = nd.TFRecordDataset(tfrecord).map(parse).batch(64).compile()
    text = pipe.explain()
    assert "decode_lifting: changed the plan" in text
    assert "decode_vectorization: changed the plan" in text
    assert "== record kernels ==" in text
    assert "parse_example(id, label, tags, x) kernel over columns of records" in text
    spec = pipe.element_spec if hasattr(pipe, "element_spec") else None
    ds = nd.TFRecordDataset(tfrecord).map(parse).batch(64)
    assert ds.element_spec["tags"] == nd.SparseTensorSpec((None, None), np.int64)
    assert ds.element_spec["x"] == nd.TensorSpec((None, 4), np.float32)
    assert ds.output_classes["tags"] is nd.SparseTensor
    del spec


def test_decoded_maps_fuse(tmp_path):
    path = str(tmp_path / "n.tfrecord")
    feats = {"x": nd.io.FixedLenFeature([4], np.float32), "label": nd.io.FixedLenFeature([], np.int64)}
    with nd.io.TFRecordWriter(path) as w:
        for i in range(RECORDS):
            w.write(nd.io.encode_example({"x": np.full(4, i, np.float32), "label": i}))
    ds = (nd.TFRecordDataset(path).map(lambda r: nd.io.parse_single_example(r, feats))
          .map(lambda e: (e["x"] - 0.5, e["label"])).batch(256))
    pipe = ds.compile()
    assert pipe.fused_stages(), pipe.explain()
    got = list(pipe)
    assert_paths_agree(ds)
    assert got[0][0].dtype == np.float32 and got[0][0].shape == (256, 4)


def _bad_file(tmp_path):
    path = str(tmp_path / "bad.tfrecord")
    with nd.io.TFRecordWriter(path) as w:
        for i in range(40):
            if i in (5, 23):
                w.write(nd.io.encode_example({"x": np.zeros(4, np.float32), "label": i}))  # no id
            else:
                w.write(_record(i))
    return path


@pytest.mark.parametrize("batch", [None, 8])
def test_errors_match_the_plain_path(tmp_path, batch):
    path = _bad_file(tmp_path)
    for variant in (lambda d: d, plain, unlifted):
        ds = nd.TFRecordDataset(path).map(parse)
        if batch:
            ds = ds.batch(batch)
        ds = variant(ds)
        it = iter(ds)
        got = []
        with pytest.raises(nd.errors.InvalidArgumentError) as e:
            while True:
                got.append(next(it))
        assert "id" in str(e.value)
        assert len(got) == (5 if batch is None else 0)
        # ignore_errors keeps every good element (or batch) around the bad ones
        kept = list(variant(ds.ignore_errors()))
        # (batch: the batch being filled fails, the next starts after the bad record)
        assert [int(np.ravel(k["label"])[0]) for k in kept][:2] == ([0, 1] if batch is None else [6, 14])
        assert len(kept) == (38 if batch is None else 4)
    if batch:
        # Written as batch-then-parse, a bad record fails its whole batch (tf.data's
        # parse_example on the batch).
        ds = nd.TFRecordDataset(path).batch(batch).map(lambda b: nd.io.parse_example(b, FEATURES))
        for variant in (lambda d: d, unlifted):
            kept = list(variant(ds.ignore_errors()))
            assert [k["label"].tolist()[0] for k in kept] == [8, 24, 32]


def test_save_restore_through_batched_decode(tfrecord):
    ds = nd.TFRecordDataset(tfrecord).map(parse).batch(64)
    full = list(ds)
    for stop in (0, 1, 30, len(full)):
        it = iter(ds)
        head = [next(it) for _ in range(stop)]
        state = it.save()
        again = iter(ds)
        again.restore(state)
        rest = list(again)
        assert len(head) + len(rest) == len(full)
        assert all(same(a, b) for a, b in zip(head + rest, full))


def test_functions_that_use_the_record_otherwise_are_not_lifted(tfrecord):
    ds = nd.TFRecordDataset(tfrecord).map(lambda r: (parse(r)["label"], len(r)))
    text = ds.compile().explain()
    assert "decode_lifting: no change" in text
    first = next(iter(ds))
    assert int(first[0]) == 0 and int(first[1]) == len(_record(0))
