"""Dataset.from_arrow and nd.io.ParquetDataset: the same elements as pyarrow reading the
data whole and from_tensor_slices over its columns, fused map/filter/batch chains,
zero-copy columns, strings, fixed-size lists, the nulls rule, lazy row-group reads,
save/restore by row position, shuffles, split sources, and the missing extra."""

import os
import sys

import numpy as np
import pytest

import nbdata as nd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ops"))
from equivalence import assert_same, fused, fusing, reference  # noqa: E402

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pads = pytest.importorskip("pyarrow.dataset")

from nbdata.chunks import StringColumn  # noqa: E402
from nbdata.compiler.executor import ExecContext  # noqa: E402
from nbdata.ops.arrow_source import FragmentRows  # noqa: E402

N = 1500
GROUP = 350          # rows per row group: 5 groups, the last one short


def make_table(n=N):
    rng = np.random.default_rng(7)
    cols = {f"f{k}": rng.standard_normal(n).astype(np.float32) for k in range(3)}
    cols["i"] = np.arange(n, dtype=np.int64)
    cols["s"] = pa.array([f"r{j}" * (j % 4) for j in range(n)])
    vec = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(2 * n, dtype=np.float64)), 2)
    return pa.table(cols).append_column("v", vec)


@pytest.fixture(scope="module")
def table():
    return make_table()


@pytest.fixture(scope="module")
def path(tmp_path_factory, table):
    p = str(tmp_path_factory.mktemp("parquet") / "t.parquet")
    pq.write_table(table, p, row_group_size=GROUP)
    return p


def columns_of(table):
    """The table's columns as from_tensor_slices takes them (strings: bytes objects)."""
    out = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_fixed_size_list(col.type):
            out[name] = np.stack([np.asarray(v, np.float64) for v in col.to_pylist()])
        elif pa.types.is_string(col.type):
            out[name] = np.array([v.encode() for v in col.to_pylist()], dtype=object)
        else:
            out[name] = col.to_numpy()
    return out


def scaled(e):
    return (e["f0"] * 2.0 + e["f1"], e["i"], e["v"] * 3.0)


def kept(a, i, v):
    return i % 3 != 0


def chain(ds):
    return ds.map(scaled).filter(kept).batch(64)


def sources(table, path):
    return {
        "parquet": nd.io.ParquetDataset(path),
        "parquet_parallel": nd.io.ParquetDataset(path, num_parallel_reads=3),
        "table": nd.Dataset.from_arrow(table),
        "table_batches": nd.Dataset.from_arrow(pa.Table.from_batches(table.to_batches(max_chunksize=400))),
        "pyarrow_dataset": nd.Dataset.from_arrow(pads.dataset(path, format="parquet")),
    }


# ------------------------------------------------------------------ values

def test_elements_equal_pyarrow_read_and_from_tensor_slices(table, path):
    whole = pq.read_table(path)
    arrays = nd.Dataset.from_tensor_slices(columns_of(whole))
    assert_same(list(nd.io.ParquetDataset(path)), list(arrays))
    expected = list(arrays.batch(N))
    for name, ds in sources(table, path).items():
        assert_same(list(ds.batch(N)), expected, name)
        assert ds.cardinality() == N
        assert ds.element_spec == {"f0": nd.TensorSpec((), np.float32), "f1": nd.TensorSpec((), np.float32),
                                   "f2": nd.TensorSpec((), np.float32), "i": nd.TensorSpec((), np.int64),
                                   "s": nd.TensorSpec((), nd.string), "v": nd.TensorSpec((2,), np.float64)}
    rows = whole.slice(0, 5).to_pylist()
    got = list(nd.io.ParquetDataset(path).take(5))
    assert [e["s"] for e in got] == [r["s"].encode() for r in rows]
    assert [e["v"].tolist() for e in got] == [r["v"] for r in rows]


def test_strings_batch_as_bytes(table, path):
    batch = next(iter(nd.io.ParquetDataset(path, columns=["s"]).batch(5)))
    assert_same(batch, {"s": np.array([b"", b"r1", b"r2r2", b"r3r3r3", b""], dtype=object)})


