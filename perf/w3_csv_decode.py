"""w3: CSV lines of 4 floats and 1 int, read as text lines, batched by 256, decoded."""

from __future__ import annotations

from typing import Optional

import numpy as np

from perf.files import cached_file
from perf.measure import Implementation, Workload, nbdata_rows

BATCH = 256
FULL_ROWS = 1_000_000
QUICK_ROWS = 100_000


def values(n: int):
    """Row i: four floats with up to 6 decimals (as written) and the int i * 7 - 3."""
    rng = np.random.default_rng(3)
    floats = np.round(rng.normal(0, 100, (n, 4)), 6)
    ints = np.arange(n, dtype=np.int64) * 7 - 3
    return floats, ints


def data_file(n: int) -> str:
    def write(path):
        floats, ints = values(n)
        with open(path, "w") as f:
            for s in range(0, n, 100_000):
                rows = zip(*(floats[s:s + 100_000, j].tolist() for j in range(4)),
                           ints[s:s + 100_000].tolist())
                f.write("".join("%r,%r,%r,%r,%d\n" % row for row in rows))
    return cached_file(f"w3-{n}.csv", write)


def nbdata_dataset(nd, path: str):
    defaults = [np.float32(0)] * 4 + [np.int32(0)]  # TF's dtypes for [0.0] and [0]
    return (nd.TextLineDataset(path).batch(BATCH)
            .map(lambda lines: nd.io.decode_csv(lines, defaults)))


def build(quick: bool) -> Workload:
    n_rows = QUICK_ROWS if quick else FULL_ROWS

    def head(n):
        return (data_file(n),)

    nbdata_fused, nbdata_reference = nbdata_rows(nbdata_dataset, head)

    def tf_rows(parallel: bool):
        def prepare(n):
            import tensorflow as tf
            defaults = [[0.0]] * 4 + [[0]]
            ds = tf.data.TextLineDataset(data_file(n)).batch(BATCH)
            if parallel:
                ds = ds.map(lambda lines: tf.io.decode_csv(lines, defaults),
                            num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
            else:
                ds = ds.map(lambda lines: tf.io.decode_csv(lines, defaults))
            return ds.as_numpy_iterator
        return prepare

    def pyarrow_csv(n):
        import pyarrow as pa
        import pyarrow.csv as pacsv
        path = data_file(n)
        names = ["a", "b", "c", "d", "e"]
        types = {c: pa.float32() for c in names[:4]} | {"e": pa.int32()}
        read = pacsv.ReadOptions(column_names=names)
        convert = pacsv.ConvertOptions(column_types=types)

        def epoch():
            table = pacsv.read_csv(path, read_options=read, convert_options=convert)
            yield tuple(table.column(c).to_numpy() for c in names)
        return epoch

    slow = 10_000 if quick else 50_000
    impls = [
        Implementation("nbdata TextLine.batch.map(decode_csv) (ds.compile())", "nbdata",
                       nbdata_fused, "nbdata"),
        Implementation("nbdata reference (fusion=False)", "nbdata", nbdata_reference, "nbdata",
                       prefix=slow),
        Implementation("pyarrow.csv.read_csv -> NumPy columns [a]", "pyarrow", pyarrow_csv,
                       "pyarrow", full_batches=False),
        Implementation("tf.data TextLine.batch.map(decode_csv)", "tf.data", tf_rows(False),
                       "tensorflow"),
        Implementation("tf.data TextLine.batch.map(decode_csv, AUTOTUNE).prefetch [best]",
                       "tf.data", tf_rows(True), "tensorflow"),
    ]
    return Workload(f"w3: {n_rows:,} CSV lines (4 floats, 1 int) -> batch({BATCH}) -> decode_csv",
                    "lines", n_rows, impls, check, baseline_group="pyarrow",
                    baseline_label="vs pyarrow.csv",
                    notes="[a] the whole file into arrays in one call (multithreaded), "
                          "no batches; [best] tf.data's parallel form.")


def check(batches: list, n: int, full_batches: bool) -> Optional[str]:
    """Five columns, float32 x4 and int32, each value as written (floats rounded to float32)."""
    if not batches:
        return "no batches"
    cols = [np.concatenate([np.asarray(b[j]) for b in batches]) for j in range(5)]
    floats, ints = values(n)
    if [c.dtype for c in cols] != [np.float32] * 4 + [np.int32]:
        return f"dtypes {[str(c.dtype) for c in cols]}, want float32 x4, int32"
    for j in range(4):
        if not np.array_equal(cols[j], floats[:, j].astype(np.float32)):
            return f"column {j} differs from the values written"
    if not np.array_equal(cols[4], ints.astype(np.int32)):
        return "column 4 differs from the values written"
    if full_batches and any(len(b[0]) != BATCH for b in batches[:-1]):
        return f"a batch other than the last is not {BATCH} long"
    return None
