"""parquet: a Parquet file of 8 float32, 1 int64 and 1 string column -> map (x - 0.5) * 2 on
the floats, filter i % 3 != 0, batch(256); against pyarrow + NumPy, tf.data and Hugging
Face datasets reading the same columns."""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from perf.files import cached_file
from perf.measure import Implementation, Workload, nbdata_options

BATCH = 256
FULL_ROWS = 5_000_000
QUICK_ROWS = 500_000
FLOATS = [f"f{k}" for k in range(8)]
COLUMNS = FLOATS + ["i", "s"]


def values(n: int) -> dict:
    """The columns of the file: uniform float32s, i = 0..n-1, s = "item-<i>"."""
    rng = np.random.default_rng(11)
    out = {c: rng.random(n, dtype=np.float32) for c in FLOATS}
    out["i"] = np.arange(n, dtype=np.int64)
    return out


def data_file(n: int) -> str:
    """The file as pyarrow writes it by default (row groups of 1Mi rows)."""
    def write(path):
        import pyarrow as pa
        import pyarrow.parquet as pq
        cols = values(n)
        cols["s"] = pa.array(np.char.add("item-", np.arange(n).astype(str)).astype(object))
        pq.write_table(pa.table(cols), path)
    return cached_file(f"parquet-{n}.parquet", write)


def scale(e):
    return tuple((e[c] - 0.5) * 2.0 for c in FLOATS) + (e["i"],)


def keep(*row):
    return row[8] % 3 != 0


def numpy_batches(columns: dict):
    """map/filter on whole columns, then slices of BATCH rows (the strings are read and
    dropped, as the map drops them)."""
    kept = columns["i"] % 3 != 0
    out = [(columns[c][kept] - np.float32(0.5)) * np.float32(2.0) for c in FLOATS]
    out.append(columns["i"][kept])
    for s in range(0, len(out[-1]), BATCH):
        yield tuple(o[s:s + BATCH] for o in out)