def test_map_filter_batch_fuses_into_one_kernel(table, path):
    expected = list(reference(chain(nd.Dataset.from_tensor_slices(columns_of(table)))))
    for name, ds in sources(table, path).items():
        pipe = fusing(chain(ds)).compile()
        plan = pipe.explain().splitlines()[1]
        # A one-batch table is read in place; others reach the kernel as chunks.
        head = {"table": "fused_stage[from_arrow(table of 1500 rows in 1 record batches",
                "table_batches": "fused_stage[the chunks of from_arrow(table of 1500 rows in 4",
                "pyarrow_dataset": "fused_stage[the chunks of from_arrow(["}.get(
                    name, "fused_stage[the chunks of ParquetDataset([")
        assert plan.startswith(head), (name, plan)
        assert plan.endswith("-> map(scaled) [elementwise, inlined] -> filter(kept) [elementwise, "
                             "inlined] -> batch(batch_size=64, drop_remainder=False)]"), plan
        assert_same(list(pipe), expected, name)
        assert pipe.stats().fallback_rows == 0
    assert_same(list(reference(chain(nd.io.ParquetDataset(path)))), expected)


def test_numbers_and_strings_are_zero_copy_views_of_arrow_buffers():
    table = pa.table({"x": np.arange(10, dtype=np.float32), "s": pa.array(["ab", "c"] * 5, pa.large_string())})
    node = nd.Dataset.from_arrow(table)._node
    it = node.open_chunks(ExecContext(nd.Options()), None)
    chunk = it.next(4)
    s, x = chunk.columns       # leaves in sorted key order
    assert isinstance(s, StringColumn)
    batch = table.to_batches()[0]
    assert s.data.ctypes.data == batch.column(1).buffers()[2].address
    assert s.offsets.ctypes.data == batch.column(1).buffers()[1].address
    assert x.ctypes.data == batch.column(0).buffers()[1].address
    assert s.values() == [b"ab", b"c", b"ab", b"c"] and x.tolist() == [0, 1, 2, 3]


def test_fixed_size_lists_and_tensors_are_fixed_shape_leaves():
    nested = pa.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[9, 10], [11, 12]]],
                      pa.list_(pa.list_(pa.int16(), 2), 2))
    tensor = pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(18, dtype=np.float32).reshape(3, 2, 3))
    ds = nd.Dataset.from_arrow(pa.table({"n": nested, "t": tensor}))
    assert ds.element_spec == {"n": nd.TensorSpec((2, 2), np.int16), "t": nd.TensorSpec((2, 3), np.float32)}
    got = list(ds.skip(1))     # a sliced list array: the rows' own values
    assert_same(got, [{"n": np.array([[5, 6], [7, 8]], np.int16),
                       "t": np.arange(6, 12, dtype=np.float32).reshape(2, 3)},
                      {"n": np.array([[9, 10], [11, 12]], np.int16),
                       "t": np.arange(12, 18, dtype=np.float32).reshape(2, 3)}])
    assert_same(fused(ds.map(lambda e: e["t"] * 2.0).batch(3)),
                [np.arange(18, dtype=np.float32).reshape(3, 2, 3) * 2.0])


def test_other_types_and_bools_dictionaries_binaries():
    t = pa.table({"b": [True, False, True], "bin": pa.array([b"\x00\x01", b"", b"z"], pa.binary()),
                  "d": pa.array(["a", "b", "a"]).dictionary_encode(), "h": pa.array([1, 2, 3], pa.uint8())})
    assert_same(list(nd.Dataset.from_arrow(t).batch(3)),
                [{"b": np.array([True, False, True]), "bin": np.array([b"\x00\x01", b"", b"z"], object),
                  "d": np.array([b"a", b"b", b"a"], object), "h": np.array([1, 2, 3], np.uint8)}])
    with pytest.raises(nd.errors.UnimplementedError,
                       match=r"column 'l' has Arrow type list<item: list<item: int64>>"):
        nd.Dataset.from_arrow(pa.table({"l": pa.array([[[1]], [[2, 3]]])}))


# ------------------------------------------------------------------- nulls

NULLS = pa.table({"a": pa.array([1, 2, None, 4, 5], pa.int32()),
                  "s": pa.array(["x", None, "z", "w", "v"]),
                  "v": pa.array([[1, 2], [3, None], [5, 6], None, [9, 10]], pa.list_(pa.float32(), 2))})


