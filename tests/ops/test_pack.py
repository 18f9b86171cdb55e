"""``nd.experimental.pack`` and variable-length sequences: packed rows equal a plain
Python packer's, for one feature and a dict of features, from generators and from a
Parquet ``list<int32>`` column; bucketed batches of the same column equal a NumPy
bucketing; save/restore mid-epoch resumes exactly."""

import numpy as np
import pytest

import nbdata as nd

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


# ---------------------------------------------------------------- references

def reference_pack(seqs, caps, bins):
    """A plain Python first-fit packer over ``bins`` open rows (all finished when a
    sequence fits none and ``bins`` are open), sequences cut to the row lengths and
    all-empty ones left out. ``seqs``: list of tuples of 1-D arrays (one per feature).
    Returns rows as lists of (values, segment ids, positions) per feature."""
    nf = len(caps)
    open_rows, out = [], []

    def finish(row):
        parts = []
        for f in range(nf):
            vals = np.zeros(caps[f], row["dtype"][f])
            seg = np.zeros(caps[f], np.int32)
            pos = np.zeros(caps[f], np.int32)
            at = 0
            for s, piece in enumerate(row["pieces"][f], start=1):
                vals[at:at + len(piece)] = piece
                seg[at:at + len(piece)] = s
                pos[at:at + len(piece)] = np.arange(len(piece))
                at += len(piece)
            parts.append((vals, seg, pos))
        out.append(parts)

    for seq in seqs:
        cut = [np.asarray(x)[:c] for x, c in zip(seq, caps)]
        if all(len(x) == 0 for x in cut):
            continue
        home = next((r for r in open_rows
                     if all(sum(map(len, r["pieces"][f])) + len(cut[f]) <= caps[f]
                            for f in range(nf))), None)
        if home is None:
            if len(open_rows) == bins:
                for r in open_rows:
                    finish(r)
                open_rows = []
            home = {"pieces": [[] for _ in range(nf)], "dtype": [x.dtype for x in cut]}
            open_rows.append(home)
        for f in range(nf):
            home["pieces"][f].append(cut[f])
    for r in open_rows:
        finish(r)
    return out


def token_count(x):
    """The bucketing length of a sequence: one function, so it compiles once."""
    return np.int64(len(x))


def sequences(n, low, high, seed, dtype=np.int32):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 1000, rng.integers(low, high + 1)).astype(dtype) for _ in range(n)]


def ragged(seqs, dtype=np.int32):
    return nd.Dataset.from_generator(lambda: iter(seqs),
                                     output_signature=nd.TensorSpec((None,), dtype))