def build(quick: bool) -> Workload:
    n_rows = QUICK_ROWS if quick else FULL_ROWS

    @functools.cache
    def path(n):
        return data_file(n)

    def nbdata_row(reads):
        def prepare(n):
            import nbdata as nd
            ds = (nd.io.ParquetDataset(path(n), columns=COLUMNS, num_parallel_reads=reads)
                  .map(scale).filter(keep).batch(BATCH)
                  .with_options(nbdata_options(nd)))
            pipe = ds.compile()
            return lambda: pipe
        return prepare

    def nbdata_global_shuffle(n):
        import nbdata as nd
        ds = nd.experimental.global_shuffle(
            nd.io.ParquetDataset(path(n), columns=COLUMNS), seed=5)
        pipe = (ds.map(scale).filter(keep).batch(BATCH)
                .with_options(nbdata_options(nd))).compile()
        return lambda: pipe

    def pyarrow_permuted(n):
        import pyarrow.parquet as pq
        rng = np.random.default_rng(5)

        def epoch():
            table = pq.read_table(path(n), columns=COLUMNS)
            order = rng.permutation(table.num_rows)
            yield from numpy_batches({c: table.column(c).to_numpy()[order]
                                      for c in COLUMNS[:-1]})
        return epoch

    def pyarrow_whole(n):
        import pyarrow.parquet as pq

        def epoch():
            table = pq.read_table(path(n), columns=COLUMNS)
            yield from numpy_batches({c: table.column(c).to_numpy() for c in COLUMNS[:-1]})
        return epoch

    def pyarrow_stream(n):
        import pyarrow.parquet as pq

        def epoch():
            for batch in pq.ParquetFile(path(n)).iter_batches(columns=COLUMNS):
                yield from numpy_batches({c: batch.column(c).to_numpy() for c in COLUMNS[:-1]})
        return epoch

    def tf_columns(n):
        import pyarrow.parquet as pq
        table = pq.read_table(path(n), columns=COLUMNS)
        cols = {c: table.column(c).to_numpy() for c in COLUMNS[:-1]}
        cols["s"] = np.array(table.column("s").to_pylist(), dtype=object)
        return cols

    def tf_per_element(n):
        import tensorflow as tf
        ds = (tf.data.Dataset.from_tensor_slices(tf_columns(n))
              .map(scale, num_parallel_calls=tf.data.AUTOTUNE)
              .filter(lambda *row: row[8] % 3 != 0)
              .batch(BATCH)
              .prefetch(tf.data.AUTOTUNE))
        return ds.as_numpy_iterator

    def tf_batch_then_map(n):
        import tensorflow as tf

        def scale_and_mask(e):
            kept = e["i"] % 3 != 0
            return tuple(tf.boolean_mask((e[c] - 0.5) * 2.0, kept) for c in FLOATS) + (
                tf.boolean_mask(e["i"], kept),)

        ds = (tf.data.Dataset.from_tensor_slices(tf_columns(n))
              .batch(BATCH)
              .map(scale_and_mask, num_parallel_calls=tf.data.AUTOTUNE)
              .prefetch(tf.data.AUTOTUNE))
        return ds.as_numpy_iterator

    def hf_datasets(n):
        import datasets
        data = datasets.Dataset.from_parquet(path(n), columns=COLUMNS).with_format("numpy")

        def epoch():
            for batch in data.iter(batch_size=BATCH):
                yield from numpy_batches(batch)
        return epoch

    per_element = 100_000 if quick else 200_000
    impls = [
        Implementation("nbdata ParquetDataset.map.filter.batch (ds.compile())", "nbdata",
                       nbdata_row(None), "nbdata"),
        Implementation("nbdata ... num_parallel_reads=AUTOTUNE", "nbdata",
                       nbdata_row(-1), "nbdata"),
        Implementation("pyarrow.parquet.read_table + NumPy [a]", "pyarrow", pyarrow_whole,
                       "pyarrow"),
        Implementation("pyarrow ParquetFile.iter_batches + NumPy [b]", "pyarrow", pyarrow_stream,
                       "pyarrow", full_batches=False),
        Implementation("nbdata global_shuffle(ParquetDataset).map.filter.batch [e]", "nbdata",
                       nbdata_global_shuffle, "nbdata"),
        Implementation("pyarrow read_table + NumPy permutation, then as [a] [e]", "pyarrow",
                       pyarrow_permuted, "pyarrow"),
        Implementation("tf.data from_tensor_slices(columns) per-element map/filter/batch [c]",
                       "tf.data", tf_per_element, "tensorflow", prefix=per_element),
        Implementation("tf.data from_tensor_slices(columns) batch-then-map [c][d]", "tf.data",
                       tf_batch_then_map, "tensorflow", full_batches=False),
        Implementation("Hugging Face datasets with_format('numpy').iter + NumPy [b]", "datasets",
                       hf_datasets, "datasets", full_batches=False),
    ]
    notes = ("[a] the whole file read at once (multithreaded), NumPy over whole columns, then "
             "batches.\n[b] NumPy per record batch: batches of <=256.\n"
             "[c] the columns loaded into memory first (untimed), strings included.\n"
             "[d] filters after batching: same rows, batches of <=256 (~171).\n"
             "[e] every row once per epoch in a random order (a new one per epoch); the "
             "nbdata row gathers rows by position from the file's row groups.")
    return Workload(f"parquet: {n_rows:,} rows x (8 float32, int64, string) -> map/filter/"
                    f"batch({BATCH})", "rows", n_rows, impls, _checker(), notes,
                    baseline_group="pyarrow", baseline_label="vs pyarrow")


def _checker():
    @functools.cache
    def expected(n):
        cols = values(n)
        kept = cols["i"] % 3 != 0
        return [(cols[c][kept] - np.float32(0.5)) * np.float32(2.0) for c in FLOATS] + [cols["i"][kept]]

    def check(batches: list, n: int, full_batches: bool) -> Optional[str]:
        if not batches:
            return "no batches"
        if any(len(b[-1]) > BATCH for b in batches):
            return f"a batch larger than {BATCH}"
        if full_batches and any(len(b[-1]) != BATCH for b in batches[:-1]):
            return "a batch before the last is not full"
        got = [np.concatenate([np.asarray(b[k]) for b in batches]) for k in range(9)]
        want = expected(n)
        if [g.dtype for g in got] != [np.float32] * 8 + [np.int64]:
            return f"dtypes {[str(g.dtype) for g in got]}"
        order = np.argsort(got[8], kind="stable")
        for k in range(9):
            if not np.array_equal(got[k][order], want[k]):
                return f"column {COLUMNS[k]} differs from NumPy's result"
        return None
    return check