def test_a_null_raises_naming_column_and_row_after_the_rows_before_it():
    it = iter(nd.Dataset.from_arrow(NULLS, columns=["a"]))
    assert [int(next(it)["a"]) for _ in range(2)] == [1, 2]
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"from_arrow: column 'a' is null at row 2; give the column a fill "
                             r"value with null_values=\{'a': \.\.\.\}"):
        next(it)
    assert [int(e["a"]) for e in it] == [4, 5]          # goes on after it
    skipped = nd.Dataset.from_arrow(NULLS, columns=["a"]).ignore_errors()
    assert [int(e["a"]) for e in skipped] == [1, 2, 4, 5]
    with pytest.raises(nd.errors.InvalidArgumentError, match="column 'v' is null at row 1"):
        list(nd.Dataset.from_arrow(NULLS, columns=["v"]))   # a null item inside a list


def test_list_columns_are_ragged_leaves_with_nulls_filled_or_raised():
    t = pa.table({"t": pa.array([[1, 2], [3], None, [4, 5, 6], [7]], pa.list_(pa.int64())),
                  "u": pa.array([[1], [2, None], [3], [4], [5]], pa.large_list(pa.float32()))})
    assert nd.Dataset.from_arrow(t).element_spec == {
        "t": nd.TensorSpec((None,), np.int64), "u": nd.TensorSpec((None,), np.float32)}
    sliced = nd.Dataset.from_arrow(t.slice(1, 3), columns=["t"], null_values={"t": [9, 9]})
    assert [e["t"].tolist() for e in sliced] == [[3], [9, 9], [4, 5, 6]]
    it = iter(nd.Dataset.from_arrow(t, columns=["u"]))
    assert next(it)["u"].tolist() == [1.0]
    with pytest.raises(nd.errors.InvalidArgumentError, match="column 'u' is null at row 1"):
        next(it)                                   # a null item inside a list
    assert [e["u"].tolist() for e in it] == [[3.0], [4.0], [5.0]]
    with pytest.raises(nd.errors.InvalidArgumentError, match=r"null_values\['t'\] must be a 1-D"):
        nd.Dataset.from_arrow(t, null_values={"t": [[1]]})


def test_nulls_count_only_in_the_columns_the_pipeline_reads():
    ds = nd.Dataset.from_arrow(NULLS.append_column("t", pa.array([[1], [], [2, 3], [4], []],
                                                                 pa.list_(pa.int32()))))
    tokens = [[1], [], [2, 3], [4], []]
    reads_t = ds.map(lambda d: d["t"])                         # a recorded function
    for run in (reads_t, reference(reads_t), fusing(reads_t)):
        assert [x.tolist() for x in run] == tokens
    in_python = ds.filter(lambda d: len(d["t"]) > 0).map(lambda d: d["t"])    # not recorded
    assert [x.tolist() for x in in_python] == [[1], [2, 3], [4]]
    assert [int(x) for x in ds.shuffle(5, seed=1).map(lambda d: d["t"].sum())] != []
    for reads_a in (ds.map(lambda d: d["a"] + d["t"].sum()), ds, ds.map(lambda d: d),
                    ds.filter(lambda d: d["a"] > 0).map(lambda d: d["t"])):
        with pytest.raises(nd.errors.InvalidArgumentError, match="column '[asv]' is null at row [12]"):
            list(reads_a)


def test_null_in_parquet_names_the_file_and_row_group(tmp_path):
    path = str(tmp_path / "n.parquet")
    pq.write_table(NULLS.select(["a"]), path, row_group_size=2)
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"ParquetDataset: column 'a' is null at row 2 \(.*n\.parquet row group 1, "
                             r"its row 0\)"):
        list(nd.io.ParquetDataset(path))


def test_null_values_fill_numbers_strings_and_lists():
    ds = nd.Dataset.from_arrow(NULLS, null_values={"a": -1, "s": "?", "v": [7, 8]})
    assert_same(list(ds.batch(5)), [{
        "a": np.array([1, 2, -1, 4, 5], np.int32),
        "s": np.array([b"x", b"?", b"z", b"w", b"v"], object),
        "v": np.array([[1, 2], [3, 8], [5, 6], [7, 8], [9, 10]], np.float32)}])
    with pytest.raises(nd.errors.InvalidArgumentError, match=r"null_values\['a'\] = 1.5 does not fit"):
        nd.Dataset.from_arrow(NULLS, null_values={"a": 1.5})
    with pytest.raises(nd.errors.InvalidArgumentError, match="null_values names 'q'"):
        nd.Dataset.from_arrow(NULLS, null_values={"q": 1})
    with pytest.raises(TypeError, match=r"null_values\['s'\] must be bytes or str"):
        nd.Dataset.from_arrow(NULLS, null_values={"s": 3})


