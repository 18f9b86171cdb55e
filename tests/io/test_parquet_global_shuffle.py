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
