"""global_shuffle over Parquet files of several row groups: every row once, each row's
columns (numbers, fixed-size lists, strings, variable-length lists) taken together from
the same source row, whichever row groups a chunk of positions falls in."""

import numpy as np
import pytest

import nbdata as nd

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _row(i: int) -> dict:
    return {"id": i, "x": np.float32(i) / 4, "v": [i, -i], "s": f"r{i}".encode(),
            "tokens": list(range(i % 5))}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("gs")
    paths = []
    for k, (lo, hi) in enumerate([(0, 700), (700, 1000), (1000, 2300)]):
        ids = np.arange(lo, hi)
        table = pa.table({
            "id": ids.astype(np.int64), "x": ids.astype(np.float32) / 4,
            "v": pa.FixedSizeListArray.from_arrays(pa.array(np.stack([ids, -ids], 1).ravel()), 2),
            "s": pa.array([f"r{i}".encode() for i in ids], pa.binary()),
            "tokens": pa.array([list(range(i % 5)) for i in ids], pa.list_(pa.int32()))})
        paths.append(str(d / f"part{k}.parquet"))
        pq.write_table(table, paths[-1], row_group_size=256)   # 12 row groups in all
    return paths


@pytest.mark.parametrize("columns", [["id", "x", "v"], ["id", "x", "v", "s", "tokens"]])
def test_every_row_once_with_its_own_columns(files, columns):
    ds = nd.experimental.global_shuffle(nd.io.ParquetDataset(files, columns=columns), seed=7)
    seen = []
    for e in ds:
        i = int(e["id"])
        want = _row(i)
        assert e["x"] == want["x"] and e["v"].tolist() == want["v"]
        if "s" in columns:
            assert e["s"] == want["s"] and np.asarray(e["tokens"]).tolist() == want["tokens"]
        seen.append(i)
    assert sorted(seen) == list(range(2300))
    assert seen != sorted(seen)
    # the same order from an in-memory table of the same rows (one permutation of positions)
    table = pa.concat_tables([pq.read_table(f, columns=columns) for f in files])
    again = nd.experimental.global_shuffle(nd.Dataset.from_arrow(table), seed=7)
    assert [int(e["id"]) for e in again] == seen


def test_batches_of_positions_across_row_groups(files):
    ds = nd.experimental.global_shuffle(nd.io.ParquetDataset(files, columns=["id", "x"]),
                                        seed=3).batch(500)
    batches = list(ds)
    ids = np.concatenate([b["id"] for b in batches])
    np.testing.assert_array_equal(np.sort(ids), np.arange(2300))
    for b in batches:
        np.testing.assert_array_equal(b["x"], b["id"].astype(np.float32) / 4)


@pytest.mark.parametrize("one_file", [True, False])
def test_strings_a_fused_map_drops_are_never_gathered(files, one_file, monkeypatch):
    """The rows of a string column are taken when first read: a fused map that drops
    the strings gathers none of them (in a chunk within one row group or across
    several); a pipeline that keeps them gets each row's own string."""
    from nbdata import chunks
    gathered = []
    real = chunks.gather_strings
    monkeypatch.setattr(chunks, "gather_strings",
                        lambda *a: gathered.append(len(a[2])) or real(*a))
    paths = files[:1] if one_file else files
    n = 700 if one_file else 2300
    options = nd.Options()
    options.fusion_min_rows = 0

    def shuffled():
        return nd.experimental.global_shuffle(
            nd.io.ParquetDataset(paths, columns=["id", "s"]), seed=3)

    pipe = shuffled().map(lambda e: e["id"] * 2).batch(64).with_options(options).compile()
    ids = np.concatenate(list(pipe))
    assert sorted(ids.tolist()) == list(range(0, 2 * n, 2))
    assert "fused_stage" in pipe.explain() and gathered == []
    kept = shuffled().map(lambda e: (e["id"], e["s"])).with_options(options)
    rows = [(int(i), bytes(s)) for i, s in kept]
    assert gathered and sorted(rows) == [(i, f"r{i}".encode()) for i in range(n)]
    assert [i for i, _ in rows] == (ids // 2).tolist()   # the same permutation