def test_argument_errors():
    with pytest.raises(nd.errors.InvalidArgumentError, match=r"no column 'zz'; the columns are \['a', 's', 'v'\]"):
        nd.Dataset.from_arrow(NULLS, columns=["zz"])
    with pytest.raises(TypeError, match="columns must be a list of column names"):
        nd.Dataset.from_arrow(NULLS, columns="a")
    with pytest.raises(nd.errors.InvalidArgumentError, match="num_parallel_reads must be >= 1"):
        nd.Dataset.from_arrow(NULLS, num_parallel_reads=0)
    with pytest.raises(TypeError, match="expected a pyarrow.Table"):
        nd.Dataset.from_arrow({"a": [1]})
    with pytest.raises(nd.errors.NotFoundError, match="missing.parquet"):
        nd.io.ParquetDataset("/nonexistent/missing.parquet")
    with pytest.raises(nd.errors.InvalidArgumentError, match="batch_rows must be >= 1"):
        nd.io.ParquetDataset(__file__, batch_rows=0)


def test_missing_pyarrow_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(nd.errors.UnimplementedError, match=r"pip install 'nbdata\[arrow\]'"):
        nd.Dataset.from_arrow(object())
    with pytest.raises(nd.errors.UnimplementedError, match=r"pip install 'nbdata\[arrow\]'"):
        nd.io.ParquetDataset(__file__)


# ------------------------------------------------------------ reading lazily

def test_row_groups_are_read_one_at_a_time_as_needed(path, monkeypatch):
    read = []
    original = FragmentRows.read

    def counting(self, u, names, op):
        read.append(u)
        return original(self, u, names, op)

    monkeypatch.setattr(FragmentRows, "read", counting)
    it = iter(nd.io.ParquetDataset(path, columns=["i"]))
    assert [int(next(it)["i"]) for _ in range(GROUP + 1)] == list(range(GROUP + 1))
    assert read == [0, 1]


def test_batch_rows_bounds_the_rows_decoded_at_a_time(path):
    node = nd.io.ParquetDataset(path, columns=["i"], batch_rows=256)._node
    it = node.open_chunks(ExecContext(nd.Options()), None)
    sizes = []
    while (chunk := it.next(10_000)) is not None:
        sizes.append(chunk.n)
    assert max(sizes) == 256 and sum(sizes) == N


def test_filters_keep_what_pyarrow_keeps(path):
    for filters in ([("i", ">=", 2500)], [[("i", "<", 10)], [("i", ">", 2990)]], pc_expression()):
        ds = nd.io.ParquetDataset(path, columns=["i", "s"], filters=filters)
        want = pq.read_table(path, columns=["i", "s"], filters=filters)
        assert [int(e["i"]) for e in ds] == want.column("i").to_pylist()
        assert ds.cardinality() == nd.UNKNOWN
        assert [int(b[1]) for b in fused(ds.map(lambda e: (e["i"] * 2, e["i"])))] == \
            want.column("i").to_pylist()
    with pytest.raises(nd.errors.InvalidArgumentError, match="filters"):
        nd.io.ParquetDataset(path, filters=[("nope", "=", 1)])


def pc_expression():
    import pyarrow.compute as pc
    return (pc.field("i") > 1200) & (pc.field("i") < 1300)


# ------------------------------------------------------------ save / restore

def plain(batch):
    return [np.asarray(v).tolist() for v in batch]


@pytest.mark.parametrize("name", ["parquet", "parquet_parallel", "table", "table_batches"])
def test_save_and_restore_by_row_position(table, path, name):
    ds = fusing(chain(sources(table, path)[name]))
    full = [plain(b) for b in ds]
    for k in (1, 7, len(full)):         # batch 7 ends inside the third row group
        it = iter(ds)
        head = [plain(next(it)) for _ in range(k)]
        state = it.save()
        assert head + [plain(b) for b in it] == full
        again = iter(ds)
        again.restore(state)
        assert [plain(b) for b in again] == full[k:], (name, k)
    rows = nd.io.ParquetDataset(path, columns=["i"])
    it = iter(rows)
    for _ in range(GROUP + 3):
        next(it)
    again = iter(rows)
    again.restore(it.save())
    assert int(next(again)["i"]) == GROUP + 3