def assert_rows(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------- pack

@pytest.mark.parametrize("bins", [1, 3])
def test_pack_one_feature_equals_the_reference(bins):
    seqs = sequences(300, 0, 40, seed=bins)       # empties and sequences over the row length
    got = [tuple(row) for row in ragged(seqs).apply(nd.experimental.pack(32, num_packing_bins=bins))]
    want = [tuple(parts[0]) for parts in reference_pack([(s,) for s in seqs], [32], bins)]
    assert_rows(got, want)
    assert any((r[1] == 0).any() for r in got) and max(int(r[1].max()) for r in got) > 2


def test_pack_a_dict_of_features_together():
    seqs = sequences(120, 0, 12, seed=7)
    targets = [np.asarray(s[: len(s) // 2], np.int64) * 10 for s in seqs]
    ds = nd.Dataset.from_generator(
        lambda: iter({"inputs": a, "targets": b} for a, b in zip(seqs, targets)),
        output_signature={"inputs": nd.TensorSpec((None,), np.int32),
                          "targets": nd.TensorSpec((None,), np.int64)})
    packed = ds.apply(nd.experimental.pack({"inputs": 16, "targets": 6}, num_packing_bins=2))
    spec = packed.element_spec
    assert spec["inputs"].shape == (16,) and spec["targets_positions"].dtype == np.int32
    got = list(packed)
    want = reference_pack(list(zip(seqs, targets)), [16, 6], 2)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for name, (vals, seg, pos) in zip(["inputs", "targets"], w):
            np.testing.assert_array_equal(g[name], vals)
            np.testing.assert_array_equal(g[name + "_segment_ids"], seg)
            np.testing.assert_array_equal(g[name + "_positions"], pos)


def test_pack_arguments_are_checked():
    with pytest.raises(nd.errors.InvalidArgumentError, match="pack: seq_len must be a positive"):
        ragged([]).apply(nd.experimental.pack(0))
    with pytest.raises(nd.errors.InvalidArgumentError, match="pack: the element must be a 1-D"):
        nd.Dataset.range(3).apply(nd.experimental.pack(4))
    with pytest.raises(nd.errors.InvalidArgumentError, match=r"seq_len names \['a'\]"):
        ragged([]).map(lambda x: {"b": x}).apply(nd.experimental.pack({"a": 4}))


# ------------------------------------------------------------------ Parquet

N_ROWS = 400


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    """A Parquet file of token lists (list<int32>, row groups of 64) and a label column
    with nulls, which the pipelines below never read."""
    seqs = sequences(N_ROWS, 1, 60, seed=11)
    labels = pa.array([None if i % 7 == 3 else i for i in range(N_ROWS)], pa.int64())
    table = pa.table({"tokens": pa.array([s.tolist() for s in seqs], pa.list_(pa.int32())),
                      "label": labels})
    path = str(tmp_path_factory.mktemp("tokens") / "tokens.parquet")
    pq.write_table(table, path, row_group_size=64)
    return path, seqs


def packed_batches(path):
    return (nd.io.ParquetDataset(path).map(lambda d: d["tokens"])
            .apply(nd.experimental.pack(64)).batch(8))


def test_parquet_tokens_pack_into_the_reference_batches(token_file):
    path, seqs = token_file
    rows = [tuple(p[0]) for p in reference_pack([(s,) for s in seqs], [64], 1)]
    want = [tuple(np.stack([r[k] for r in rows[i:i + 8]]) for k in range(3))
            for i in range(0, len(rows), 8)]
    assert_rows(list(packed_batches(path)), want)
    # The label column has nulls: reading it is an error naming it; not reading it is not.
    with pytest.raises(nd.errors.InvalidArgumentError, match="column 'label' is null at row 3"):
        list(nd.io.ParquetDataset(path).map(lambda d: (d["tokens"], d["label"])))


def test_parquet_tokens_pack_resumes_mid_epoch_exactly(token_file):
    path, _ = token_file
    full = list(packed_batches(path))
    it = iter(packed_batches(path))
    head = [next(it) for _ in range(3)]
    again = iter(packed_batches(path))
    again.restore(it.save())
    assert_rows(head + list(again), full)


def reference_buckets(seqs, boundaries, sizes, pad_to_boundary, drop=False, pad=0):
    """tf.data's bucketing in NumPy: bucket b holds lengths in [bounds[b-1], bounds[b]);
    a bucket's batch goes out when full; the rest at the end, by bucket."""
    lows = [-np.inf] + boundaries
    highs = boundaries + [np.inf]
    buckets = [[] for _ in sizes]
    out = []

    def emit(b):
        width = highs[b] - 1 if pad_to_boundary else max(len(s) for s in buckets[b])
        batch = np.full((len(buckets[b]), int(width)), pad, np.int32)
        for j, s in enumerate(buckets[b]):
            batch[j, :len(s)] = s
        out.append(batch)
        buckets[b] = []

    for s in seqs:
        b = next(k for k in range(len(sizes)) if lows[k] <= len(s) < highs[k])
        buckets[b].append(s)
        if len(buckets[b]) == sizes[b]:
            emit(b)
    for b in range(len(sizes)):
        if buckets[b] and not drop:
            emit(b)
    return out


@pytest.mark.parametrize("pad_to_boundary", [False, True])
def test_parquet_tokens_bucket_into_the_reference_batches(token_file, pad_to_boundary):
    path, seqs = token_file
    boundaries, sizes = [16, 32], [6, 4, 3]
    if pad_to_boundary:
        boundaries = [16, 32, 61]
        sizes = [6, 4, 3, 2]
    ds = nd.io.ParquetDataset(path).map(lambda d: d["tokens"]).bucket_by_sequence_length(
        token_count, boundaries, sizes, pad_to_bucket_boundary=pad_to_boundary)
    got = list(ds)
    want = reference_buckets(seqs, boundaries, sizes, pad_to_boundary)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.int32
        np.testing.assert_array_equal(g, w)


def test_parquet_token_lists_flow_through_map_filter_shuffle_and_ragged_batch(token_file):
    path, seqs = token_file
    ds = (nd.io.ParquetDataset(path).map(lambda d: d["tokens"] * 2)
          .filter(lambda x: len(x) % 2 == 0).shuffle(50, seed=3))
    got = sorted(tuple(x.tolist()) for x in ds)
    assert got == sorted(tuple((s * 2).tolist()) for s in seqs if len(s) % 2 == 0)
    first = next(iter(nd.io.ParquetDataset(path, columns=["tokens"]).ragged_batch(5)))
    assert first["tokens"].to_list() == [s.tolist() for s in seqs[:5]]


def test_parquet_tokens_padded_batch_equals_numpy(token_file):
    path, seqs = token_file
    ds = nd.io.ParquetDataset(path, columns=["tokens"]).padded_batch(
        48, padded_shapes={"tokens": [64]}, padding_values={"tokens": np.int32(-1)})
    got = [b["tokens"] for b in ds]
    want = []
    for i in range(0, len(seqs), 48):
        part = seqs[i:i + 48]
        out = np.full((len(part), 64), -1, np.int32)
        for j, s in enumerate(part):
            out[j, :len(s)] = s
        want.append(out)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    with pytest.raises(nd.errors.DataLossError, match="element 2 has shape \\[57\\], larger than "
                                                      "padded shape \\[32\\]"):
        next(iter(nd.io.ParquetDataset(path, columns=["tokens"]).padded_batch(
            4, padded_shapes={"tokens": [32]})))


def test_parquet_tokens_bucketing_resumes_mid_epoch_exactly(token_file):
    path, _ = token_file

    def make():
        return nd.io.ParquetDataset(path).map(lambda d: d["tokens"]).bucket_by_sequence_length(
            token_count, [16, 32], [6, 4, 3])
    full = list(make())
    it = iter(make())
    head = [next(it) for _ in range(7)]
    again = iter(make())
    again.restore(it.save())
    rest = list(again)
    assert len(head) + len(rest) == len(full)
    for g, w in zip(head + rest, full):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("batching", ["ragged", "padded"])
def test_parquet_token_lists_shuffle_and_batch_resume_mid_epoch_exactly(token_file, batching):
    path, _ = token_file

    def make():
        ds = nd.io.ParquetDataset(path, columns=["tokens"]).shuffle(100, seed=5)
        return ds.ragged_batch(9) if batching == "ragged" else ds.padded_batch(9)

    def rows(b):
        return b["tokens"].to_list() if batching == "ragged" else b["tokens"].tolist()
    full = [rows(b) for b in make()]
    it = iter(make())
    head = [rows(next(it)) for _ in range(5)]
    again = iter(make())
    again.restore(it.save())
    assert head + [rows(b) for b in again] == full


@pytest.mark.parametrize("pad_to_boundary,drop", [(False, False), (True, True)])
def test_bucketing_a_chunk_at_a_time_equals_the_reference_across_chunks(pad_to_boundary, drop):
    seqs = sequences(200, 0, 40, seed=4)
    boundaries, sizes = ([8, 20, 41], [5, 3, 2, 4]) if pad_to_boundary else ([8, 20], [5, 3, 2])
    options = nd.Options()
    options.chunk_rows = 7          # buckets fill across input chunks
    ds = ragged(seqs).bucket_by_sequence_length(
        token_count, boundaries, sizes, padding_values=np.int32(-1),
        pad_to_bucket_boundary=pad_to_boundary, drop_remainder=drop).with_options(options)
    assert "bucket_by_sequence_length(" in ds.compile().explain()
    want = reference_buckets(seqs, boundaries, sizes, pad_to_boundary, drop=drop, pad=-1)
    got = list(ds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    with pytest.raises(nd.errors.InvalidArgumentError, match=r"shorter than max\(bucket_boundaries\)"):
        list(ragged(seqs).bucket_by_sequence_length(token_count, [8], [2, 2],
                                                    pad_to_bucket_boundary=True))


def test_bucketing_dict_elements_calls_the_length_function_per_row():
    seqs = sequences(60, 1, 20, seed=9)
    ds = ragged(seqs).map(lambda x: {"ids": x, "n": np.int64(len(x))})
    out = list(ds.bucket_by_sequence_length(lambda e: e["n"], [6, 12], [4, 3, 2],
                                            padded_shapes={"ids": [24], "n": []}))
    want = reference_buckets(seqs, [6, 12], [4, 3, 2], False)
    assert len(out) == len(want)
    for g, w in zip(out, want):
        np.testing.assert_array_equal(g["ids"][:, :w.shape[1]], w)
        assert g["ids"].shape[1] == 24 and (g["ids"][:, w.shape[1]:] == 0).all()
        np.testing.assert_array_equal(g["n"], (w != 0).sum(axis=1))


def test_packed_rows_in_a_saved_state_are_checked_against_their_buffer(token_file):
    from nbdata import state_check
    from nbdata.chunks import Chunk, PackedRows
    path, _ = token_file
    it = iter(nd.io.ParquetDataset(path, columns=["tokens"]).padded_batch(7))
    next(it)
    again = iter(nd.io.ParquetDataset(path, columns=["tokens"]).padded_batch(7))
    again.restore(it.save())           # held-back packed rows travel as one buffer
    assert np.array_equal(next(again)["tokens"], next(it)["tokens"])
    spec = {"tokens": nd.TensorSpec((None,), np.int32)}
    data, offsets = np.arange(6, dtype=np.int32), np.array([0, 2, 6], np.int64)
    good = PackedRows(data, offsets, np.array([[2], [4]], np.int64))
    assert state_check.rows(Chunk([good], 2), spec, "pieces") is not None
    for bad in (PackedRows(data, offsets * 100, np.array([[200], [400]], np.int64)),
                PackedRows(data, offsets, np.array([[2], [5]], np.int64))):
        with pytest.raises(nd.errors.InvalidArgumentError, match="offsets do not match"):
            state_check.rows(Chunk([bad], 2), spec, "pieces")


def test_token_lists_reach_pack_padding_bucketing_and_ragged_batches_without_row_objects(
        token_file, monkeypatch):
    """The rows of an Arrow list column stay one buffer and offsets: making the rows' views
    (one Python object per row) fails the test."""
    from nbdata.chunks import PackedRows
    path, seqs = token_file

    def no_views(self):
        raise AssertionError("per-row views of packed rows were made")
    want = [list(b) for b in packed_batches(path)]
    monkeypatch.setattr(PackedRows, "_views", no_views)
    tokens = nd.io.ParquetDataset(path).map(lambda d: d["tokens"])
    assert_rows([list(b) for b in packed_batches(path)], want)
    assert sum(len(b) for b in tokens.padded_batch(32)) == len(seqs)
    # shuffle's buffer keeps the rows in one arena (handles move through it)
    shuffled = tokens.shuffle(64, seed=2).padded_batch(32)
    assert sum(len(b) for b in shuffled) == len(seqs)
    assert sum(len(b) for b in tokens.bucket_by_sequence_length(
        token_count, [16, 32], [8, 8, 8])) == len(seqs)
    assert sum(b["tokens"].nrows() for b in nd.io.ParquetDataset(
        path, columns=["tokens"]).ragged_batch(16)) == len(seqs)


def test_shuffled_token_lists_keep_each_row_with_its_own_values(token_file):
    """The buffer shuffle of token lists (rows in one arena, moved as handles) gives the
    order of the same shuffle over the rows' ids, each row with its own tokens, on the
    way in, while full and while draining, through compactions of the arena."""
    path, seqs = token_file
    ids = nd.Dataset.range(len(seqs)).shuffle(37, seed=9)
    table = nd.io.ParquetDataset(path, columns=["tokens"]).map(lambda d: d["tokens"])
    got = [x.tolist() for x in table.shuffle(37, seed=9)]
    assert got == [seqs[int(i)].tolist() for i in ids]
    # generator rows (one array each) take the same path
    gen = nd.Dataset.from_generator(lambda: iter(seqs), output_signature=nd.TensorSpec(
        (None,), np.int32)).shuffle(37, seed=9)
    assert [x.tolist() for x in gen] == got


def test_shuffled_generator_token_lists_resume_mid_epoch_exactly(token_file):
    """A source without random access: the saved state holds the buffered rows themselves
    (taken out of the arena), and a restore puts them back."""
    _, seqs = token_file

    def make():
        return nd.Dataset.from_generator(lambda: iter(seqs), output_signature=nd.TensorSpec(
            (None,), np.int32)).shuffle(23, seed=4)
    full = [x.tolist() for x in make()]
    it = iter(make())
    head = [next(it).tolist() for _ in range(31)]
    again = iter(make())
    again.restore(it.save())
    assert head + [x.tolist() for x in again] == full


def test_a_compiled_length_function_raises_what_python_raises():
    """bucket_by_sequence_length compiles its length function over the packed rows: an
    index past a short row raises IndexError, as the function does in Python, never a
    value read past the row."""
    seqs = [np.arange(n, dtype=np.int32) for n in (3, 1, 4)]
    ds = nd.Dataset.from_generator(lambda: iter(seqs), output_signature=nd.TensorSpec(
        (None,), np.int32))
    with pytest.raises(IndexError, match="out of bounds"):
        list(ds.bucket_by_sequence_length(lambda x: x[2], [2], [2, 2]))
    with pytest.raises(IndexError):
        seqs[1][2]


def test_a_filter_on_token_lists_runs_compiled_over_the_packed_rows(token_file, monkeypatch):
    """filter(lambda x: len(x) > k) over an Arrow list column: one compiled call per chunk
    over the values and offsets (no per-row views, checked), the rows kept equal to
    Python's; a predicate that raises on a row raises Python's error for it; one that
    returns no bool stays in Python (its error names the op)."""
    from nbdata.chunks import PackedRows
    path, seqs = token_file
    tokens = nd.io.ParquetDataset(path, columns=["tokens"]).map(lambda d: d["tokens"])
    want = [s.tolist() for s in seqs if len(s) > 20 and s[0] % 2 == 0]

    def no_views(self):
        raise AssertionError("per-row views of packed rows were made")
    with monkeypatch.context() as m:
        m.setattr(PackedRows, "_views", no_views)
        m.setattr(PackedRows, "__getitem__", no_views)   # not one row's view either
        batches = list(tokens.filter(lambda x: len(x) > 20 and x[0] % 2 == 0).ragged_batch(64))
    assert [r for b in batches for r in b.to_list()] == want
    short = next(i for i, s in enumerate(seqs) if len(s) < 3)
    with pytest.raises(IndexError):
        seqs[short][2]
    with pytest.raises(nd.errors.InvalidArgumentError, match="raised IndexError: index 2 is "
                                                             "out of bounds"):
        list(tokens.filter(lambda x: x[2] >= 0))
    with pytest.raises(nd.errors.InvalidArgumentError, match="must return a scalar bool"):
        list(tokens.filter(lambda x: len(x)))


def test_a_length_keeping_map_on_token_lists_runs_compiled(token_file, monkeypatch):
    """map over an Arrow list column with a function that keeps each row's length and
    whose compiled dtype is the traced one: one compiled call per chunk, no row objects;
    a function Numba types otherwise (x * 2: int64 where NumPy keeps int32) or that
    changes a row's length runs in Python, with NumPy's dtypes and values."""
    from nbdata.chunks import PackedRows
    path, seqs = token_file
    tokens = nd.io.ParquetDataset(path, columns=["tokens"]).map(lambda d: d["tokens"])

    def no_views(self, *args):
        raise AssertionError("per-row views of packed rows were made")
    with monkeypatch.context() as m:
        m.setattr(PackedRows, "_views", no_views)
        m.setattr(PackedRows, "__getitem__", no_views)
        batches = list(tokens.map(lambda x: np.abs(x - np.int32(7))).ragged_batch(64))
    assert [r for b in batches for r in b.to_list()] == \
        [np.abs(s - np.int32(7)).tolist() for s in seqs]
    doubled = list(tokens.map(lambda x: x * 2))
    assert all(d.dtype == np.int32 for d in doubled)
    assert [d.tolist() for d in doubled] == [(s * 2).tolist() for s in seqs]
    tails = list(tokens.map(lambda x: x[1:]))
    assert [t.tolist() for t in tails] == [s[1:].tolist() for s in seqs]