# ------------------------------------------------------------ shuffles, splits

def test_shuffles_give_the_order_of_the_same_rows_in_memory(table, path):
    arrays = nd.Dataset.from_tensor_slices(columns_of(table))
    def order(ds):
        return next(iter(ds.batch(N)))["i"].tolist()

    want = order(arrays.shuffle(500, seed=3))
    for ds in (nd.Dataset.from_arrow(table), nd.io.ParquetDataset(path)):
        assert order(ds.shuffle(500, seed=3)) == want
    want = order(nd.experimental.global_shuffle(arrays, seed=4))
    assert want != sorted(want)
    for ds in (nd.Dataset.from_arrow(table), nd.io.ParquetDataset(path)):
        assert order(nd.experimental.global_shuffle(ds, seed=4)) == want
    # A table is shuffled over row numbers, its rows read in place by the kernel; a
    # Parquet file is read in order into the shuffle's buffer.
    in_place = fusing(nd.Dataset.from_arrow(table).shuffle(500, seed=3).map(scaled)).compile()
    assert "fused_stage[from_arrow(table" in in_place.explain() and "over row numbers" in in_place.explain()
    buffered = fusing(nd.io.ParquetDataset(path).shuffle(500, seed=3).map(scaled)).compile()
    assert "over row numbers" not in buffered.explain()
    assert [int(b[1]) for b in buffered] == [int(b[1]) for b in in_place]


def test_split_sources_read_the_rows_of_their_splits(table, path):
    from nbdata.distribute.splits import SplitSource, replace_node, splittable_source
    splits = [(0, GROUP), (GROUP, 2 * GROUP), (1400, 1500), (1000, 1010)]
    for ds in (chain(nd.io.ParquetDataset(path)), chain(nd.Dataset.from_arrow(table))):
        node = ds._node
        source = splittable_source(node)
        assert source.op in ("ParquetDataset", "from_arrow")
        worker = replace_node(node, source, SplitSource(
            source, lambda key, k: splits[k] if k < len(splits) else None))
        got = np.concatenate([b[1] for b in fusing(nd.Dataset(worker))])
        want = np.concatenate([np.arange(a, b) for a, b in splits])
        assert got.tolist() == want[want % 3 != 0].tolist()


def test_record_batch_reader_is_read_once(table):
    def reader():
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=500))
    ds = nd.Dataset.from_arrow(reader())
    assert ds.cardinality() == nd.UNKNOWN
    it = iter(ds)
    assert int(next(it)["i"]) == 0       # stopped within the first batch: kept for the next run
    del it
    assert next(iter(ds.batch(N)))["i"].tolist() == list(range(N))
    with pytest.raises(nd.errors.FailedPreconditionError, match="a RecordBatchReader is read once"):
        list(ds)
    assert_same(fused(chain(nd.Dataset.from_arrow(reader()))),
                list(reference(chain(nd.Dataset.from_arrow(table)))))


def test_row_groups_are_the_splits_of_a_distributed_epoch(path):
    # A Parquet source's row groups are its natural splits: the distribute job cuts the
    # epoch's rows at them (one row group a split, so a worker decodes only its own),
    # also for the rows left when a position is restored inside a row group.
    from nbdata.distribute.splits import plan_splits, splittable_source
    source = splittable_source(chain(nd.io.ParquetDataset(path))._node)
    bounds = source.split_boundaries()
    assert bounds == [0, GROUP, 2 * GROUP, 3 * GROUP, 4 * GROUP]
    assert plan_splits([[0, N]], N, bounds) == [(0, 350), (350, 700), (700, 1050),
                                               (1050, 1400), (1400, N)]
    assert plan_splits([[100, 800], [1450, N]], N, bounds) == [(100, 350), (350, 700),
                                                             (700, 800), (1450, N)]
    assert not hasattr(splittable_source(chain(nd.Dataset.from_arrow(
        make_table()))._node), "split_boundaries")   # a table in memory: any split size
